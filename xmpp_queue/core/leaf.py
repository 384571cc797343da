"""LeafPolicy: an ordinary XEP-0060 node, where every subscriber hears of every item.

Publish stores the item (when the node persists items), trims to
``pubsub#max_items`` by dropping the oldest, and notifies every delivering
subscription; retract follows XEP-0060 §7.2 (publishers retract their own,
owners any); a new subscriber may get the last item (§6.1.7). Nothing here is
locked: unlock, extend and the other queue verbs are not this type's
(``NodeTypes.queue_of`` refuses them with NotAQueue before any policy runs).
"""

from __future__ import annotations

from xmpp_queue.core.access import require
from xmpp_queue.core.attributes import Schedule, schedule, scheduled_item
from xmpp_queue.core.audience import delete_and_tell, delivery_targets, subscriber_jids
from xmpp_queue.core.batcher import Work
from xmpp_queue.core.capabilities import Action, may
from xmpp_queue.core.context import ServiceContext
from xmpp_queue.core.effects import (
    ItemNotice,
    NoticeItem,
    PurgeNotice,
    RetractNotice,
    headline,
)
from xmpp_queue.core.errors import Forbidden, ItemNotFound
from xmpp_queue.core.model import (
    Actor,
    Affiliation,
    Item,
    NewItem,
    Node,
    NodeConfig,
    SendLastPublished,
    Subscription,
    SubscriptionState,
    bare,
)
from xmpp_queue.core.subscribe_options import SubscribeOptions


class LeafPolicy:
    def __init__(self, ctx: ServiceContext) -> None:
        self._ctx = ctx

    def validate(self, node_id: str, config: NodeConfig) -> None:
        return None

    async def may_leave(self, work: Work, node: Node, config: NodeConfig) -> None:
        return None

    def check_options(self, node: Node, jid: str, options: SubscribeOptions) -> None:
        return None

    def check_owner_subscription(self, node: Node, jid: str, state: SubscriptionState) -> None:
        return None

    def check_room(self, node: Node, count: int, size: int) -> None:
        return None  # a leaf makes room by dropping its oldest items

    async def publish(
        self,
        work: Work,
        node: Node,
        item_id: str,
        item: NewItem,
        publisher: str,
        source: str | None = None,
    ) -> None:
        """Store (if persistent), trim to ``max_items``, notify every subscriber.

        Attributes travel with the item; an expiry (``pubsub#item_expire``,
        ``Expires``/``TTL``) removes a stored item when due. A ``Start`` means
        nothing to a broadcast: it is kept as an attribute, not waited for."""
        cfg, items = node.config, work.tx.items
        plan = schedule(item.attributes, cfg, work.now, delays=False)
        if cfg.persist_items:
            if await items.get(node.node_id, item_id) is not None:
                await items.replace_payload(
                    node.node_id,
                    item_id,
                    item.payload,
                    item.size,
                    publisher,
                    work.now,
                    item.attributes,
                    plan.priority,
                    plan.expires_at,
                )
            else:
                unordered = Schedule(plan.priority, None, plan.expires_at)
                await items.put(
                    scheduled_item(node.node_id, item_id, publisher, item, unordered, work.now)
                )
                await self._trim(work, node)
        targets = await delivery_targets(work.tx, node.node_id)
        if not targets:
            return  # a topic read only through its bound queues: no notice to build
        notice = NoticeItem(
            item_id,
            item.payload if cfg.deliver_payloads else None,
            self._ctx.shown_publisher(node, publisher),
            dict(item.attributes),
        )
        self._tell_targets(work, node, notice, targets)

    async def _trim(self, work: Work, node: Node) -> None:
        """A leaf keeps its newest items: the oldest go past ``max_items`` or
        ``max_bytes`` (XEP-0060's persistence of the last N items)."""
        items, node_id, cfg = work.tx.items, node.node_id, node.config
        if cfg.max_items is not None:
            overflow = await items.count(node_id) - cfg.max_items
            if overflow > 0:
                for old in await items.oldest_ids(node_id, overflow):
                    await items.remove(node_id, old)
        if cfg.max_bytes is not None:
            while await items.payload_bytes(node_id) > cfg.max_bytes:
                oldest = await items.oldest_ids(node_id, 2)
                if len(oldest) < 2:
                    break  # the newest item stays, however large
                await items.remove(node_id, oldest[0])

    async def _tell(self, work: Work, node: Node, notice: NoticeItem) -> None:
        self._tell_targets(work, node, notice, await delivery_targets(work.tx, node.node_id))

    @staticmethod
    def _tell_targets(
        work: Work, node: Node, notice: NoticeItem, targets: dict[str, tuple[str, ...]]
    ) -> None:
        loud = headline(node.config)
        for jid, subids in targets.items():
            work.effects.append(ItemNotice(jid, node.node_id, (notice,), subids, headline=loud))

    async def arrived(self, work: Work, node: Node, item: Item) -> None:
        """A dead letter (or redriven item) moved in: announce it, never trim for it."""
        payload = item.payload if node.config.deliver_payloads else None
        publisher = self._ctx.shown_publisher(node, item.publisher)
        await self._tell(
            work, node, NoticeItem(item.item_id, payload, publisher, dict(item.headers))
        )

    async def retract(
        self,
        work: Work,
        node: Node,
        affiliation: Affiliation,
        item: Item | None,
        item_id: str,
        actor: Actor,
        notify: bool | None,
    ) -> None:
        if affiliation is Affiliation.OUTCAST:
            require(affiliation, Action.RETRACT_ANY)
        own = item is not None and bare(item.publisher) == actor.bare
        if not (
            may(affiliation, Action.RETRACT_ANY) or (own and may(affiliation, Action.RETRACT_OWN))
        ):
            raise Forbidden("retract")
        if item is None or not await work.tx.items.remove(node.node_id, item_id):
            raise ItemNotFound(node.node_id, item_id)
        if notify if notify is not None else node.config.notify_retract:
            for jid, subids in (await delivery_targets(work.tx, node.node_id)).items():
                work.effects.append(
                    RetractNotice(
                        jid, node.node_id, (item_id,), subids, headline=headline(node.config)
                    )
                )

    async def subscribed(self, work: Work, node: Node, sub: Subscription) -> None:
        """§6.1.7: send the last published item when the node is configured to."""
        if node.config.send_last_published_item is SendLastPublished.NEVER:
            return
        last = await work.tx.items.latest(node.node_id, 1)
        if last:
            payload = last[0].payload if node.config.deliver_payloads else None
            work.effects.append(
                ItemNotice(
                    sub.jid,
                    node.node_id,
                    (
                        NoticeItem(
                            last[0].item_id,
                            payload,
                            self._ctx.shown_publisher(node, last[0].publisher),
                        ),
                    ),
                    (sub.subid,),
                    headline=headline(node.config),
                )
            )

    async def purge(self, work: Work, node: Node) -> int:
        removed = await work.tx.items.remove_all(node.node_id)
        if node.config.notify_retract:
            work.effects.extend(
                PurgeNotice(j, node.node_id, headline=headline(node.config))
                for j in await subscriber_jids(work.tx, node.node_id)
            )
        return len(removed)

    async def delete(self, work: Work, node: Node, redirect: str | None) -> None:
        await delete_and_tell(work, node, redirect)

    async def settle(self, work: Work, node: Node) -> None:
        return None
