"""The report page's charts, from plain data (no Spark): readable time axes for any
bucket, a logarithmic latency scale per node, delivered visible beside acked, workers
by name."""

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
        "fast: latency (seconds, log scale)",
        "slow: latency (seconds, log scale)",
    ]
    tops = []
    for chart in charts:
        ticks = [t.text or "" for t in chart.iter("text") if t.get("text-anchor") == "end"]
        tops.append(ticks[-1])
    assert tops[0] != tops[1], tops  # two scales, one per node


def _bar_heights(svg: ET.Element) -> dict[str, float]:
    """Each bar's height by its hover text before the value ("handling p50")."""
    return {
        (rect.findtext("title") or "").split(":")[0]: float(rect.get("height") or 0)
        for rect in svg.iter("rect")
        if rect.get("class") == "bar"
    }


def test_a_handling_time_of_milliseconds_is_visible_next_to_a_wait_of_minutes() -> None:
    """Issue 24: on a linear scale the handling bars were no bars at all beside the wait."""
    rows = [
        {"node": "jobs", "measure": m, "samples": 10, "p50": v, "p95": v * 2, "p99": v * 4}
        for m, v in (("wait", 300.0), ("handling", 0.02), ("end_to_end", 300.02))
    ]
    html = render_report(_data(latency=rows))
    (chart,) = [s for s in _svgs(html) if "latency" in str(s.get("aria-label"))]
    heights = _bar_heights(chart)
    assert heights["wait p99"] > heights["wait p50"] > heights["handling p99"]
    assert heights["handling p50"] > max(10.0, heights["wait p50"] / 5), heights  # linear: 1/15,000
    assert heights["handling p95"] > heights["handling p50"]  # still ordered
    ticks = [t.text for t in chart.iter("text") if t.get("text-anchor") == "end"]
    assert ticks == ["0.001", "0.01", "0.1", "1", "10", "100", "1k", "10k"]  # powers of ten


def test_delivered_stays_visible_under_an_equal_acked_line() -> None:
    """Issue 24: "delivered" hid under "acked" (equal counts, acked drawn on top)."""
    rows = [
        {"bucket_start": START + timedelta(minutes=i), "published": 5, "delivered": 5, "acked": 5}
        for i in range(10)
    ]
    html = render_report(_data(buckets={"jobs": rows}))
    (chart,) = [s for s in _svgs(html) if s.get("aria-label") == "jobs: events per bucket"]
    lines = {p.findtext("title"): p for p in chart.iter("polyline") if p.get("class") == "series"}
    assert lines["delivered"].get("points") == lines["acked"].get("points")
    assert lines["acked"].get("stroke-dasharray") and not lines["delivered"].get("stroke-dasharray")
    assert lines["acked"].get("stroke") != lines["delivered"].get("stroke")


def test_workers_are_shown_by_their_name() -> None:
    assert worker_label("w1@example.org/fast-1") == "fast-1 (w1@example.org)"
    assert worker_label("w1@example.org") == "w1@example.org"
    rows = [{"worker": "w1@example.org/fast-1", "handled": 5, "handling_p95": 0.1}]
    html = render_report(_data(workers=rows))
    assert "fast-1 (w1@example.org)" in html


def test_the_detail_sections_escape_reasons_and_say_when_empty() -> None:
    """Reasons and attributes are the workers' and publishers' text: escaped."""
    hostile = "<b>boom</b> & co"
    reasons = [
        {"node": "jobs", "category": "failure", "reason": hostile, "n": 5, "rank": 1},
        {"node": "jobs", "category": "failure", "reason": "lock timeout", "n": 2, "rank": 2},
        {"node": "jobs", "category": "dead_letter", "reason": "max-deliveries", "n": 1, "rank": 1},
    ]
    keys = [{"node": "jobs", "key": "tenant", "items": 7, "rank": 1}]
    values = [
        {"node": "jobs", "key": "tenant", "value": "acme", "items": 4, "rank": 1},
        {"node": "jobs", "key": "tenant", "value": "<globex>", "items": 3, "rank": 2},
    ]
    html = render_report(_data(reasons=reasons, attribute_keys=keys, attribute_values=values))
    assert hostile not in html and "&lt;b&gt;boom&lt;/b&gt; &amp; co" in html
    assert "<globex>" not in html and "acme (4), &lt;globex&gt; (3)" in html
    titles = [s.findtext("title") for s in _svgs(html)]
    assert titles == [
        "jobs: failure reasons (unlocks and lock timeouts)",
        "jobs: dead-letter reasons",
        "jobs: most common attributes",
    ]
    empty = render_report(_data())
    assert "No failure, dead-letter or drop reasons in this range." in empty
    assert "No published item carried attributes in this range." in empty


def test_the_printed_summary_lists_the_top_attributes_and_reasons() -> None:
    import io

    from xmpp_queue.pipeline.report import ReportResult, print_summary

    values = [
        {"node": "jobs", "key": "tenant", "value": v, "items": n, "rank": i}
        for i, (v, n) in enumerate((("acme", 9), ("globex", 5), ("initech", 2), ("x", 1)), 1)
    ]
    reasons = [
        {"node": "jobs", "category": "failure", "reason": "KeyError: 'sku'", "n": 4, "rank": 1},
        {"node": "mail", "category": "dropped", "reason": "truncated", "n": 2, "rank": 1},
    ]
    printed = io.StringIO()
    result = ReportResult(
        out_dir="r",
        html_path="r/report.html",
        events=10,
        totals=[],
        workers=0,
        poison=0,
        attribute_values=values,
        reasons=reasons,
    )
    print_summary(result, printed)
    text = printed.getvalue()
    assert "tenant=acme (9), tenant=globex (5), tenant=initech (2)" in text
    assert "tenant=x" not in text  # the page has the full top N, the summary three
    assert "KeyError: 'sku' (4)" in text and "truncated (2)" in text
    bare = io.StringIO()
    print_summary(ReportResult("r", "r/report.html", 0, [], 0, 0), bare)
    assert "most common attributes" not in bare.getvalue()
