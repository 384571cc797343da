"""Who hears of a change on a node: its subscribers, grouped as notifications go out."""

from __future__ import annotations

from xmpp_queue.core.batcher import Work
from xmpp_queue.core.effects import DeleteNotice, headline
from xmpp_queue.core.model import Node, Subscription, SubscriptionState
from xmpp_queue.core.ports import Transaction
from xmpp_queue.core.subscribe_options import SubscribeOptions, max_batch_of


def options_of(sub: Subscription) -> SubscribeOptions:
    deliver = sub.options.get("pubsub#deliver", ("1",))[0] not in ("0", "false")
    return SubscribeOptions(
        sub.queue_requests, deliver, dict(sub.options), max_batch_of(sub.options)
    )


async def subscriber_jids(tx: Transaction, node_id: str) -> list[str]:
    """Every subscribed JID of a node, once each, in subscription order."""
    subs = await tx.subscriptions.for_node(node_id)
    return list(dict.fromkeys(s.jid for s in subs if s.state is SubscriptionState.SUBSCRIBED))


async def delivery_targets(tx: Transaction, node_id: str) -> dict[str, tuple[str, ...]]:
    """Subscribed, delivering subscriptions grouped by JID (one message per JID)."""
    targets: dict[str, list[str]] = {}
    for s in await tx.subscriptions.for_node(node_id):
        if s.state is SubscriptionState.SUBSCRIBED and options_of(s).deliver:
            targets.setdefault(s.jid, []).append(s.subid)
    return {jid: tuple(subids) for jid, subids in targets.items()}


async def delete_and_tell(work: Work, node: Node, redirect: str | None) -> None:
    """Remove the node (with everything it holds) and tell its subscribers (§8.4)."""
    jids = await subscriber_jids(work.tx, node.node_id)
    await work.tx.nodes.remove(node.node_id)
    if node.config.notify_delete:
        loud = headline(node.config)
        work.effects.extend(DeleteNotice(j, node.node_id, redirect, loud) for j in jids)
    work.deadlines_changed = True
