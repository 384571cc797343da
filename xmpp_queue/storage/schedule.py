"""When cold delayed items come due (and cold items expire): (time, seq) pairs in
time order, in arrays.

A scheduled-delivery backlog (items published with a ``Start`` in the future,
or given back with a retry delay) is as deep as a plain one, and its items are
read only when they come due. Past the store's budget such an item keeps no
object in memory: its node's cold tail (``tail``) files its seq by priority,
and :class:`DueIndex` here keeps (due, seq) in time order, 16 bytes a pair in
two ``array('q')`` per block, so the deadline timer asks only for the earliest
due time and takes what came due from the front.

Blocks of at most ``2 * BLOCK`` pairs (a sorted list of sorted blocks, as a
B-tree with one level): a pair published with the latest due time (the usual
case: a fixed delay) is appended to the last block; any other is inserted in
its block (a move of at most a few kilobytes); taking what came due deletes a
slice from the front. Due times are whole microseconds since the epoch (UTC),
exact both ways (:func:`to_us`, :func:`from_us`).

The same index keeps the expiry times of cold items that have one
(``ColdTail.expiry``): expiry must still fire for an item nobody reads.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from datetime import UTC, datetime, timedelta

BLOCK = 1024
"""Pairs per block after a split or a load (a block holds up to twice as many)."""

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


def to_us(moment: datetime) -> int:
    """*moment* (aware) as whole microseconds since the epoch, exactly."""
    return (moment - EPOCH) // MICROSECOND


def from_us(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


class DueIndex:
    """(due, seq) pairs in ascending order (see the module docstring)."""

    __slots__ = ("_dues", "_lasts", "_len", "_seqs")

    def __init__(self) -> None:
        self._dues: list[array[int]] = []
        self._seqs: list[array[int]] = []
        self._lasts: list[tuple[int, int]] = []  # the last pair of each block
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def first(self) -> tuple[int, int] | None:
        """The earliest pair (None: empty)."""
        if not self._dues:
            return None
        return self._dues[0][0], self._seqs[0][0]

    def add(self, due: int, seq: int) -> None:
        lasts = self._lasts
        pair = (due, seq)
        self._len += 1
        if not lasts or pair > lasts[-1]:  # the latest: appended
            if not lasts or len(self._dues[-1]) >= 2 * BLOCK:
                self._dues.append(array("q", (due,)))
                self._seqs.append(array("q", (seq,)))
                lasts.append(pair)
                return
            self._dues[-1].append(due)
            self._seqs[-1].append(seq)
            lasts[-1] = pair
            return
        at_block = bisect_left(lasts, pair)
        dues, seqs = self._dues[at_block], self._seqs[at_block]
        at = self._find(dues, seqs, due, seq)
        dues.insert(at, due)
        seqs.insert(at, seq)
        if len(dues) > 2 * BLOCK:
            self._split(at_block)

    @staticmethod
    def _find(dues: array[int], seqs: array[int], due: int, seq: int) -> int:
        lo = bisect_left(dues, due)
        hi = bisect_right(dues, due, lo)
        return bisect_left(seqs, seq, lo, hi)

    def _split(self, at_block: int) -> None:
        dues, seqs = self._dues[at_block], self._seqs[at_block]
        half = len(dues) // 2
        self._dues[at_block : at_block + 1] = [dues[:half], dues[half:]]
        self._seqs[at_block : at_block + 1] = [seqs[:half], seqs[half:]]
        self._lasts[at_block : at_block + 1] = [
            (dues[half - 1], seqs[half - 1]),
            self._lasts[at_block],
        ]

    def remove(self, due: int, seq: int) -> bool:
        """Take the pair out; whether it was here."""
        at_block = bisect_left(self._lasts, (due, seq))
        if at_block == len(self._lasts):
            return False
        dues, seqs = self._dues[at_block], self._seqs[at_block]
        at = self._find(dues, seqs, due, seq)
        if at == len(dues) or dues[at] != due or seqs[at] != seq:
            return False
        del dues[at]
        del seqs[at]
        self._len -= 1
        if not dues:
            del self._dues[at_block], self._seqs[at_block], self._lasts[at_block]
        elif at == len(dues):
            self._lasts[at_block] = (dues[-1], seqs[-1])
        return True

    def pop_until(self, now: int) -> list[int]:
        """Take every pair due at or before *now*; their seqs, earliest first."""
        found: list[int] = []
        dues_blocks, seqs_blocks = self._dues, self._seqs
        while dues_blocks and dues_blocks[0][0] <= now:
            dues, seqs = dues_blocks[0], seqs_blocks[0]
            upto = bisect_right(dues, now)
            found.extend(seqs[:upto])
            if upto == len(dues):
                del dues_blocks[0], seqs_blocks[0], self._lasts[0]
            else:
                del dues[:upto]
                del seqs[:upto]
        self._len -= len(found)
        return found

    def upto(self, now: int, limit: int) -> list[int]:
        """Seqs of up to *limit* pairs due at or before *now*, earliest first (kept)."""
        found: list[int] = []
        for dues, seqs in zip(self._dues, self._seqs, strict=True):
            if dues[0] > now or len(found) >= limit:
                break
            found.extend(seqs[: min(bisect_right(dues, now), limit - len(found))])
        return found

    def remove_seq(self, seq: int) -> bool:
        """Take out the pair of *seq* whatever its time (a scan: a row found missing)."""
        for dues, seqs in zip(self._dues, self._seqs, strict=True):
            if seq in seqs:
                return self.remove(dues[seqs.index(seq)], seq)
        return False

    def extend_sorted(self, dues: array[int], seqs: array[int]) -> None:
        """Pairs in ascending order, all later than those here (a load)."""
        for start in range(0, len(dues), BLOCK):
            block_dues, block_seqs = dues[start : start + BLOCK], seqs[start : start + BLOCK]
            self._dues.append(block_dues)
            self._seqs.append(block_seqs)
            self._lasts.append((block_dues[-1], block_seqs[-1]))
        self._len += len(dues)

    def pairs(self) -> list[tuple[int, int]]:
        """Every pair in order (checks and diagnostics)."""
        return [
            p for d, s in zip(self._dues, self._seqs, strict=True) for p in zip(d, s, strict=True)
        ]
