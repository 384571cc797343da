"""Deleting bound queues nobody reads (``pubsub#queue_expire_after``; docs/queueing.md,
"Topics and subscriptions").

A queue bound to a topic collects a copy of every topic item whether or not
anyone reads it; Google Pub/Sub expires such a subscription after a set
time without a subscriber, and so does this service, when the queue's owner
asks for it (off by default: a deletion loses the backlog).

Two halves, both costing only what an operation touched or what came due:

* :func:`settle_with_unused` wraps the settling every write ends with: each
  node the operation touched that is now an eligible, subscriberless bound
  queue is filed in the store's index from the operation's time (the store
  ignores one already filed since its last subscription change). So the clock
  starts when the last subscriber leaves, when the queue is created or bound
  without one, or when the field is set.
* :func:`expire_unused` runs in the timer's sweep: the store names the queues
  whose delay ran out (its index checks each entry lazily: a subscriber that
  came back makes it stale); each is deleted the way an owner's delete does
  it (notifications to its subscribers, its dead-letter and topic links told),
  with an ``expired_unused`` ledger row (not an item event: item_id empty,
  reason the delay in seconds).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from xmpp_queue.core.batcher import Work
from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import Node

log = logging.getLogger("xmpp_queue.unused_queues")

UNUSED_BATCH = 100
"""Queues one sweep deletes at most (more: the next deadline is already due)."""

Settle = Callable[[Work], Awaitable[None]]
Delete = Callable[[Work, Node], Awaitable[None]]


def watched(node: Node) -> bool:
    """A queue whose unsubscribed time counts: bound, with a delay set."""
    cfg = node.config
    return cfg.queue and bool(cfg.queue_topic) and cfg.queue_expire_after > 0


def settle_with_unused(settle: Settle) -> Settle:
    """*settle*, then file the touched queues that became unused (see the docstring)."""

    async def wrapped(work: Work) -> None:
        await settle(work)
        for node_id in list(work.touched):
            node = await work.tx.nodes.get(node_id)
            if node is not None and watched(node):
                if await work.tx.nodes.note_unused(node_id, work.now):
                    work.deadlines_changed = True

    return wrapped


async def expire_unused(w: Work, delete: Delete) -> int:
    """Delete the bound queues unused past their delay; returns how many."""
    deleted = 0
    for node_id in await w.tx.nodes.unused_due(w.now, UNUSED_BATCH):
        node = await w.tx.nodes.get(node_id)
        if node is None or not watched(node) or await w.tx.subscriptions.for_node(node_id):
            continue  # the index checks this too; a deletion is not undone, so twice
        w.tx.ledger.append(
            LedgerEvent(
                w.now,
                EventKind.EXPIRED_UNUSED,
                node_id,
                "",
                reason=str(node.config.queue_expire_after),
            )
        )
        await delete(w, node)
        log.info(
            "event=node_deleted node=%s by=system reason=expired_unused topic=%s after=%ds",
            node_id,
            node.config.queue_topic,
            node.config.queue_expire_after,
        )
        deleted += 1
    if deleted:
        w.deadlines_changed = True
    return deleted
