"""QueueDispatcher: which subscriber gets the next item (docs/queueing.md, "Dispatch").

Pure: given the candidate subscriptions with their windows and loads, pick
one. Fewest items in flight first, only among those with room under their
``queue_requests``; ties go round-robin (the cursor remembers who was served
last). An item that comes back (unlocked or expired) avoids its previous
holder while anybody else has room.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Candidate:
    subid: str
    window: int  # queue_requests


class QueueDispatcher:
    """Keeps the round-robin cursor of one node."""

    def __init__(self) -> None:
        self._last: str | None = None

    def choose(
        self,
        candidates: Sequence[Candidate],
        loads: Mapping[str, int],
        avoid: str | None = None,
    ) -> Candidate | None:
        with_room = [c for c in candidates if loads.get(c.subid, 0) < c.window]
        if not with_room:
            return None
        if avoid is not None and len(with_room) > 1:
            others = [c for c in with_room if c.subid != avoid]
            with_room = others or with_room
        least = min(loads.get(c.subid, 0) for c in with_room)
        tied = [c for c in with_room if loads.get(c.subid, 0) == least]
        chosen = self._next_after_cursor(candidates, tied)
        self._last = chosen.subid
        return chosen

    def _next_after_cursor(
        self, order: Sequence[Candidate], tied: Sequence[Candidate]
    ) -> Candidate:
        """The first tied candidate after the last one served, in subscription order."""
        if self._last is None or len(tied) == 1:
            return tied[0]
        ids = [c.subid for c in order]
        start = ids.index(self._last) + 1 if self._last in ids else 0
        tied_ids = {c.subid for c in tied}
        for offset in range(len(ids)):
            subid = ids[(start + offset) % len(ids)]
            if subid in tied_ids:
                return next(c for c in tied if c.subid == subid)
        return tied[0]
