"""The self-contained ``report.html``: charts first, numbers after.

Why plain data in: the page is built from small lists of dicts already collected
from the report tables, so it can be tested (and restyled) without Spark. All
styles are inline and all charts are inline SVG from ``charts.py``: the file
opens offline and fetches nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from html import escape
from typing import Any

from xmpp_queue.core.ledger import EventKind
from xmpp_queue.pipeline.charts import (
    PALETTE,
    Series,
    format_number,
    grouped_bar_chart,
    horizontal_bar_chart,
    line_chart,
)
from xmpp_queue.pipeline.details_html import attributes_section, reasons_section

Row = Mapping[str, Any]
MAX_POINTS = 240
"""Charts merge neighbouring buckets beyond this many, to stay readable and small."""

_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1340px;color:#1a202c;
background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid
#e2e8f0;padding-bottom:4px}h3{font-size:14px;margin:16px 0 4px}
.meta{color:#4a5568;font-size:13px}.row{display:flex;flex-wrap:wrap;gap:12px}
table{border-collapse:collapse;font-size:12px;margin:6px 0}
th,td{padding:3px 8px;border-bottom:1px solid #edf2f7;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f7fafc}
svg.chart{background:#fff;border:1px solid #edf2f7;border-radius:4px}
.empty{color:#718096;font-style:italic}
"""


@dataclass(frozen=True, slots=True)
class ReportData:
    """What the page shows; every list is small (collected from the report tables)."""

    title: str
    generated_at: datetime
    since: datetime | None
    until: datetime | None
    bucket_seconds: int
    sources: Sequence[str]
    totals: Sequence[Row]
    buckets: Mapping[str, Sequence[Row]]
    latency: Sequence[Row]
    workers: Sequence[Row]
    poison: Sequence[Row]
    events: int = 0
    notes: Sequence[str] = field(default_factory=tuple)
    attribute_keys: Sequence[Row] = field(default_factory=tuple)
    attribute_values: Sequence[Row] = field(default_factory=tuple)
    reasons: Sequence[Row] = field(default_factory=tuple)
    bound_queues: Sequence[Row] = field(default_factory=tuple)


