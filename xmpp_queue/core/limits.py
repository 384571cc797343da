"""Limits per JID: nodes created, items waiting in a queue, publishes per second.

Why: on a federated network a JID the policy admits may still be careless or
hostile; one account must not fill the disk with nodes or items, nor take the
whole service's throughput. Each limit is a guard that raises before anything is
written, with an error that says which limit and how to get past it, and admins
(and the service itself) are not bound by the per-JID ones.

- ``max_nodes_per_jid``: every node one bare JID causes and that still exists:
  those it created, the dead-letter nodes made for its queues, and the dead-letter
  nodes its queues name that do not exist yet (they are made on first use, when
  nothing may be refused: an item past its limit is never dropped). So a queue
  counts twice unless its ``pubsub#queue_dead_letter`` names an existing node, and
  renaming that field cannot make nodes past the limit (``NodeQuotaExceeded``:
  not-allowed, at create or configure time).
- ``max_queue_items``: the ceiling of ``pubsub#max_items`` on queue nodes and the
  default of new queues; a queue past it refuses a publish (``NodeFull``:
  conflict + node-full, XEP-0060 §7.1.3 "Node is full"); nothing is dropped.
- ``publish_rate`` / ``publish_burst``: a token bucket per bare JID that counts
  items, not requests: a batch publish (XEP-0060 §13.11) of n items needs n tokens
  (``PublishRateExceeded``: wait + resource-constraint, so a client retries later).
- ``rate_exempt``: bare JIDs not bound by ``publish_rate`` (a bulk loader such as
  the Spark pipeline's publisher, trusted like an admin for throughput only: the
  other limits and its affiliations still apply).

0 turns a limit off. The bucket lives in memory: a restart refills it, which
only ever lets a publisher through, never refuses one wrongly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from xmpp_queue.core.errors import InvalidNodeConfig, PubSubError
from xmpp_queue.core.model import NodeConfig


class NodeQuotaExceeded(PubSubError):
    """The JID already holds (or its queues will create) as many nodes as one JID may."""

    def __init__(self, jid: str, limit: int, dead_letter: str | None = None) -> None:
        why = (
            f" (a queue's dead-letter node {dead_letter!r} would be one more)"
            if dead_letter
            else ""
        )
        super().__init__(
            f"{jid} already has {limit} nodes, the most one JID may have, counting the "
            f"dead-letter nodes its queues create{why}; delete one or ask an admin"
        )
        self.jid = jid
        self.limit = limit
        self.dead_letter = dead_letter


class PublishRateExceeded(PubSubError):
    """The requester publishes faster than one JID may; retry after ``retry_after`` s."""

    def __init__(self, jid: str, rate: float, retry_after: float) -> None:
        super().__init__(
            f"{jid} publishes faster than {rate:g} items/s; retry in {retry_after:.1f} s"
        )
        self.jid = jid
        self.rate = rate
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class Limits:
    """The ``[limits]`` table; 0 = no limit. Defaults: generous for one team's work
    (the demo, the benchmarks' rates), small against a flood."""

    max_nodes_per_jid: int = 100
    max_queue_items: int = 1_000_000
    publish_rate: float = 1000.0
    publish_burst: int = 5000
    rate_exempt: frozenset[str] = frozenset()


class PublishRateLimiter:
    """A token bucket per bare JID: ``burst`` tokens, refilled at ``rate`` per second.

    Time comes from the caller (the operation's clock reading), so tests drive it
    with a fake clock. Full buckets are forgotten once there are many, so an idle
    JID costs nothing.
    """

    FORGET_AFTER = 10_000

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = max(burst, 1)
        self._buckets: dict[str, tuple[float, datetime]] = {}

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def _level(self, jid: str, now: datetime) -> float:
        tokens, at = self._buckets.get(jid, (float(self.burst), now))
        elapsed = max(0.0, (now - at).total_seconds())
        return min(float(self.burst), tokens + elapsed * self.rate)

    def check(self, jid: str, now: datetime, count: int = 1) -> None:
        """Raise unless *jid* may publish *count* items now; take nothing (see :meth:`take`).

        Items are counted, not requests: a batch of 1,000 needs 1,000 tokens, so
        batching cannot walk past the rate. A batch larger than the whole bucket
        needs a full bucket (it could never pass otherwise) and leaves a debt that
        the refill pays back before the next publish: over time no JID gets more
        than ``burst`` + ``rate`` x seconds items in.
        """
        if not self.enabled:
            return
        needed = float(min(max(count, 1), self.burst))
        level = self._level(jid, now)
        if level < needed:
            raise PublishRateExceeded(jid, self.rate, (needed - level) / self.rate)

    def take(self, jid: str, now: datetime, count: int = 1) -> None:
        """Spend a token per item (after the publish was accepted); a batch publish
        spends one per item it stored, the level going below zero when the batch
        was larger than the bucket (a debt, see :meth:`check`)."""
        if not self.enabled:
            return
        level = self._level(jid, now)
        self._buckets[jid] = (level - count, now)
        if len(self._buckets) > self.FORGET_AFTER:
            self._forget_full(now)

    def _forget_full(self, now: datetime) -> None:
        for jid in [j for j in self._buckets if self._level(j, now) >= self.burst]:
            del self._buckets[jid]


def check_queue_items(config: NodeConfig, before: NodeConfig | None, limits: Limits) -> None:
    """A queue's ``pubsub#max_items`` may not exceed ``[limits] max_queue_items``.

    Checked when a queue is made or its max_items changes, so a queue kept from
    before the limit (max_items "max") is not refused an unrelated change.
    """
    ceiling = limits.max_queue_items
    if not config.queue or ceiling <= 0:
        return
    if before is not None and before.queue and before.max_items == config.max_items:
        return
    if config.max_items is None or config.max_items > ceiling:
        raise InvalidNodeConfig(
            "pubsub#max_items",
            f"a queue holds at most {ceiling} items on this service ([limits] max_queue_items)",
        )
