"""A lock holder's own verdicts beyond ack and nack: unlock-later and dead-letter-now.

XEP-0254 gives a worker two answers, retract (done) and unlock (try again now).
Workers meet two more cases: "try again, but not before N seconds" (a rate
limit, a dependency down) and "this item can never succeed" (bad schema: a
poison item should not burn its remaining deliveries). Both come in this
project's namespace (``<unlock delay='N'>``, ``<dead-letter reason=''>``).

Kept apart from :mod:`engine` so the rules read in one place; they use the same
ports, ledger kinds and notices as the engine's own requeue and dead-letter:

- unlock-later: the item is unlocked (conditional on the same holder, so a
  racing timeout loses cleanly) and offered again at ``max(now + delay, the
  node's retry back-off)``. At its delivery limit it is dead-lettered instead,
  exactly as a plain unlock would be.
- dead-letter-now: the item moves to the node's dead-letter node at once, with
  ``reason`` (the worker's words) and ``origin-*`` headers; no unlock notice,
  the holder asked for it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta

from xmpp_queue.core.batcher import Work
from xmpp_queue.core.effects import UnlockNotice
from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import Item, Node
from xmpp_queue.core.queue.deadlines import (
    dead_letter_node,
    must_dead_letter,
    retry_available_at,
)

log = logging.getLogger("xmpp_queue.queue")

MAX_DELAY = 7 * 86400  # seconds; as long as a lock extension may be
MAX_REASON = 200  # characters kept of a worker's reason

# (work, node_id, item_id, payload, size, publisher, headers, origin) -> None
PublishInternal = Callable[
    [Work, str, str, str | None, int, str, Mapping[str, str], Node], Awaitable[None]
]


def _ledger(work: Work, kind: EventKind, node: Node, item: Item) -> None:
    work.tx.ledger.append(
        LedgerEvent(
            work.now,
            kind,
            node.node_id,
            item.item_id,
            item.lock_jid,
            item.deliveries,
            item.payload_size,
        )
    )


async def unlock_later(
    work: Work, node: Node, item: Item, delay: int, publish_internal: PublishInternal
) -> bool:
    """Unlock *item* (a snapshot taken while the requester held it), not to be
    offered before *delay* seconds. False when the lock ended meanwhile."""
    if item.locked_by is None:
        return False
    if must_dead_letter(node.config, item.deliveries):
        return await dead_letter_now(work, node, item, "max-deliveries", publish_internal)
    earliest = work.now + timedelta(seconds=delay)
    policy = retry_available_at(node.config, item.deliveries, work.now)
    available_at = max(earliest, policy) if policy is not None else earliest
    if not await work.tx.items.unlock(node.node_id, item.item_id, item.locked_by, available_at):
        return False
    _ledger(work, EventKind.UNLOCKED, node, item)
    if item.lock_jid:
        work.effects.append(UnlockNotice(item.lock_jid, node.node_id, item.item_id, "unlocked"))
    work.deadlines_changed = True  # the item's available_at is a deadline to wake for
    log.info(
        "event=unlocked_later node=%s item=%s holder=%s delay=%d",
        node.node_id,
        item.item_id,
        item.lock_jid,
        delay,
    )
    return True


async def dead_letter_now(
    work: Work, node: Node, item: Item, reason: str, publish_internal: PublishInternal
) -> bool:
    """Move *item* to the dead-letter node with *reason*; False if it was gone."""
    target = dead_letter_node(node.node_id, node.config)
    full = await work.tx.items.get(node.node_id, item.item_id)
    if full is None or full.locked_by != item.locked_by:
        return False
    if not await work.tx.items.remove(node.node_id, item.item_id):
        return False
    _ledger(work, EventKind.DEAD_LETTERED, node, item)
    headers = dict(full.headers)
    headers.update(
        {
            "origin-node": node.node_id,
            "origin-item": item.item_id,
            "deliveries": str(item.deliveries),
            "reason": reason[:MAX_REASON] or "rejected",
            "dead-lettered-at": work.now.isoformat(),
        }
    )
    log.info(
        "event=dead_lettered node=%s item=%s deliveries=%d target=%s reason=%r",
        node.node_id,
        item.item_id,
        item.deliveries,
        target,
        headers["reason"],
    )
    await publish_internal(
        work,
        target,
        item.item_id,
        full.payload,
        full.payload_size,
        full.publisher,
        headers,
        node,
    )
    return True