def render_report(data: ReportData) -> str:
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{escape(data.title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{escape(data.title)}</h1>",
        f"<p class='meta'>{escape(_range_text(data))} · {data.events:,} events · bucket "
        f"{_duration(data.bucket_seconds)} · source: {escape(', '.join(data.sources))} · "
        f"generated {data.generated_at:%Y-%m-%d %H:%M:%S} UTC</p>",
        *[f"<p class='meta'>{escape(note)}</p>" for note in data.notes],
        "<h2>Queues</h2>",
        _totals_table(data.totals),
        "<h2>Topics and their bound queues</h2>",
        "<p class='meta'>Each queue bound to a topic (<code>pubsub#queue_topic</code>): the "
        "topic's items copied into it, and those its filter kept out.</p>",
        _bound_queues_table(data.bound_queues),
        "<h2>Throughput and backlog</h2>",
        _node_charts(data),
        "<h2>Latency percentiles</h2>",
        _latency_charts(data.latency),
        "<h2>Workers</h2>",
        _worker_charts(data.workers),
        _table(
            data.workers,
            [
                ("worker", "worker"),
                ("deliveries", "deliveries"),
                ("handled", "handled"),
                ("unlock rate", "unlock_rate"),
                ("timeout rate", "timeout_rate"),
                ("handling p50 s", "handling_p50"),
                ("handling p95 s", "handling_p95"),
                ("handling p99 s", "handling_p99"),
            ],
        ),
        "<h2>Poison candidates</h2>",
        "<p class='meta'>Items delivered most often: the likeliest to crash whoever takes "
        "them.</p>",
        _table(
            data.poison,
            [
                ("node", "node"),
                ("item", "item_id"),
                ("deliveries", "deliveries"),
                ("unlocks", "unlocks"),
                ("timeouts", "expiries"),
                ("outcome", "outcome"),
                ("holders", "holders"),
            ],
        ),
        "<h2>Why items failed</h2>",
        "<p class='meta'>The most common reasons given for unlocks and lock timeouts, "
        "dead letters and drops, per node (rows without a reason are counted above, "
        "not here).</p>",
        reasons_section(data.reasons),
        "<h2>Attributes of published items</h2>",
        "<p class='meta'>The attributes publishers attached most often, per node.</p>",
        attributes_section(data.attribute_keys, data.attribute_values),
        "</body></html>",
    ]
    return "\n".join(parts)


def _bound_queues_table(rows: Sequence[Row]) -> str:
    if not rows:
        return "<p class='empty'>No queue bound to a topic in this range.</p>"
    shown = []
    for r in rows:
        seen = (r["copied"] or 0) + (r["filtered"] or 0)
        kept = f"{(r['copied'] or 0) / seen:.0%}" if seen else "-"
        shown.append({**r, "kept": kept})
    columns = [
        ("topic", "topic"),
        ("queue", "queue"),
        ("copied", "copied"),
        ("filtered out", "filtered"),
        ("kept", "kept"),
    ]
    return _table(shown, columns)


def _range_text(data: ReportData) -> str:
    since = f"{data.since:%Y-%m-%d %H:%M}" if data.since else "the beginning"
    until = f"{data.until:%Y-%m-%d %H:%M}" if data.until else "now"
    return f"From {since} to {until} (UTC)"


def _duration(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return format_number(value)
    if isinstance(value, list | tuple):
        return escape(", ".join(str(v) for v in value))
    if isinstance(value, int):
        return f"{value:,}"
    return escape(str(value))


def _table(rows: Sequence[Row], columns: Sequence[tuple[str, str]]) -> str:
    if not rows:
        return "<p class='empty'>None in this range.</p>"
    head = "".join(f"<th>{escape(title)}</th>" for title, _ in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(row.get(key))}</td>" for _, key in columns) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _totals_table(rows: Sequence[Row]) -> str:
    columns = [("node", "node")]
    columns += [(kind.value.replace("_", "-"), kind.value) for kind in _THROUGHPUT_KINDS]
    # Issue 19: items a node dropped (expired, truncated) and repeat publishes the
    # dedup window absorbed (stored nothing) are counted, not charted.
    columns += [(kind.value, kind.value) for kind in (EventKind.DROPPED, EventKind.DEDUPLICATED)]
    columns += [
        ("backlog", "backlog"),
        ("wait p95 s", "wait_p95"),
        ("handling p95 s", "handling_p95"),
        ("end-to-end p95 s", "end_to_end_p95"),
    ]
    return _table(rows, columns)


_THROUGHPUT_KINDS = (
    EventKind.PUBLISHED,
    EventKind.DELIVERED,
    EventKind.ACKED,
    EventKind.UNLOCKED,
    EventKind.EXPIRED,
    EventKind.DEAD_LETTERED,
)


_DASHED = {EventKind.ACKED: "6 4"}
"""Acked follows delivered closely (often equal): drawn solid on top, it hid the
delivered line; dashed, the line under it shows through the gaps."""


def _merge_buckets(rows: Sequence[Row], limit: int) -> list[Row]:
    """Sum counts of neighbouring buckets (backlog: the last one) down to *limit* points."""
    if len(rows) <= limit:
        return list(rows)
    size = -(-len(rows) // limit)
    merged: list[Row] = []
    for start in range(0, len(rows), size):
        chunk = rows[start : start + size]
        row: dict[str, Any] = {"bucket_start": chunk[0]["bucket_start"]}
        for kind in _THROUGHPUT_KINDS:
            row[kind.value] = sum(r.get(kind.value) or 0 for r in chunk)
        row["backlog"] = chunk[-1].get("backlog")
        merged.append(row)
    return merged


def _node_charts(data: ReportData) -> str:
    if not data.buckets:
        return "<p class='empty'>No events in this range.</p>"
    out = []
    for node, rows in data.buckets.items():
        points = _merge_buckets(rows, MAX_POINTS)
        step = data.bucket_seconds * max(1, -(-len(rows) // MAX_POINTS))  # after merging
        labels = time_labels([r["bucket_start"] for r in points], step)
        series = [
            Series(
                kind.value.replace("_", "-"),
                [r.get(kind.value) or 0 for r in points],
                color,
                _DASHED.get(kind, ""),
            )
            for kind, color in zip(_THROUGHPUT_KINDS, PALETTE, strict=False)
            if any(r.get(kind.value) for r in points) or kind is EventKind.PUBLISHED
        ]
        backlog = [Series("backlog", [r.get("backlog") for r in points], PALETTE[4])]
        out.append(
            f"<h3>{escape(node)}</h3><div class='row'>"
            + line_chart(f"{node}: events per bucket", labels, series, unit="events")
            + line_chart(f"{node}: backlog", labels, backlog, unit="items", fill=True)
            + "</div>"
        )
    return "\n".join(out)


def time_labels(moments: Sequence[Any], bucket_seconds: int) -> list[str]:
    """Axis labels for bucket starts: precise enough that neighbours differ, short
    enough to fit. Seconds for buckets under a minute, minutes under a day, days
    beyond; the date is shown once at the start and again where the day changes."""
    if bucket_seconds >= 86400:
        fmt = "%m-%d"
    elif bucket_seconds >= 60:
        fmt = "%H:%M"
    else:
        fmt = "%H:%M:%S"
    out: list[str] = []
    day = None
    for moment in moments:
        if not isinstance(moment, datetime):
            out.append(str(moment))
            continue
        text = f"{moment:{fmt}}"
        if fmt != "%m-%d" and moment.date() != day:
            text = f"{moment:%m-%d} {text}"
            day = moment.date()
        out.append(text)
    return out


def _latency_charts(rows: Sequence[Row]) -> str:
    """One chart per node, each on its own scale: a node whose items wait minutes must
    not flatten another's milliseconds to nothing. The scale is logarithmic for the
    same reason inside one node: its handling time (milliseconds) next to its wait
    (minutes) was no bar at all on a linear one."""
    measures = {
        "wait": "wait",
        "handling": "handling",
        "end_to_end": "end to end",
    }
    nodes = list(dict.fromkeys(str(r["node"]) for r in rows if r.get("samples")))
    charts = []
    for node in nodes:
        picked = {
            r["measure"]: r
            for r in rows
            if str(r["node"]) == node and r.get("samples") and r["measure"] in measures
        }
        groups = [m for m in measures if m in picked]
        if not groups:
            continue
        series = [
            Series(p, [picked[m].get(p) for m in groups], color)
            for p, color in zip(("p50", "p95", "p99"), PALETTE, strict=False)
        ]
        title = f"{node}: latency (seconds, log scale)"
        charts.append(
            grouped_bar_chart(
                title, [measures[m] for m in groups], series, "seconds", log_scale=True
            )
        )
    if not charts:
        return "<p class='empty'>No latency samples in this range.</p>"
    return "<div class='row'>" + "".join(charts) + "</div>"


def worker_label(jid: str) -> str:
    """A worker as people name it: its resource (``Worker(name=...)``), then the account."""
    bare, slash, resource = jid.partition("/")
    return f"{resource} ({bare})" if slash and resource else jid


def _worker_charts(rows: Sequence[Row]) -> str:
    if not rows:
        return "<p class='empty'>No worker activity in this range.</p>"
    top = sorted(rows, key=lambda r: -(r.get("handled") or 0))[:30]
    labels = [worker_label(str(r["worker"])) for r in top]

    def pct(value: Any) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    handled = horizontal_bar_chart(
        "Items handled per worker",
        labels,
        [float(r.get("handled") or 0) for r in top],
        [f"unlock {pct(r.get('unlock_rate'))} · timeout {pct(r.get('timeout_rate'))}" for r in top],
    )
    handling = horizontal_bar_chart(
        "Handling time p95 per worker (seconds)",
        labels,
        [float(r.get("handling_p95") or 0.0) for r in top],
        [f"p50 {format_number(float(r.get('handling_p50') or 0.0))} s" for r in top],
        color=PALETTE[1],
    )
    return f"<div class='row'>{handled}{handling}</div>"
