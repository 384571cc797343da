"""Read-only views for admins: what a queue looks like right now."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from xmpp_queue.core.model import Item, NodeConfig, Subscription


@dataclass(frozen=True, slots=True)
class QueueSummary:
    """One row of the queue overview (admin command "Queue overview")."""

    node: str
    backlog: int
    in_flight: int
    subscribers: int
    oldest_waiting_seconds: float | None
    dead_letters: int
    acks_last_hour: int
    redeliveries_last_hour: int
    delayed: int = 0  # of the backlog: held back until a later time (delay, retry)


@dataclass(frozen=True, slots=True)
class SubscriberLoad:
    subscription: Subscription
    in_flight: int


@dataclass(frozen=True, slots=True)
class QueueDetails:
    node: str
    config: NodeConfig
    subscribers: tuple[SubscriberLoad, ...]
    locks: tuple[Item, ...]
    backlog: int
    delayed: int = 0  # of the backlog: held back until a later time (delay, retry)
    active: str | None = None  # single-active queue: the subid that receives now


@dataclass(frozen=True, slots=True)
class ServiceStatus:
    started_at: datetime
    nodes: int
    queues: int
    items: int
    subscriptions: int
    locks: int


@dataclass(frozen=True, slots=True)
class TickReport:
    """What one timer tick did: locks expired, and the nodes it settled (those with
    something due; every node only in a catch-up after a failed tick)."""

    expired_locks: int
    nodes: tuple[str, ...]
