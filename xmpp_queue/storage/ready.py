"""The ordered indexes of the store's memory: ready items by priority, and due times.

``ReadyQueue`` keeps one node's ready items of one priority level in seq order;
``ReadyLevels`` keeps one queue per level; ``by_priority`` merges the levels'
heads into dispatch order (with ageing, so low levels are never starved);
``due`` reads the entries that came due from a lazily cleaned heap (lock
deadlines, item expiry). Plain data structures, no I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from datetime import datetime

from xmpp_queue.core.model import Item

HEAP_SLACK = 256
"""A heap is rebuilt from its live entries once it holds more than twice as many
entries as live ones, plus this slack (so small heaps are left alone)."""


class ReadyQueue:
    """The ready items of one node in seq order: a heap of seqs plus seq → item id.

    Membership is the dict; the heap may hold stale seqs (locked or removed
    since) and duplicates (an item that left and came back), both skipped when
    they surface and dropped when the heap is rebuilt.
    """

    __slots__ = ("_heap", "_ids")

    def __init__(self) -> None:
        self._heap: list[int] = []
        self._ids: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, seq: int) -> bool:
        return seq in self._ids

    def add(self, seq: int, item_id: str) -> None:
        self._ids[seq] = item_id
        heapq.heappush(self._heap, seq)
        if len(self._heap) > 2 * len(self._ids) + HEAP_SLACK:
            self._heap = sorted(self._ids)  # a sorted list is a heap

    def members(self) -> dict[int, str]:
        """seq -> item id of every ready item (a copy; for checks and diagnostics)."""
        return dict(self._ids)

    def heap_size(self) -> int:
        return len(self._heap)

    def discard(self, seq: int) -> bool:
        """Forget *seq*; whether it was there."""
        return self._ids.pop(seq, None) is not None

    def first(self, limit: int) -> list[str]:
        """Item ids of the *limit* lowest seqs, lowest first.

        Pops from the heap in order and pushes the live entries back: O(k log n).
        """
        heap, ids = self._heap, self._ids
        found: list[str] = []
        kept: list[int] = []
        last = -1
        while heap and len(found) < limit:
            seq = heapq.heappop(heap)
            if seq == last:
                continue  # a duplicate entry of the same item
            item_id = ids.get(seq)
            if item_id is None:
                continue  # stale: locked or removed since it was pushed
            last = seq
            kept.append(seq)
            found.append(item_id)
        for seq in kept:
            heapq.heappush(heap, seq)
        return found

    def count_below(self, bound: int, limit: int) -> int:
        """How many ready seqs are lower than *bound*, counting up to *limit*
        (whether a cold tail's head must come in before the next dispatch)."""
        heap, ids = self._heap, self._ids
        kept: list[int] = []
        last = -1
        while heap and len(kept) < limit and heap[0] < bound:
            seq = heapq.heappop(heap)
            if seq == last or seq not in ids:
                continue
            last = seq
            kept.append(seq)
        for seq in kept:
            heapq.heappush(heap, seq)
        return len(kept)


class ReadyLevels:
    """The ready items of one node by priority level: one :class:`ReadyQueue` each.

    Nearly every node has one level in use (``medium``), so the common path is
    one dict lookup more than a single queue. Membership questions by seq
    (``in``) ask each level; there are at most three.
    """

    __slots__ = ("_levels",)

    def __init__(self) -> None:
        self._levels: dict[int, ReadyQueue] = {}

    def __len__(self) -> int:
        return sum(len(q) for q in self._levels.values())

    def __contains__(self, seq: int) -> bool:
        return any(seq in q for q in self._levels.values())

    def add(self, seq: int, item_id: str, level: int) -> None:
        queue = self._levels.get(level)
        if queue is None:
            queue = self._levels[level] = ReadyQueue()
        queue.add(seq, item_id)

    def add_if_absent(self, seq: int, item_id: str, level: int) -> bool:
        """Add unless *seq* is ready already; whether it was added."""
        queue = self._levels.get(level)
        if queue is not None and seq in queue:
            return False
        self.add(seq, item_id, level)
        return True

    def discard(self, seq: int, level: int) -> bool:
        queue = self._levels.get(level)
        return queue is not None and queue.discard(seq)

    def count_below(self, level: int, bound: int, limit: int) -> int:
        queue = self._levels.get(level)
        return queue.count_below(bound, limit) if queue is not None else 0

    def members(self) -> dict[int, str]:
        found: dict[int, str] = {}
        for queue in self._levels.values():
            found.update(queue.members())
        return found

    def heap_size(self) -> int:
        return sum(q.heap_size() for q in self._levels.values())

    def live_levels(self) -> list[tuple[int, ReadyQueue]]:
        """Non-empty levels, highest first (one level: no sorting, the common case)."""
        levels = self._levels
        if len(levels) == 1:
            for level, queue in levels.items():
                return [(level, queue)] if len(queue) else []
        return sorted(((lv, q) for lv, q in levels.items() if len(q)), reverse=True)

    def first(self, limit: int) -> list[str]:
        """Item ids, highest level first, seq order within a level (no ageing)."""
        found: list[str] = []
        for _, queue in self.live_levels():
            if len(found) >= limit:
                break
            found.extend(queue.first(limit - len(found)))
        return found


TimedEntry = tuple[datetime, int, str, str]  # (moment, seq, node_id, item_id)


def due(
    heap: list[TimedEntry],
    live: Callable[[TimedEntry], Item | None],
    now: datetime,
    limit: int,
) -> list[Item]:
    """Items of the entries due by *now* in a lazily cleaned heap, earliest first.

    Pops in order, skips stale entries and duplicates, pushes the live ones back
    (they stay until their item changes): O(k log n)."""
    found: list[Item] = []
    kept: list[TimedEntry] = []
    last: TimedEntry | None = None
    while heap and len(found) < limit and heap[0][0] <= now:
        entry = heapq.heappop(heap)
        if entry == last:
            continue
        item = live(entry)
        if item is None:
            continue
        last = entry
        kept.append(entry)
        found.append(item)
    for entry in kept:
        heapq.heappush(heap, entry)
    return found


def by_priority(
    items: Mapping[str, Item],
    levels: list[tuple[int, ReadyQueue]],
    now: datetime,
    limit: int,
    age: int,
) -> list[Item]:
    """Merge the heads of several priority levels (see ``ready_items``)."""
    top = levels[0][0]
    horizon = now.timestamp() - age if age > 0 else None
    candidates: list[tuple[int, int, Item]] = []
    for level, queue in levels:
        for item_id in queue.first(limit):
            item = items[item_id]
            rank = level
            if horizon is not None and level < top:
                since = item.available_at or item.published_at
                if since.timestamp() <= horizon:
                    rank = top  # waited long enough: as urgent as the most urgent
            candidates.append((-rank, item.seq, item))
    candidates.sort(key=lambda c: (c[0], c[1]))
    return [c[2] for c in candidates[:limit]]
