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

A member is *hot* (its :class:`Item` in ``NodeState.items``, its id here) or,
past the store's backlog budget, *cold* (``backlog``): its seq alone, in
``cold`` (8 bytes in an ascending array), its row in the database holding the
rest. A key costs a few hundred bytes besides its members (this object, its
heap, its hot members' dict, its cold array, its entry in the node's keys), so
the parts a key may not need (the set of locked members, the cold array) are
made when first needed. Only
a member that is not placed goes cold. When a cold member becomes the one to
place, it cannot be placed until it is read back: the key is left unplaced
and named in its node's cold tail (``ColdTail.cold_heads``), and the next
dispatch reads it back first (``backlog.ensure_heads``).

Plain data, no I/O. Removing a member is O(1) (lazy heap deletion); finding
the head is amortised O(log n) in the key's own size, never in the backlog's.
"""

from __future__ import annotations

import bisect
import heapq
from array import array

from xmpp_queue.storage.ready import HEAP_SLACK

COOL_SLACK = 8
"""A key's heap of hot members is rebuilt when members going cold left more than
twice as many entries as hot members, plus this (an entry is some 40 bytes: more
than the cold seq itself)."""

COLD_SLACK = 64
"""Cold seqs taken from the front are dropped from the array once they are more
than this and half of it."""


class KeyFifo:
    """The items of one ordering key of one node, in seq order."""

    __slots__ = ("_cold_at", "_heap", "cold", "locked", "members", "placed")

    def __init__(self) -> None:
        self._heap: list[int] = []
        self.members: dict[int, str] = {}  # seq -> item id, of hot members
        self.cold: array[int] | None = None  # seqs of cold members, ascending, from _cold_at
        self._cold_at = 0
        self.locked: set[int] | None = None  # seqs of members that are locked
        self.placed: int | None = None  # the seq that is in the node's indexes

    def __len__(self) -> int:
        cold = self.cold
        return len(self.members) + (len(cold) - self._cold_at if cold is not None else 0)

    def add(self, seq: int, item_id: str, locked: bool) -> None:
        """*seq* as a hot member (a cold one brought back becomes hot)."""
        if self.cold is not None:
            self._remove_cold(seq)
        self.members[seq] = item_id
        if locked:
            if self.locked is None:
                self.locked = set()
            self.locked.add(seq)
        heapq.heappush(self._heap, seq)
        if len(self._heap) > 2 * len(self.members) + HEAP_SLACK:
            self._heap = sorted(self.members)

    def add_cold(self, seq: int) -> None:
        """*seq* as a cold member (it is not placed, not locked and not hot)."""
        cold = self.cold
        if cold is None:
            self.cold, self._cold_at = array("q", (seq,)), 0
            return
        if seq > cold[-1]:
            cold.append(seq)  # the usual case: members go cold in publish order
            return
        at = bisect.bisect_left(cold, seq, self._cold_at)
        if at < len(cold) and cold[at] == seq:
            return
        if at == self._cold_at and at > 0:
            self._cold_at = at - 1  # before the first: into the taken slot
            cold[at - 1] = seq
            return
        cold.insert(at, seq)

    def extend_cold(self, seqs: list[int]) -> None:
        """Many cold members at once (a load)."""
        live = self.cold[self._cold_at :] if self.cold is not None else ()
        self.cold, self._cold_at = array("q", sorted({*live, *seqs})), 0

    def _remove_cold(self, seq: int) -> bool:
        cold = self.cold
        if cold is None:
            return False
        at = bisect.bisect_left(cold, seq, self._cold_at)
        if at >= len(cold) or cold[at] != seq:
            return False
        if at == self._cold_at:
            self._cold_at += 1  # the usual case: the head comes back
            if self._cold_at == len(cold):
                self.cold, self._cold_at = None, 0
            elif self._cold_at > COLD_SLACK and 2 * self._cold_at > len(cold):
                del cold[: self._cold_at]
                self._cold_at = 0
        else:
            del cold[at]  # from the middle (a read by id, an expiry): one key's seqs
        return True

    def cool(self, seq: int) -> bool:
        """Make the hot member *seq* cold; whether it could be (not placed, not locked)."""
        if seq == self.placed or (self.locked and seq in self.locked):
            return False
        if self.members.pop(seq, None) is None:
            return False
        self.add_cold(seq)  # its heap entry is stale from now on
        if len(self._heap) > 2 * len(self.members) + COOL_SLACK:
            self._heap = sorted(self.members)  # a stale entry costs more than the seq
        return True

    def cold_first(self, limit: int) -> list[int]:
        """The *limit* lowest cold seqs."""
        cold = self.cold
        if cold is None:
            return []
        return cold[self._cold_at : self._cold_at + limit].tolist()

    def is_cold(self, seq: int) -> bool:
        cold = self.cold
        if cold is None:
            return False
        at = bisect.bisect_left(cold, seq, self._cold_at)
        return at < len(cold) and cold[at] == seq

    def remove(self, seq: int) -> bool:
        """Forget *seq*; whether it was a member (hot or cold)."""
        if self.members.pop(seq, None) is None:
            return self._remove_cold(seq)
        if self.locked:
            self.locked.discard(seq)
        return True

    def head(self) -> int | None:
        """The lowest member seq, hot or cold (stale heap tops are dropped on the way)."""
        heap, members = self._heap, self.members
        while heap and heap[0] not in members:
            heapq.heappop(heap)
        hot = heap[0] if heap else None
        if self.cold is None:
            return hot
        first = self.cold[self._cold_at]
        return first if hot is None or first < hot else hot

    def wanted(self) -> int | None:
        """The member that should be placed: the locked one (a key has at most one
        outside a rollback in progress), else the head."""
        if self.locked:
            return min(self.locked)
        return self.head()
