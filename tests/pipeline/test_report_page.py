"""The report page's charts, from plain data (no Spark): readable time axes for any
bucket, a latency scale per node, workers by name."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime, timedelta
from xml.etree import ElementTree as ET

from xmpp_queue.pipeline.charts import Series, line_chart
from xmpp_queue.pipeline.report_html import (
    ReportData,
    render_report,
    time_labels,
    worker_label,
)

START = datetime(2026, 11, 23, 23, 58, 0, tzinfo=UTC)


def _svgs(html: str) -> list[ET.Element]:
    return [ET.fromstring(m) for m in re.findall(r"<svg.*?</svg>", html, re.S)]


def _x_labels(svg: ET.Element) -> list[tuple[str, str]]:
    """(text, anchor) of the x-axis labels: the texts on the chart's bottom line."""
    height = svg.get("height")
    return [
        (t.text or "", t.get("text-anchor", ""))
        for t in svg.iter("text")
        if t.get("y") == str(int(height or 0) - 14)
    ]


def test_short_buckets_show_seconds_and_never_repeat() -> None:
    moments = [START + timedelta(seconds=10 * i) for i in range(30)]  # 5 minutes, 10 s each
    labels = time_labels(moments, 10)
    assert len(set(labels)) == len(labels)
    assert labels[0] == "11-23 23:58:00" and labels[1] == "23:58:10"
    # the date comes back where the day changes
    assert labels[12] == "11-24 00:00:00"


def test_hour_and_day_buckets_keep_labels_short() -> None:
    hours = time_labels([START + timedelta(hours=i) for i in range(3)], 3600)
    assert hours == ["11-23 23:58", "11-24 00:58", "01:58"]
    days = time_labels([START + timedelta(days=i) for i in range(3)], 86400)
    assert days == ["11-23", "11-24", "11-25"]


def test_axis_labels_are_not_cut_at_the_edges_and_not_repeated() -> None:
    labels = ["a", "a", "b", "b", "c", "c", "d", "d", "e", "e", "f", "f", "g"]
    svg = ET.fromstring(line_chart("t", labels, [Series("s", [1.0] * len(labels))]))
    shown = _x_labels(svg)
    texts = [text for text, _ in shown]
    assert all(a != b for a, b in itertools.pairwise(texts))
    assert shown[0][1] == "start"  # the first label starts at the axis


def _data(**overrides: object) -> ReportData:
    values: dict[str, object] = {
        "title": "report",
        "generated_at": START,
        "since": None,
        "until": None,
        "bucket_seconds": 60,
        "sources": ["test"],
        "totals": [],
        "buckets": {},
        "latency": [],
        "workers": [],
        "poison": [],
    }
    values.update(overrides)
    return ReportData(**values)  # type: ignore[arg-type]


def test_each_node_gets_its_own_latency_scale() -> None:
    """A node whose items wait minutes must not flatten another's milliseconds."""
    rows = [
        {"node": node, "measure": measure, "samples": 10, "p50": v, "p95": v * 2, "p99": v * 3}
        for node, v in (("fast", 0.002), ("slow", 60.0))
        for measure in ("wait", "handling", "end_to_end")
    ]
    html = render_report(_data(latency=rows))
    charts = [s for s in _svgs(html) if "latency" in (s.findtext("title") or "")]
    assert [c.findtext("title") for c in charts] == [
        "fast: latency (seconds)",
        "slow: latency (seconds)",
    ]
    tops = []
    for chart in charts:
        ticks = [t.text or "" for t in chart.iter("text") if t.get("text-anchor") == "end"]
        tops.append(ticks[-1])
    assert tops[0] != tops[1], tops  # two scales, one per node


def test_workers_are_shown_by_their_name() -> None:
    assert worker_label("w1@example.org/fast-1") == "fast-1 (w1@example.org)"
    assert worker_label("w1@example.org") == "w1@example.org"
    rows = [{"worker": "w1@example.org/fast-1", "handled": 5, "handling_p95": 0.1}]
    html = render_report(_data(workers=rows))
    assert "fast-1 (w1@example.org)" in html
