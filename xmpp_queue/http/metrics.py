"""Prometheus metrics of the component (``/metrics``), with prometheus-client.

Three sources, so that nothing in the service counts twice or guesses:

- **Committed work** (:class:`QueueMetrics` is the
  :class:`~xmpp_queue.core.observe.CommitObserver` of the store): the ledger
  events of each committed transaction become the ``*_total`` counters, the
  waits it measured become the two wait histograms, and the commit batcher's
  batch sizes and commit times their histograms.
- **Queue state at scrape time**: waiting, in flight, dead letters, oldest
  waiting age and subscribers come from the service's ``queue_overview``, the
  same read the admin "Queue overview" command makes, so both always agree.
- **The XMPP connection**: the component's ``session_start`` and
  ``disconnected`` events.
- **Where SQLite commits ran** (:class:`CommitPlaceCollector`, SQLite only): the
  backend's own counts, read at scrape time, so an operator can alert on a disk
  too slow for commits on the event loop.

Process figures (CPU, memory, open files, GC) are prometheus-client's own
collectors. Every series lives in this object's own registry (no module
globals), so tests and several services in one process stay apart.

Label cardinality is bounded by :class:`NodeLabels`: the first ``max_nodes``
queue nodes seen keep their name as the ``node`` label; later ones are counted
under ``node="_other"`` (logged once), and ``xmpp_queue_metrics_nodes_folded``
says how many nodes that is. Labels are not reused when a node is deleted,
until the process restarts.
"""

from __future__ import annotations

import logging
from collections import Counter as Tally
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.observe import CommittedBatch
from xmpp_queue.core.reports import QueueSummary

log = logging.getLogger("xmpp_queue.http.metrics")

OTHER = "_other"
PREFIX = "xmpp_queue"

EVENT_COUNTERS: dict[EventKind, tuple[str, str]] = {
    EventKind.PUBLISHED: ("published", "Items published to the queue (redriven ones included)"),
    EventKind.DELIVERED: ("delivered", "Items handed (locked) to a worker, redeliveries included"),
    EventKind.ACKED: ("acked", "Items acknowledged (retracted) by their lock holder"),
    EventKind.UNLOCKED: ("unlocked", "Locks given back: worker unlock, departure, admin"),
    EventKind.EXPIRED: ("expired", "Locks that passed their deadline"),
    EventKind.DEAD_LETTERED: ("dead_lettered", "Items moved to the dead-letter node"),
    EventKind.RETRACTED: ("retracted", "Items removed by a publisher or owner (not acks)"),
    EventKind.PURGED: ("purged", "Items removed by a purge or a node deletion"),
    EventKind.EXTENDED: ("extended", "Lock deadlines extended by their holder"),
    EventKind.DEDUPLICATED: (
        "deduplicated",
        "Publishes of an id inside the dedup window: answered, nothing stored",
    ),
    EventKind.DROPPED: ("dropped", "Waiting items dropped at expiry (queue_expire_action drop)"),
    EventKind.FILTERED: (
        "filtered",
        "Topic items the bound queue's filter (pubsub#queue_filter) kept out",
    ),
}
"""Ledger event kind -> (counter name without prefix and _total, help)."""

# Waits span milliseconds (a worker at hand) to hours (a backlog).
WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class NodeLabels:
    """The ``node`` label of a queue node: its name, or ``_other`` past the limit."""

    def __init__(self, max_nodes: int) -> None:
        self.max_nodes = max(1, max_nodes)
        self._named: set[str] = set()
        self._folded: set[str] = set()

    def __call__(self, node: str) -> str:
        if node in self._named:
            return node
        if len(self._named) < self.max_nodes:
            self._named.add(node)
            return node
        if node not in self._folded:
            if not self._folded:
                log.warning(
                    "event=metrics_node_limit limit=%d node=%s action=counted_as_%s",
                    self.max_nodes,
                    node,
                    OTHER,
                )
            self._folded.add(node)
        return OTHER

    @property
    def folded(self) -> int:
        return len(self._folded)


ACTIVITY_MOST = 100_000
"""(node, subscriber) pairs remembered for idle times before starting over."""


