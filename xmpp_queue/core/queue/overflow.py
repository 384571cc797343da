"""What a full queue does with one more item: refuse it, or drop its oldest waiting ones.

``pubsub#max_items`` and ``pubsub#max_bytes`` bound a queue. With
``pubsub#queue_overflow`` ``refuse`` (the default) a publish past either is
refused (node-full) and nothing is dropped. With ``drop-oldest`` (the
truncation policy of Pub/Sub's 2015 design) the oldest *waiting* items leave,
in publish order, until the new one fits; an item a worker holds is never
dropped, so if only locked items stand in the way the publish is still refused.
Each dropped item gets a ``dropped`` ledger row (reason ``truncated``), and every subscriber is told
once per operation how many items and bytes went (a truncation notice).
"""

from __future__ import annotations

from xmpp_queue.core.audience import subscriber_jids
from xmpp_queue.core.batcher import Work
from xmpp_queue.core.effects import TruncateNotice, headline
from xmpp_queue.core.errors import NodeFull
from xmpp_queue.core.ledger import REASON_TRUNCATED, EventKind, record
from xmpp_queue.core.model import Node

DROP_OLDEST = "drop-oldest"


def _over(node: Node, count: int, size: int) -> str | None:
    """The limit that *count* items of *size* payload bytes would pass, if any."""
    cfg = node.config
    if cfg.max_items is not None and count > cfg.max_items:
        return "pubsub#max_items"
    if cfg.max_bytes is not None and size > cfg.max_bytes:
        return "pubsub#max_bytes"
    return None


async def make_room(work: Work, node: Node, incoming: int) -> None:
    """Let one more item of *incoming* payload bytes in, or raise NodeFull."""
    items, node_id = work.tx.items, node.node_id
    count = await items.count(node_id) + 1
    size = await items.payload_bytes(node_id) + incoming
    limit = _over(node, count, size)
    if limit is None:
        return
    if node.config.queue_overflow != DROP_OLDEST:
        raise NodeFull(f"queue {node_id} holds {limit}")
    dropped = dropped_bytes = 0
    while limit is not None:
        victims = await items.oldest_waiting(node_id, 64)
        if not victims:
            raise NodeFull(f"queue {node_id} holds {limit} and every item is being worked on")
        for victim in victims:
            await items.remove(node_id, victim.item_id)
            record(work.tx.ledger, work.now, EventKind.DROPPED, victim, reason=REASON_TRUNCATED)
            count, size = count - 1, size - victim.payload_size
            dropped, dropped_bytes = dropped + 1, dropped_bytes + victim.payload_size
            limit = _over(node, count, size)
            if limit is None:
                break
    for jid in await subscriber_jids(work.tx, node_id):
        work.effects.append(
            TruncateNotice(jid, node_id, dropped, dropped_bytes, headline(node.config))
        )
