"""``pipeline report``: the queue-history report, from the ledger to Parquet + HTML.

Why this split: ``compute_report`` only composes the pure transforms of
``analytics.py`` (no I/O), ``run_report`` persists the inputs once (a JDBC
source would otherwise be queried again by every output), writes one Parquet
table per aggregate, then builds ``report.html`` and the printed summary from
those small tables.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from xmpp_queue.core.ledger import EventKind
from xmpp_queue.ledger_names import NODE
from xmpp_queue.pipeline import analytics, details
from xmpp_queue.pipeline.details_html import CATEGORY_TITLES, summary_cells
from xmpp_queue.pipeline.ledger_io import write_parquet
from xmpp_queue.pipeline.progress import spark_progress
from xmpp_queue.pipeline.report_html import ReportData, render_report

TABLES = (
    "node_buckets",
    "node_totals",
    "latency",
    "workers",
    "poison_candidates",
    "attribute_keys",
    "attribute_values",
    "reasons",
    "bound_queues",
)
CHART_NODES = 8
"""Nodes charted over time (the busiest); every node is in the tables."""


@dataclass(frozen=True, slots=True)
class ReportOptions:
    out_dir: str
    since: datetime | None = None
    until: datetime | None = None
    bucket_seconds: int = 60
    poison_min_deliveries: int = 2
    poison_limit: int = 20
    top: int = 10  # attribute keys, key=value pairs and reasons kept per node
    title: str = "xmpp-queue: queue history"
    sources: Sequence[str] = ()


@dataclass(frozen=True, slots=True)
class ReportTables:
    """The report's aggregates, as lazy DataFrames."""

    node_buckets: DataFrame
    node_totals: DataFrame
    latency: DataFrame
    workers: DataFrame
    poison_candidates: DataFrame
    attribute_keys: DataFrame
    attribute_values: DataFrame
    reasons: DataFrame
    bound_queues: DataFrame

    def by_name(self) -> dict[str, DataFrame]:
        return {name: getattr(self, name) for name in TABLES}


@dataclass(frozen=True, slots=True)
class ReportResult:
    out_dir: str
    html_path: str
    events: int
    totals: list[dict[str, Any]]
    workers: int
    poison: int
    seconds: float = 0.0
    paths: dict[str, str] = field(default_factory=dict)
    attribute_values: list[dict[str, Any]] = field(default_factory=list)
    reasons: list[dict[str, Any]] = field(default_factory=list)
    bound_queues: list[dict[str, Any]] = field(default_factory=list)


def compute_report(
    events: DataFrame,
    bucket_seconds: int,
    opening: DataFrame | None = None,
    poison_min_deliveries: int = 2,
    poison_limit: int = 20,
    keep: Callable[[DataFrame], DataFrame] = lambda frame: frame,
    top: int = 10,
) -> ReportTables:
    """All report aggregates from conformed ledger rows (pure: builds a plan only).

    *opening* is (node, opening_backlog) for the history before the range.
    *keep* is applied to the intermediate frames that several tables reuse
    (lifecycles, buckets, latency, attribute pairs): ``run_report`` persists them
    there. *top*: entries kept per node in the attribute and reason tables.
    """
    lifecycles = keep(analytics.item_lifecycles(analytics.with_lifecycle(events)))
    buckets = keep(analytics.node_buckets(events, bucket_seconds, opening))
    latency = keep(analytics.latency_by_node(lifecycles))
    pairs = keep(details.attribute_pairs(events))
    return ReportTables(
        node_buckets=buckets,
        node_totals=analytics.node_totals(buckets, latency),
        latency=latency,
        workers=analytics.worker_stats(events, lifecycles),
        poison_candidates=analytics.poison_candidates(
            lifecycles, events, poison_min_deliveries, poison_limit
        ),
        attribute_keys=details.attribute_keys(pairs, top),
        attribute_values=details.attribute_values(pairs, top),
        reasons=details.reasons(events, top),
        bound_queues=analytics.bound_queues(events),
    )


def run_report(
    events: DataFrame, options: ReportOptions, opening_counts: DataFrame | None = None
) -> ReportResult:
    """Compute, write Parquet tables and ``report.html`` under ``options.out_dir``.

    *opening_counts* is (node, kind, n) of the rows before ``options.since``.
    The ledger rows and the frames several tables derive from are persisted
    while the tables are written, so no source is read twice.
    """
    started = datetime.now(UTC)
    os.makedirs(options.out_dir, exist_ok=True)
    spark = events.sparkSession
    cached: list[DataFrame] = []

    def keep(frame: DataFrame) -> DataFrame:
        cached.append(frame.persist(StorageLevel.MEMORY_AND_DISK))
        return frame

    try:
        events = keep(events)
        event_count = events.count()
        opening = None
        if opening_counts is not None:
            opening = keep(analytics.opening_backlog(opening_counts))
        tables = compute_report(
            events,
            options.bucket_seconds,
            opening,
            options.poison_min_deliveries,
            options.poison_limit,
            keep=keep,
            top=options.top,
        )
        paths = {}
        for name, frame in tables.by_name().items():
            path = os.path.join(options.out_dir, name)
            with spark_progress(spark, f"report: {name}"):
                write_parquet(frame, path)
            paths[name] = path
    finally:
        for frame in cached:
            frame.unpersist()
    written = {name: spark.read.parquet(path) for name, path in paths.items()}
    data = _report_data(written, options, event_count, started)
    html_path = os.path.join(options.out_dir, "report.html")
    tmp = html_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(render_report(data))
    os.replace(tmp, html_path)
    return ReportResult(
        out_dir=options.out_dir,
        html_path=html_path,
        events=event_count,
        totals=[dict(r) for r in data.totals],
        workers=len(data.workers),
        poison=len(data.poison),
        seconds=(datetime.now(UTC) - started).total_seconds(),
        paths=paths,
        attribute_values=[dict(r) for r in data.attribute_values],
        reasons=[dict(r) for r in data.reasons],
        bound_queues=[dict(r) for r in data.bound_queues],
    )


