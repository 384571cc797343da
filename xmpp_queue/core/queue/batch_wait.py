"""Holding a short batch for a subscriber that asked to wait for a fuller one.

``pubsub#queue_batch_wait`` (this service's subscription option, milliseconds) lets
a worker that takes batches (``pubsub#queue_max_batch``) trade a bounded delay for
fewer stanzas when items trickle in: one notification of eight items and one
retract of eight acks instead of eight of each. Kafka's ``fetch.max.wait.ms`` and
Pulsar's batch-receive timeout are the same bargain, made on the consumer's side.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from xmpp_queue.core.batcher import Work
from xmpp_queue.core.model import Item, Node, Subscription
from xmpp_queue.core.subscribe_options import max_batch_of


def ready_since(item: Item) -> datetime:
    """When a ready item became ready: published, or its delay (a retry back-off, a
    later start) ended after that."""
    available = item.available_at
    return item.published_at if available is None else max(available, item.published_at)


async def batch_after_wait(
    work: Work, node: Node, sub: Subscription, wait_ms: int, room: int | None
) -> list[Item] | None:
    """None to send nothing yet, holding the ready items for a fuller batch; else the
    next ready items, which go to *sub* together (none: no batch is waited for).

    Only when the subscriber next in turn takes batches and set
    ``pubsub#queue_batch_wait`` (*wait_ms*, above 0: the caller read it): while fewer
    items are ready than it would take in one notification (its batch size, or its room
    if that is smaller), and the oldest of them became ready less than the wait ago,
    nothing is sent and the queue is filed to be dispatched when that wait ends, or
    sooner by the next operation that fills the batch. Then the batch goes to *sub*
    whole: handed out item by item as usual (fewest in flight first) it would be spread
    over every worker with room, a notification each. *room* is the subscriber's room
    when the caller knows it (a single-active queue), else it is read here.

    An ordered queue never holds: it hands out one item of a key at a time, so with
    few keys a batch could never fill and every item of a key would wait in turn.
    """
    if node.config.queue_ordered:
        return []
    tx, node_id = work.tx, node.node_id
    if room is None:
        room = (sub.queue_requests or 0) - await tx.items.held_by(node_id, sub.subid)
    want = min(max_batch_of(sub.options), room)
    if want <= 1:
        return []
    ready = await tx.items.next_ready(node_id, work.now, want)
    if not ready or len(ready) >= want:
        return ready
    since = min(ready_since(item) for item in ready)
    until = since + timedelta(milliseconds=wait_ms)
    if until <= work.now:
        return ready
    await tx.items.hold_dispatch(node_id, until)
    # Every time, not only for a new wake: a batch whose commit fails announces no
    # deadline, while the wake it filed stays; the next batch that holds tells the
    # timer again (one deadline read per commit batch, not per operation).
    work.deadlines_changed = True
    return None