class QueueStateCollector:
    """Per-queue gauges from the latest ``queue_overview`` (set just before a scrape)."""

    def __init__(self, labels: NodeLabels) -> None:
        self._labels = labels
        self.rows: Sequence[QueueSummary] = ()

    def describe(self) -> Iterable[Metric]:
        return list(self._families())

    def collect(self) -> Iterable[Metric]:
        families = self._families()
        waiting, in_flight, dead, oldest, subscribers, delayed = families
        merged: dict[str, list[float]] = {}
        for row in sorted(self.rows, key=lambda r: r.node):
            label = self._labels(row.node)
            m = merged.setdefault(label, [0, 0, 0, 0.0, 0, 0])
            m[0] += row.backlog
            m[1] += row.in_flight
            m[2] += row.dead_letters
            m[3] = max(m[3], row.oldest_waiting_seconds or 0.0)
            m[4] += row.subscribers
            m[5] += row.delayed
        for label, (w, f, d, o, s, later) in merged.items():
            waiting.add_metric([label], w)
            in_flight.add_metric([label], f)
            dead.add_metric([label], d)
            oldest.add_metric([label], o)
            subscribers.add_metric([label], s)
            delayed.add_metric([label], later)
        queues = GaugeMetricFamily(f"{PREFIX}_queues", "Queue nodes")
        queues.add_metric([], len(self.rows))
        folded = GaugeMetricFamily(
            f"{PREFIX}_metrics_nodes_folded",
            f'Queue nodes past [http] max_nodes, counted under node="{OTHER}"',
        )
        folded.add_metric([], self._labels.folded)
        limit = GaugeMetricFamily(f"{PREFIX}_metrics_node_limit", "[http] max_nodes")
        limit.add_metric([], self._labels.max_nodes)
        return [*families, queues, folded, limit]

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        def gauge(name: str, doc: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=["node"])

        return (
            gauge("waiting", "Items waiting (not locked), delayed retries included"),
            gauge("in_flight", "Items locked to a worker"),
            gauge("dead_letters", "Items in the queue's dead-letter node"),
            gauge("oldest_waiting_seconds", "Age of the oldest waiting item (0: none waits)"),
            gauge("subscribers", "Subscriptions to the queue node"),
            gauge("delayed", "Of the waiting items: held back until a later time (Start, retry)"),
        )


class CommitPlaces(Protocol):
    """Where SQLite commits ran: the SQLite backend's running counts."""

    loop_commits: int
    thread_commits: int
    slow_commits: int
    back_offs: Mapping[str, int]


class CommitPlaceCollector:
    """SQLite's commit places, read at scrape time (a source of counts, no state)."""

    def __init__(self, place: CommitPlaces) -> None:
        self._place = place

    def describe(self) -> Iterable[Metric]:
        return self.collect()

    def collect(self) -> list[Metric]:
        p = self._place
        commits = CounterMetricFamily(
            f"{PREFIX}_sqlite_commits",
            "SQLite commits by where they ran: the event loop or the writer thread",
            labels=["place"],
        )
        commits.add_metric(["loop"], p.loop_commits)
        commits.add_metric(["thread"], p.thread_commits)
        slow = CounterMetricFamily(
            f"{PREFIX}_sqlite_slow_commits", "SQLite commits on the event loop over 5 ms"
        )
        slow.add_metric([], p.slow_commits)
        back_offs = CounterMetricFamily(
            f"{PREFIX}_sqlite_back_offs",
            "Times the next 10 s of SQLite commits went to the writer thread, by reason",
            labels=["reason"],
        )
        for reason, n in sorted(p.back_offs.items()):
            back_offs.add_metric([reason], n)
        return [commits, slow, back_offs]


