"""The cold tail of a node: committed waiting items kept in memory as a seq alone
(and their due and expiry times, if they have them).

A deep backlog is read from its head only, so most of its items need nothing
in memory but their place in dispatch order. A *plain* waiting item (unlocked,
not delayed, no ordering key, not retained) that was committed
while the store's backlog budget was spent leaves ``NodeState.items`` and the
ready index and is kept here as its seq, filed under its priority level: about
8 bytes in an ``array('q')`` instead of some 400 bytes of objects. Its row in
the database holds everything else (id, payload, headers, times).

Reads bring items back (``backlog``): a dispatch takes the head of each level
(with a prefetch), a read by id looks the row up, paging merges hot and cold
seqs. An item brought back is an ordinary item again (hot); nothing records
the move in a transaction, since memory and database agree on it either way.

Removal is by head offset (the common case: the head is taken) or, for an item
in the middle (a read by id), by a small set of gone seqs skipped on the way;
the array is compacted once half of it is dead.

A *delayed* waiting item (a ``Start`` in the future, a retry delay; otherwise
plain) goes cold the same way, filed in a second set of levels
(``ColdTail.delayed``) and in the node's :class:`~xmpp_queue.storage.schedule.DueIndex`
(24 bytes in all). When it comes due (``promote``, driven by the store's
delayed-node heap, see ``time_indexes``) its seq moves to its ready level, in
publish order like any other; paging and counts see both sets of levels.

An item with an expiry time, delayed or not, also has (expires, seq) in
``ColdTail.expiry`` (16 bytes more), so expiry fires for it (``time_indexes``:
``cold_expired``); it is read back whole when it expires.

On an ordered queue, a waiting item with an ordering key that is not its key's
placed member (``ordered``) goes cold as its seq in its key's
:class:`~xmpp_queue.storage.ordered.KeyFifo` and here in ``ColdTail.keyed`` (16
bytes in all, plus its expiry pair if it has one): ``keyed`` is what counts,
paging and reads by id see; the key's fifo is what dispatch order needs. A key
whose next member to place is cold is named in ``cold_heads`` until a dispatch
reads that member back (``backlog.ensure_heads``).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from array import array
from collections.abc import Iterable, Iterator

from xmpp_queue.storage.id_filter import IdFilter
from xmpp_queue.storage.schedule import DueIndex

GONE_SLACK = 1024
"""A level rewrites its array without the seqs taken from its middle once they
are more than this and a sixteenth of it (delayed ones come due in time order,
not seq order)."""


class TailLevel:
    """The seqs of one priority level's cold items, ascending."""

    __slots__ = ("gone", "head", "seqs")

    def __init__(self) -> None:
        self.seqs = array("q")
        self.head = 0  # seqs[:head] are taken
        self.gone: set[int] = set()  # taken seqs beyond the head

    def __len__(self) -> int:
        return len(self.seqs) - self.head - len(self.gone)

    def add(self, seq: int) -> None:
        seqs = self.seqs
        if not seqs or seq > seqs[-1]:
            seqs.append(seq)  # the usual case: a new item is the newest
            return
        at = bisect.bisect_left(seqs, seq, self.head)
        if at < len(seqs) and seqs[at] == seq:
            self.gone.discard(seq)  # came back
            return
        head = self.head
        if head and at - head < len(seqs) - at:
            # Nearer the head (a delayed item that came due is usually older than
            # most ready ones): shift the front into a taken slot, not the rest.
            seqs[head - 1 : at - 1] = seqs[head:at]
            seqs[at - 1] = seq
            self.head = head - 1
            return
        seqs.insert(at, seq)

    def extend_sorted(self, seqs: list[int]) -> None:
        """Many seqs at once (loading); sorted here, in C, whatever their order."""
        if len(self):
            merged = sorted({*self.live(), *seqs})
        else:  # the load: one group of unique seqs from the database
            merged = sorted(seqs)
        self.seqs = array("q", merged)
        self.head = 0
        self.gone = set()

    def merge_sorted(self, seqs: list[int]) -> None:
        """Ascending seqs none of which is here, in one pass (the two runs merge in C)."""
        if len(self):
            self.seqs = array("q", sorted(itertools.chain(self.live(), seqs)))
        else:
            self.seqs = array("q", seqs)
        self.head = 0
        self.gone = set()

    def __contains__(self, seq: int) -> bool:
        seqs = self.seqs
        at = bisect.bisect_left(seqs, seq, self.head)
        return at < len(seqs) and seqs[at] == seq and seq not in self.gone

    def remove(self, seq: int) -> bool:
        """Take *seq* out; whether it was here."""
        if seq not in self:
            return False
        seqs = self.seqs
        if seqs[self.head] == seq:
            self.head += 1
            self._skip_gone()
        else:
            self.gone.add(seq)
            if len(self.gone) > GONE_SLACK and len(self.gone) * 16 > len(seqs):
                self._drop_gone()  # taken out of order (a set entry is ~70 bytes)
                return True
        if self.head > 4096 and self.head * 2 > len(seqs):
            del seqs[: self.head]
            self.head = 0
        return True

    def _drop_gone(self) -> None:
        gone = self.gone
        self.seqs = array("q", [s for s in self.seqs[self.head :] if s not in gone])
        self.head, self.gone = 0, set()

    def _skip_gone(self) -> None:
        seqs, gone = self.seqs, self.gone
        while gone and self.head < len(seqs) and seqs[self.head] in gone:
            gone.discard(seqs[self.head])
            self.head += 1

    def first(self, limit: int) -> list[int]:
        """The *limit* lowest live seqs."""
        found: list[int] = []
        for seq in self.live():
            if len(found) >= limit:
                break
            found.append(seq)
        return found

    def live(self) -> Iterator[int]:
        gone = self.gone
        for seq in self.seqs[self.head :] if self.head else self.seqs:
            if seq not in gone:
                yield seq

    def live_reversed(self) -> Iterator[int]:
        gone, seqs = self.gone, self.seqs
        for at in range(len(seqs) - 1, self.head - 1, -1):
            seq = seqs[at]
            if seq not in gone:
                yield seq

    def count_below(self, seq: int) -> int:
        """Live seqs lower than *seq* (XEP-0059 positions)."""
        below = bisect.bisect_left(self.seqs, seq, self.head) - self.head
        return below - sum(1 for g in self.gone if g < seq)


