"""Queues whose dispatch is holding a short batch, by when the hold ends.

A subscriber that takes batches may let the service wait a little for a fuller
one (``pubsub#queue_batch_wait``): dispatch then sends nothing and files the
queue here under the moment the oldest held item has waited long enough. The
timer's deadline includes the earliest entry, and its tick dispatches the queues
that came due (``due``), so a held item goes out at the latest by then.

An entry is a hint, like the round-robin order: it is not undone with an
operation (a wake that finds a full batch gone already dispatches nothing) and
not stored (after a restart the first tick dispatches every queue).
"""

from __future__ import annotations

import heapq
from datetime import datetime


class DispatchHolds:
    """The held queues, earliest end first; one live entry per queue."""

    def __init__(self) -> None:
        self._heap: list[tuple[datetime, str]] = []
        self._until: dict[str, datetime] = {}

    def hold(self, node_id: str, until: datetime) -> None:
        """Wake *node_id*'s dispatch at *until*, unless it wakes earlier already
        (that wake holds again if it is still too soon)."""
        current = self._until.get(node_id)
        if current is not None and current <= until:
            return
        self._until[node_id] = until
        heapq.heappush(self._heap, (until, node_id))
        if len(self._heap) > 2 * len(self._until) + 64:
            self._heap = [(u, n) for n, u in self._until.items()]
            heapq.heapify(self._heap)

    def next_due(self) -> datetime | None:
        """The earliest live hold's end (it may be past: a tick is due)."""
        heap = self._heap
        while heap and self._until.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def due(self, now: datetime, limit: int) -> list[str]:
        """Up to *limit* queues whose hold ended by *now*, taken off: the caller
        dispatches them."""
        heap, found = self._heap, list[str]()
        while heap and len(found) < limit and heap[0][0] <= now:
            until, node_id = heapq.heappop(heap)
            if self._until.get(node_id) != until:
                continue  # replaced by an earlier hold, or already taken
            del self._until[node_id]
            found.append(node_id)
        return found

    def __len__(self) -> int:
        return len(self._until)