class QueueMetrics:
    """The component's metrics; also the store's CommitObserver (see the module doc)."""

    def __init__(self, max_nodes: int = 100, *, process: bool = True) -> None:
        self.registry = CollectorRegistry()
        self.labels = NodeLabels(max_nodes)
        if process:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            GCCollector(registry=self.registry)
        r = self.registry
        self._events = {
            kind: Counter(f"{PREFIX}_{name}", doc, ["node"], registry=r)
            for kind, (name, doc) in EVENT_COUNTERS.items()
        }
        self.redriven = Counter(
            f"{PREFIX}_redriven", "Dead letters moved back to their queue", ["node"], registry=r
        )
        self.publish_to_delivery = Histogram(
            f"{PREFIX}_publish_to_delivery_seconds",
            "From publish to the item's first delivery",
            ["node"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.delivery_to_ack = Histogram(
            f"{PREFIX}_delivery_to_ack_seconds",
            "From delivery (lock) to the holder's ack",
            ["node"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.commit_seconds = Histogram(
            f"{PREFIX}_commit_seconds",
            "Time of each commit (the durable write; ~0 for a batch that only read)",
            buckets=COMMIT_BUCKETS,
            registry=r,
        )
        self.commit_failures = Counter(
            f"{PREFIX}_commit_failures", "Commits that raised (the batch is retried)", registry=r
        )
        self.refused = Counter(
            f"{PREFIX}_requests_refused",
            "Requests answered with an error, by XMPP condition (logged sparingly)",
            ["condition"],
            registry=r,
        )
        self.batch_operations = Histogram(
            f"{PREFIX}_commit_batch_operations",
            "Operations per committed batch (group commit)",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.connected = Gauge(
            f"{PREFIX}_xmpp_connected", "1 while the component stream is up", registry=r
        )
        self.reconnects = Counter(
            f"{PREFIX}_xmpp_reconnects", "Sessions started after the first one", registry=r
        )
        self.disconnects = Counter(
            f"{PREFIX}_xmpp_disconnects", "Component streams that ended", registry=r
        )
        self.push_requests = Counter(
            f"{PREFIX}_push_requests",
            "Push POSTs answered, by node, push subscriber and status ('error': no answer)",
            ["node", "subscriber", "status"],
            registry=r,
        )
        self.push_seconds = Histogram(
            f"{PREFIX}_push_seconds",
            "Time from a push POST to its answer (or failure)",
            ["node"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.push_window = Gauge(
            f"{PREFIX}_push_window",
            "The push-back window (POSTs allowed in flight) of each push subscriber",
            ["node", "subscriber"],
            registry=r,
        )
        self.queue_state = QueueStateCollector(self.labels)
        r.register(self.queue_state)  # type: ignore[arg-type]
        self.totals: Tally[tuple[str, EventKind]] = Tally()
        """Cumulative events per (label, kind), for the dashboard's rate charts."""
        self._children: dict[tuple[Any, ...], Any] = {}
        self.activity: dict[tuple[str, str], datetime] = {}
        """(node, subscriber JID) -> its last delivery, ack or nack: the dashboard's
        idle time (a subscription row only knows when it subscribed)."""
        self.last_commit_failed = False
        self.is_connected = False
        self._sessions = 0

    # --- CommitObserver --------------------------------------------------------------
    def committed(self, batch: CommittedBatch) -> None:
        self.last_commit_failed = False
        self.commit_seconds.observe(batch.commit_seconds)
        if batch.events:
            tally: Tally[tuple[str, EventKind]] = Tally()
            for e in batch.events:
                # A filtered row is a count (record_filtered), every other row one event.
                n = e.deliveries if e.kind is EventKind.FILTERED else 1
                tally[(self.labels(e.node), e.kind)] += n
            for (label, kind), n in tally.items():
                self._child(self._events[kind], label, ("event", label, kind)).inc(n)
            self.totals.update(tally)
            if len(self.activity) > ACTIVITY_MOST:  # idle times fall back to subscribing
                self.activity.clear()
            for e in batch.events:
                if e.subscriber:
                    self.activity[(e.node, e.subscriber)] = e.at
        for wait in batch.first_deliveries:
            label = self.labels(wait.node)
            self._child(self.publish_to_delivery, label, ("p2d", label)).observe(wait.seconds)
        for wait in batch.acks:
            label = self.labels(wait.node)
            self._child(self.delivery_to_ack, label, ("d2a", label)).observe(wait.seconds)

    def _child(self, metric: Any, label: str, key: tuple[Any, ...]) -> Any:
        """``metric.labels(label)``, looked up once: ``labels()`` validates and locks on
        every call, and this runs for every committed event."""
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(label)
        return child

    def commit_failed(self) -> None:
        self.last_commit_failed = True
        self.commit_failures.inc()

    def request_refused(self, condition: str) -> None:
        self.refused.labels(condition).inc()

    def batch_committed(self, operations: int) -> None:
        self.batch_operations.observe(operations)

    # --- other sources ---------------------------------------------------------------
    def watch_commit_places(self, place: CommitPlaces) -> None:
        """Export where SQLite commits run (:class:`CommitPlaceCollector`)."""
        self.registry.register(CommitPlaceCollector(place))  # type: ignore[arg-type]

    def redrive_done(self, queue: str, moved: int) -> None:
        if moved > 0:
            self.redriven.labels(self.labels(queue)).inc(moved)

    def push_answered(
        self, subscriber: str, node: str, status: str, seconds: float, window: int
    ) -> None:
        """A push sink's answer (push/sink.py's PushObserver). The subscriber label is
        the push JID (``push+<id>@...``), never the endpoint URL or its secrets."""
        label = self.labels(node)
        self.push_requests.labels(label, subscriber, status).inc()
        self.push_seconds.labels(label).observe(seconds)
        self.push_window.labels(label, subscriber).set(window)

    def session_started(self, *_: Any) -> None:
        self._sessions += 1
        if self._sessions > 1:
            self.reconnects.inc()
        self.is_connected = True
        self.connected.set(1)

    def disconnected(self, *_: Any) -> None:
        if self.is_connected:
            self.disconnects.inc()
        self.is_connected = False
        self.connected.set(0)

    def total(self, node: str, kind: EventKind) -> int:
        return self.totals[(self.labels(node), kind)]

    def render(self, rows: Sequence[QueueSummary]) -> bytes:
        """The text exposition, with the queue gauges taken from *rows*."""
        self.queue_state.rows = rows
        return generate_latest(self.registry)
