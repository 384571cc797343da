"""Which item ids a node's cold tail may hold, without keeping the ids.

A cold item keeps no id in memory (``tail``), so "is there an item with this
id?" would need a database read whenever a queue has cold items, and every
publish asks it (an id may be published again). :class:`IdFilter` answers
"surely not" for nearly every new id from a few bits per cold item: a Bloom
filter (no false negatives; about 0.3 % false positives, each costing the read
it would have cost anyway). It grows by adding parts of twice the capacity, so
it needs no size up front; ids that leave the tail stay in it (a false
positive at worst), and a filter is dropped with its tail by a purge.
"""

from __future__ import annotations

BITS_PER_ID = 16
HASHES = 3  # unrolled in _Part
FIRST_CAPACITY = 4096
_MASK32 = 0xFFFFFFFF


class _Part:
    __slots__ = ("bits", "capacity", "count", "size")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.size = capacity * BITS_PER_ID
        self.bits = bytearray(self.size // 8 + 1)
        self.count = 0

    # The HASHES (3) positions by double hashing, unrolled: a filter is filled
    # with millions of ids after a start, so each add is a few microseconds.

    def add(self, item_id: str) -> None:
        h, size, bits = hash(item_id), self.size, self.bits
        a, b = h & _MASK32, ((h >> 32) & _MASK32) | 1
        at = a % size
        bits[at >> 3] |= 1 << (at & 7)
        at = (a + b) % size
        bits[at >> 3] |= 1 << (at & 7)
        at = (a + 2 * b) % size
        bits[at >> 3] |= 1 << (at & 7)
        self.count += 1

    def __contains__(self, item_id: str) -> bool:
        h, size, bits = hash(item_id), self.size, self.bits
        a, b = h & _MASK32, ((h >> 32) & _MASK32) | 1
        at = a % size
        if not bits[at >> 3] & (1 << (at & 7)):
            return False
        at = (a + b) % size
        if not bits[at >> 3] & (1 << (at & 7)):
            return False
        at = (a + 2 * b) % size
        return bool(bits[at >> 3] & (1 << (at & 7)))


class IdFilter:
    """A growing Bloom filter of item ids (in memory only: ``hash`` is per process)."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[_Part] = []

    def reserve(self, count: int) -> None:
        """Room for *count* more ids in one part (a filter filled in bulk keeps
        one part to ask, not a dozen)."""
        parts = self._parts
        if count > 0 and (not parts or parts[-1].capacity - parts[-1].count < count):
            parts.append(_Part(max(count, FIRST_CAPACITY)))

    def add(self, item_id: str) -> None:
        parts = self._parts
        if not parts or parts[-1].count >= parts[-1].capacity:
            parts.append(_Part(parts[-1].capacity * 2 if parts else FIRST_CAPACITY))
        parts[-1].add(item_id)

    def __contains__(self, item_id: str) -> bool:
        return any(item_id in part for part in self._parts)
