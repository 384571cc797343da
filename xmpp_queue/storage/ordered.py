"""The per-key index of an ordered queue: which item of each ordering key may be
offered (docs/queueing.md, "Ordering keys").

On a node with ``pubsub#queue_ordered``, every item that carries an ordering
key is a member of its key's :class:`KeyFifo` (seqs in publish order). Exactly
one member per key is **placed**: it alone is in the node's ready, delayed or
locked indexes, so dispatch sees one candidate per key and never walks the
items waiting behind a blocked key. The placed member is the key's locked
member if it has one, else its lowest seq; when it leaves (ack, retract,
purge, dead letter) the next one is placed. ``MemoryState.set_item`` keeps this
in step on every change, and a rollback re-derives it through the same path.

Plain data, no I/O. Removing a member is O(1) (lazy heap deletion); finding
the head is amortised O(log n) in the key's own size, never in the backlog's.
"""

from __future__ import annotations

import heapq

from xmpp_queue.storage.ready import HEAP_SLACK


class KeyFifo:
    """The items of one ordering key of one node, in seq order."""

    __slots__ = ("_heap", "locked", "members", "placed")

    def __init__(self) -> None:
        self._heap: list[int] = []
        self.members: dict[int, str] = {}  # seq -> item id
        self.locked: set[int] = set()  # seqs of members that are locked
        self.placed: int | None = None  # the seq that is in the node's indexes

    def __len__(self) -> int:
        return len(self.members)

    def add(self, seq: int, item_id: str, locked: bool) -> None:
        self.members[seq] = item_id
        if locked:
            self.locked.add(seq)
        heapq.heappush(self._heap, seq)
        if len(self._heap) > 2 * len(self.members) + HEAP_SLACK:
            self._heap = sorted(self.members)

    def remove(self, seq: int) -> bool:
        """Forget *seq*; whether it was a member."""
        if self.members.pop(seq, None) is None:
            return False
        self.locked.discard(seq)
        return True

    def head(self) -> int | None:
        """The lowest member seq (stale heap tops are dropped on the way)."""
        heap, members = self._heap, self.members
        while heap and heap[0] not in members:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def wanted(self) -> int | None:
        """The member that should be placed: the locked one (a key has at most one
        outside a rollback in progress), else the head."""
        if self.locked:
            return min(self.locked)
        return self.head()
