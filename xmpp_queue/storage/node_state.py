"""One node's state in memory: its items, subscriptions and affiliations, and the
:class:`QueueIndex` that says where each of its items stands.

Kept apart from the store-wide :class:`~xmpp_queue.storage.state.MemoryState` because
a transaction snapshots and restores a node as a whole (``NodeState.copy``): what
belongs to one node, and only that, lives here.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass, field
from datetime import datetime

from xmpp_queue.core.model import Affiliation, Item, Node, Snapshot, Subscription
from xmpp_queue.core.queue.dispatch import RoomIndex
from xmpp_queue.storage.ordered import KeyFifo
from xmpp_queue.storage.ready import ReadyLevels
from xmpp_queue.storage.tail import ColdTail


@dataclass(slots=True)
class QueueIndex:
    """Where each item of a node stands: ready, delayed or locked (exactly one),
    or, on an ordered queue, waiting behind an earlier item of its key (``keys``).

    One mutable object per node, replaced as a whole by a purge, so a
    transaction's snapshot of the node keeps the index that matched its items.
    """

    ready: ReadyLevels = field(default_factory=ReadyLevels)
    # (available_at, seq, item_id) of unlocked items held back by a retry delay
    delayed: list[tuple[datetime, int, str]] = field(default_factory=list)
    delayed_live: int = 0
    # The time this node is filed under in MemoryState.delayed_heap (None: not filed);
    # never later than the earliest live entry of ``delayed``.
    delayed_due: datetime | None = None
    locked: dict[str, None] = field(default_factory=dict)  # item ids, an ordered set
    loads: dict[str, int] = field(default_factory=dict)  # subid -> locked items
    held: dict[str, dict[str, None]] = field(default_factory=dict)  # subid -> its item ids
    room: RoomIndex = field(default_factory=RoomIndex)  # who gets the next item
    payload_bytes: int = 0  # of every item of the node (pubsub#max_bytes)
    keys: dict[str, KeyFifo] = field(default_factory=dict)  # ordered queues only
    tail: ColdTail | None = None  # committed plain waiting items kept as seqs (backlog.py)


@dataclass(slots=True)
class NodeState:
    """One node with everything that belongs to it.

    Containers are changed in place by single-key writes and replaced only by
    a purge (``items``, ``queue``); :meth:`copy` is the snapshot a transaction
    takes before a node-level change.
    """

    node: Node
    items: dict[str, Item] = field(default_factory=dict)  # seq order (see ``ordered``)
    subs: dict[str, Subscription] = field(default_factory=dict)  # creation order
    sub_ids: dict[str, int] = field(default_factory=dict)  # subid -> subscriptions.id
    affiliations: dict[str, Affiliation] = field(default_factory=dict)
    queue: QueueIndex = field(default_factory=QueueIndex)
    # False after a rollback put removed items back at the end of ``items``.
    ordered: bool = True
    # Dedup window: item id -> when it was acked or retracted, oldest first.
    # Committed facts only (the store adds them after each commit; see ``store``).
    finished: dict[str, datetime] = field(default_factory=dict)
    # Retained (acked, kept for a seek) items: in no queue index, payloads cold.
    retained: dict[str, Item] = field(default_factory=dict)
    # Named snapshots; replaced as a whole on a change (a node-level change).
    snapshots: dict[str, Snapshot] = field(default_factory=dict)

    def copy(self) -> NodeState:
        return NodeState(
            self.node,
            self.items,
            self.subs,
            self.sub_ids,
            self.affiliations,
            self.queue,
            self.ordered,
            self.finished,
            self.retained,
            self.snapshots,
        )

    def in_order(self) -> dict[str, Item]:
        """``items`` in seq order (sorting in place, once, after a rollback)."""
        if not self.ordered:
            ordered = sorted(self.items.values(), key=lambda i: i.seq)
            self.items.clear()
            self.items.update((i.item_id, i) for i in ordered)
            self.ordered = True
        return self.items

    def position(self, item_id: str) -> int | None:
        """Offset of *item_id* in publish order (None: not here), for XEP-0059 paging.

        A scan of the dict's keys in C (``operator.indexOf``): a few milliseconds
        for 800,000 items, and nothing is copied.
        """
        items = self.in_order()
        return operator.indexOf(items, item_id) if item_id in items else None

    def window(self, start: int, stop: int) -> list[Item]:
        """Items ``start:stop`` in publish order, walking from the nearer end
        (so the last page of a long node does not skip over all the others)."""
        items = self.in_order()
        count = len(items)
        stop = min(stop, count)
        if start >= stop:
            return []
        if start <= count - stop:
            return list(itertools.islice(items.values(), start, stop))
        tail = list(itertools.islice(reversed(items.values()), count - stop, count - start))
        tail.reverse()
        return tail

    def subs_in_order(self) -> None:
        ordered = sorted(self.subs.values(), key=lambda s: self.sub_ids[s.subid])
        self.subs.clear()
        self.subs.update((s.subid, s) for s in ordered)