BULK_PROMOTE = 4096
"""From this many delayed seqs due at once, ``promote`` rebuilds the levels."""


def split_sorted(live: Iterable[int], taken: list[int]) -> tuple[list[int], list[int]]:
    """(seqs of *live* not in *taken*, those in it); both inputs ascending."""
    stay: list[int] = []
    go: list[int] = []
    at, end = 0, len(taken)
    for seq in live:
        while at < end and taken[at] < seq:
            at += 1
        if at < end and taken[at] == seq:
            go.append(seq)
        else:
            stay.append(seq)
    return stay, go


class ColdTail:
    """One node's cold items: a :class:`TailLevel` per priority of ready ones and
    of delayed ones, the delayed ones' due times (``schedule``), and their bytes."""

    __slots__ = (
        "cold_heads",
        "delayed",
        "due",
        "expiry",
        "ids",
        "keyed",
        "levels",
        "payload_bytes",
        "unknown_upto",
    )

    def __init__(self) -> None:
        self.levels: dict[int, TailLevel] = {}  # ready: dispatch takes their heads
        self.delayed: dict[int, TailLevel] = {}  # held back until their due time
        self.due = DueIndex()  # (due, seq) of every delayed one
        self.keyed = TailLevel()  # members of ordering keys, not placed (``ordered``)
        self.cold_heads: set[str] = set()  # keys whose member to place is cold
        self.expiry = DueIndex()  # (expires, seq) of every one with an expiry time
        self.payload_bytes = 0  # also counted in the node's ``QueueIndex.payload_bytes``
        self.ids = IdFilter()  # the id of every item that went cold in this process
        # Seqs up to this one were loaded without their ids (0: none): while one of
        # them is still cold, the filter cannot say "surely not".
        self.unknown_upto = 0

    def _all_levels(self) -> list[TailLevel]:
        return [*self.levels.values(), *self.delayed.values(), self.keyed]

    def may_hold(self, item_id: str) -> bool:
        """False when no cold item of this tail has *item_id* (no database read
        needed); True when one may."""
        if self.unknown_upto:
            heads = [s for level in self._all_levels() for s in level.first(1)]
            if heads and min(heads) <= self.unknown_upto:
                return True
            self.unknown_upto = 0  # every loaded item left: the filter knows them all
        return item_id in self.ids

    def __len__(self) -> int:  # also its truth: asked on every read by id of the node
        count = 0
        for level in self.levels.values():
            count += len(level)
        for level in self.delayed.values():
            count += len(level)
        return count + len(self.keyed)

    def delayed_count(self) -> int:
        return sum(len(level) for level in self.delayed.values())

    def level(self, priority: int) -> TailLevel:
        found = self.levels.get(priority)
        if found is None:
            found = self.levels[priority] = TailLevel()
        return found

    def delayed_level(self, priority: int) -> TailLevel:
        found = self.delayed.get(priority)
        if found is None:
            found = self.delayed[priority] = TailLevel()
        return found

    def add(
        self, seq: int, priority: int, size: int, item_id: str, expires: int | None = None
    ) -> None:
        """A ready one (expiring at *expires*, microseconds, if it has a time)."""
        self.level(priority).add(seq)
        self.payload_bytes += size
        self.ids.add(item_id)
        if expires is not None:
            self.expiry.add(expires, seq)

    def add_delayed(
        self,
        due: int,
        seq: int,
        priority: int,
        size: int,
        item_id: str,
        expires: int | None = None,
    ) -> None:
        """A waiting item held back until *due* (microseconds, ``schedule.to_us``)."""
        self.delayed_level(priority).add(seq)
        self.due.add(due, seq)
        self.payload_bytes += size
        self.ids.add(item_id)
        if expires is not None:
            self.expiry.add(expires, seq)

    def add_keyed(self, seq: int, size: int, item_id: str, expires: int | None = None) -> None:
        """A member of an ordering key (its key's fifo holds it too)."""
        self.keyed.add(seq)
        self.payload_bytes += size
        self.ids.add(item_id)
        if expires is not None:
            self.expiry.add(expires, seq)

    def remove_keyed(self, seq: int, size: int, expires: int | None = None) -> bool:
        """Take a member of an ordering key out; whether it was here."""
        if not self.keyed.remove(seq):
            return False
        if expires is not None:
            self.expiry.remove(expires, seq)
        self.payload_bytes -= size
        return True

    def remove(
        self,
        seq: int,
        priority: int,
        size: int,
        due: int | None = None,
        expires: int | None = None,
    ) -> bool:
        """Take a ready one out, or a delayed one (due at *due*); whether it was here.
        *expires*: its expiry time, if it has one."""
        level = self.levels.get(priority)
        if level is None or not level.remove(seq):
            level = self.delayed.get(priority)
            if due is None or level is None or seq not in level:
                return False
            level.remove(seq)
            self.due.remove(due, seq)
        if expires is not None:
            self.expiry.remove(expires, seq)
        self.payload_bytes -= size
        return True

    def forget(self, seq: int) -> bool:
        """Take *seq* out of every level and index (its row is missing); whether found."""
        ready = any(level.remove(seq) for level in self.levels.values())
        ready = self.keyed.remove(seq) or ready
        delayed = any(level.remove(seq) for level in self.delayed.values())
        if delayed:
            self.due.remove_seq(seq)
        if ready or delayed:
            self.expiry.remove_seq(seq)
        return ready or delayed

    def earliest_expiry(self) -> int | None:
        first = self.expiry.first()
        return first[0] if first is not None else None

    def earliest_due(self) -> int | None:
        """When the first delayed one comes due (microseconds; None: none)."""
        first = self.due.first()
        return first[0] if first is not None else None

    def promote(self, now: int) -> int:
        """Delayed ones due at or before *now* join their ready level (publish
        order there, by seq); how many. A pair whose seq left the delayed levels
        without its pair (a row found missing) is dropped here."""
        due = self.due.pop_until(now)
        if len(due) >= BULK_PROMOTE:
            return self._promote_many(due)
        moved = 0
        for seq in due:
            for priority, level in self.delayed.items():
                if level.remove(seq):
                    self.level(priority).add(seq)
                    moved += 1
                    break
        return moved

    def _promote_many(self, due: list[int]) -> int:
        """Many at once (a restart after the consumers were away): each level is
        rebuilt in one pass, not one insertion per seq."""
        due.sort()
        moved = 0
        for priority, level in self.delayed.items():
            stay, go = split_sorted(level.live(), due)
            if go:
                level.seqs, level.head, level.gone = array("q", stay), 0, set()
                self.level(priority).merge_sorted(go)
                moved += len(go)
        return moved

    def first_delayed(self) -> int | None:
        """The lowest seq among the delayed ones (the oldest published)."""
        heads = [s for level in self.delayed.values() for s in level.first(1)]
        return min(heads, default=None)

    def holds_ready(self, seq: int, priority: int) -> bool:
        level = self.levels.get(priority)
        return level is not None and seq in level

    def holds(self, seq: int, priority: int) -> bool:
        if seq in self.keyed:
            return True
        level = self.levels.get(priority)
        if level is not None and seq in level:
            return True
        level = self.delayed.get(priority)
        return level is not None and seq in level

    def seqs(self) -> Iterator[int]:
        """Every live seq, ascending (the levels merged)."""
        return heapq.merge(*(level.live() for level in self._all_levels()))

    def seqs_reversed(self) -> Iterator[int]:
        return heapq.merge(*(level.live_reversed() for level in self._all_levels()), reverse=True)

    def count_below(self, seq: int) -> int:
        return sum(level.count_below(seq) for level in self._all_levels())