def _rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in frame.collect()]


def _report_data(
    tables: dict[str, DataFrame], options: ReportOptions, events: int, started: datetime
) -> ReportData:
    totals = _rows(tables["node_totals"].orderBy(NODE))
    busiest = sorted(totals, key=lambda r: -sum(r.get(k.value) or 0 for k in EventKind))[
        :CHART_NODES
    ]
    chart_nodes = [r[NODE] for r in busiest]
    bucket_rows = _rows(
        tables["node_buckets"].where(F.col(NODE).isin(chart_nodes)).orderBy(NODE, analytics.BUCKET)
    )
    buckets: dict[str, list[dict[str, Any]]] = {node: [] for node in chart_nodes}
    for row in bucket_rows:
        buckets[row[NODE]].append(row)
    notes = []
    if len(totals) > CHART_NODES:
        notes.append(f"Charts show the {CHART_NODES} busiest of {len(totals)} nodes.")
    return ReportData(
        title=options.title,
        generated_at=started.replace(tzinfo=None),
        since=options.since,
        until=options.until,
        bucket_seconds=options.bucket_seconds,
        sources=options.sources,
        totals=totals,
        buckets=buckets,
        latency=_rows(tables["latency"].orderBy(NODE, "measure")),
        workers=_rows(tables["workers"].orderBy(F.col("handled").desc(), "worker")),
        poison=_rows(
            tables["poison_candidates"].orderBy(F.col("deliveries").desc(), NODE, analytics.CYCLE)
        ),
        events=events,
        notes=notes,
        attribute_keys=_rows(tables["attribute_keys"].orderBy(NODE, details.RANK)),
        attribute_values=_rows(tables["attribute_values"].orderBy(NODE, details.RANK)),
        reasons=_rows(tables["reasons"].orderBy(NODE, details.CATEGORY, details.RANK)),
        bound_queues=_rows(tables["bound_queues"].orderBy(analytics.TOPIC, analytics.QUEUE)),
    )


def print_summary(result: ReportResult, out: TextIO) -> None:
    """The short table printed at the end of a report run."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{result.events:,} events · report in {result.out_dir}")
    columns = [
        ("node", NODE),
        ("published", EventKind.PUBLISHED.value),
        ("acked", EventKind.ACKED.value),
        ("unlocked", EventKind.UNLOCKED.value),
        ("expired", EventKind.EXPIRED.value),
        ("dead-lettered", EventKind.DEAD_LETTERED.value),
        ("dropped", EventKind.DROPPED.value),
        ("deduplicated", EventKind.DEDUPLICATED.value),
        ("backlog", "backlog"),
        ("wait p95 s", "wait_p95"),
        ("e2e p95 s", "end_to_end_p95"),
    ]
    for title, _ in columns:
        table.add_column(title, justify="left" if title == "node" else "right")
    for row in result.totals:
        table.add_row(*[_fmt(row.get(key)) for _, key in columns])
    console = Console(file=out, width=140)
    console.print(table)
    _print_bound_queues(result, console)
    _print_details(result, console)
    console.print(
        f"{result.workers} workers · {result.poison} poison candidates · "
        f"{result.html_path} · {result.seconds:.1f} s"
    )


def _print_bound_queues(result: ReportResult, console: Any) -> None:
    """Per topic, its bound queues: items copied in and kept out by the filter."""
    from rich.table import Table

    if not result.bound_queues:
        return
    table = Table(title="topics and their bound queues")
    for title in ("topic", "queue", "copied", "filtered"):
        table.add_column(title, justify="left" if title in ("topic", "queue") else "right")
    for row in result.bound_queues:
        keys = (analytics.TOPIC, analytics.QUEUE, "copied", "filtered")
        table.add_row(*[_fmt(row.get(key)) for key in keys])
    console.print(table)


def _print_details(result: ReportResult, console: Any) -> None:
    """Per node, the most common attributes and reasons (the page has the full top N)."""
    from rich.table import Table

    cells = summary_cells(result.attribute_values, result.reasons)
    if not cells:
        return
    table = Table(title="most common attributes and reasons")
    columns = [("node", ""), ("attributes", "attributes")]
    columns += [(title.split(" (")[0], key) for key, title in CATEGORY_TITLES.items()]
    for title, _ in columns:
        table.add_column(title, overflow="fold")
    for node in sorted(cells):
        table.add_row(node, *[cells[node].get(key) or "-" for _, key in columns[1:]])
    console.print(table)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
