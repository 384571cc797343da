"""The dashboard's view of a whole sharded deployment: ``GET /api/deployment``.

Why: on a sharded deployment (docs/scaling.md) each shard's process serves the
dashboard of the queues it holds; an operator expects one page to show every
queue of the deployment and where it lives. Every shard's listener answers
``/api/deployment`` from the shared database (``core/deployment.py``): each
queue with its shard, its committed counts, and whether this process serves it
(``here``). The page links a queue of this shard to its own page; a queue of
another shard is shown with that shard's name (its page, with rates, locks,
items and actions, is on that shard's dashboard, which alone holds it).

The read is one grouped pass over the items table, so it is cached for
``max_age`` seconds and shared by concurrent requests: open dashboards cost one
read per ``max_age``, not one per poll each. An unsharded listener has no
reader and answers 404 (the page then hides the section).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from xmpp_queue.core.deployment import DeploymentReader, PlacedQueue
from xmpp_queue.http.single_flight import SingleFlight

MAX_AGE = 5.0
"""Seconds a deployment read is reused (the page polls it at this pace)."""


class DeploymentView:
    """Every queue of the deployment, at most ``max_age`` old (module docstring)."""

    def __init__(
        self,
        reader: DeploymentReader,
        shard: str,
        clock: Callable[[], datetime],
        max_age: float = MAX_AGE,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reader = reader
        self.shard = shard
        self._clock = clock
        self._max_age = max_age
        self._monotonic = monotonic
        self._rows: list[PlacedQueue] = []
        self._at = float("-inf")
        self._read_at: datetime | None = None
        self._reads: SingleFlight[list[PlacedQueue]] = SingleFlight()

    async def rows(self) -> list[PlacedQueue]:
        if self._monotonic() - self._at < self._max_age:
            return self._rows
        rows = await self._reads.join(self._read)
        self._rows, self._at = rows, self._monotonic()
        return rows

    def _read(self) -> Awaitable[list[PlacedQueue]]:
        self._read_at = self._clock()
        return self.reader.placed_queues(self._read_at)

    async def as_json(self, service: str) -> dict[str, Any]:
        rows = await self.rows()
        read_at = self._read_at or self._clock()
        return {
            "service": service,
            "shard": self.shard,
            "read_at": read_at.isoformat(),
            "max_age": self._max_age,
            "shards": sorted({r.shard for r in rows}),
            "waiting": sum(r.waiting for r in rows),
            "in_flight": sum(r.in_flight for r in rows),
            "queues": [_row_json(r, self.shard, read_at) for r in rows],
        }

    async def elsewhere(self, node: str) -> str | None:
        """The shard serving *node* when that is not this one (None: here or nowhere)."""
        owner = await self.reader.owner(node)
        return owner if owner is not None and owner != self.shard else None


def _row_json(row: PlacedQueue, here: str, now: datetime) -> dict[str, Any]:
    oldest = row.oldest_waiting
    return {
        "node": row.node,
        "shard": row.shard,
        "here": row.shard == here,
        "waiting": row.waiting,
        "delayed": row.delayed,
        "in_flight": row.in_flight,
        "subscribers": row.subscribers,
        "oldest_waiting_seconds": (
            None if oldest is None else round(max(0.0, (now - oldest).total_seconds()), 3)
        ),
    }
