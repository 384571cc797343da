"""Every queue of a sharded deployment, with its shard: what any shard's dashboard lists.

Why: an operator of a sharded deployment (docs/scaling.md) opens one dashboard
and expects to see the whole deployment, not the third of it that the process
serving the page holds in memory. Every shard commits to one PostgreSQL, so
every shard's listener can read every queue's placement and counts there,
through the :class:`DeploymentReader` port (``storage/placement.py``).

The figures are those the database holds, which is what the shards have
committed (a shard answers a publish or an ack only after its commit): the
waiting items (delayed ones included, as in the queue overview), the delayed
ones, the items in flight (locked), the oldest waiting item's publish time and
the subscriptions. The rest of a queue's page (its rates, locks, items, dead
letters, push subscriptions, actions) is the owning shard's: only the process
that serves a queue holds it in memory and may change it, so those stay on that
shard's own dashboard.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class PlacedQueue:
    """One queue node of the deployment, as the shared database holds it."""

    node: str
    shard: str
    waiting: int  # not locked (delayed ones included)
    delayed: int  # of the waiting: held back until a later time
    in_flight: int  # locked
    subscribers: int
    oldest_waiting: datetime | None  # published_at of the oldest waiting item


class DeploymentReader(Protocol):
    """The shared database's view of every shard's queues."""

    async def placed_queues(self, now: datetime) -> list[PlacedQueue]:
        """Every queue placed on any shard, by node name (*now* decides "delayed")."""
        ...

    async def owner(self, node_id: str) -> str | None:
        """The shard *node_id* is placed on, or None."""
        ...
