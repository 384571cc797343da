"""The report job end to end from a migrated database, and its HTML page."""

from __future__ import annotations

import argparse
import io
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.kit.ledger import insert_rows
from tests.pipeline import reference as ref
from tests.pipeline.ledger_factory import START, Row
from xmpp_queue.pipeline.cli import add_pipeline_parser, run_pipeline
from xmpp_queue.pipeline.report_html import ReportData, render_report
from xmpp_queue.pipeline.settings import PipelineSettings

pytestmark = pytest.mark.spark


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="xmpp-queue")
    add_pipeline_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_report_of_a_time_range_from_the_database(
    spark: Any, sqlite_url: str, ledger_rows: list[Row], tmp_path: Path
) -> None:
    """JDBC read of the range, backlog opened by the database's own count of the
    rows before it, tables + HTML written, and the printed summary."""
    insert_rows(sqlite_url, ledger_rows)
    out = tmp_path / "report"
    since = START + timedelta(minutes=4)
    until = START + timedelta(hours=1)
    args = parse(
        [
            "pipeline",
            "report",
            "--out",
            str(out),
            "--since",
            since.isoformat(),
            "--until",
            until.isoformat(),
            "--bucket",
            "2m",
        ]
    )
    printed = io.StringIO()
    code = run_pipeline(args, PipelineSettings(database_url=sqlite_url), out=printed)
    assert code == 0

    in_range = [r for r in ledger_rows if since <= r.at < until]
    opening = ref.opening_backlog(r for r in ledger_rows if r.at < since)
    expected = ref.node_buckets(in_range, 120, opening)
    got = {
        (r["node"], int(r["bucket_start"].astimezone(UTC).timestamp())): r.asDict()
        for r in spark.read.parquet(str(out / "node_buckets")).collect()
    }
    assert set(got) == set(expected)
    for key, counts in expected.items():
        assert {k: got[key][k] for k in counts} == counts, key
    # The backlog at the end agrees with reading the whole history at once.
    whole = ref.node_buckets(ledger_rows, 120)
    totals = {r["node"]: r for r in spark.read.parquet(str(out / "node_totals")).collect()}
    for node, row in totals.items():
        last = max(b for (n, b) in whole if n == node)
        assert row["backlog"] == whole[(node, last)]["backlog"], node

    html = (out / "report.html").read_text(encoding="utf-8")
    _assert_self_contained(html)
    _assert_valid_svgs(html)
    assert f"From {since:%Y-%m-%d %H:%M} to {until:%Y-%m-%d %H:%M} (UTC)" in html
    text = printed.getvalue()
    assert f"{len(in_range):,} events" in text
    for node in totals:
        assert node in text
    # The details crossed JDBC into the tables, the page and the printed summary.
    reasons = ref.reasons(in_range, 10)
    first = {(n, c): reason for n, c, reason, _, rank in reasons if rank == 1}
    assert ("jobs", "failure") in first
    got_reasons = {
        (r["node"], r["category"], r["reason"], r["n"], r["rank"])
        for r in spark.read.parquet(str(out / "reasons")).collect()
    }
    assert got_reasons == reasons
    assert "Why items failed" in html and "Attributes of published items" in html
    assert "most common attributes and reasons" in text
    assert str(first[("jobs", "failure")]) in text
    assert "tenant=" in text
    assert "topics and their bound queues" in text  # issue 21: each bound queue shown
    got_bound = {
        (r["topic"], r["queue"]): (r["copied"], r["filtered"])
        for r in spark.read.parquet(str(out / "bound_queues")).collect()
    }
    assert got_bound == ref.bound_queues(in_range)


def _assert_valid_svgs(html: str) -> None:
    """Every inline chart is well-formed XML (a duplicated attribute is not)."""
    from xml.etree import ElementTree as ET

    charts = re.findall(r"<svg\b.*?</svg>", html, flags=re.S)
    assert charts, "the report has charts"
    for chart in charts:
        ET.fromstring(chart)  # raises ParseError on invalid XML


def _assert_self_contained(html: str) -> None:
    """No script, stylesheet, image or font is fetched from anywhere."""
    assert "<script" not in html
    assert not re.search(r"<link|<img|@import|url\(|src=|href=", html)
    assert "http" not in html


def test_html_escapes_names_and_shows_empty_sections() -> None:
    hostile = "<script>alert(1)</script>"
    data = ReportData(
        title="t & co",
        generated_at=datetime(2024, 1, 1, tzinfo=UTC),
        since=None,
        until=None,
        bucket_seconds=300,
        sources=["jdbc:sqlite:/x"],
        totals=[{"node": hostile, "published": 1, "backlog": 1}],
        buckets={hostile: [{"bucket_start": datetime(2024, 1, 1), "published": 1, "backlog": 1}]},
        latency=[],
        workers=[],
        poison=[],
    )
    html = render_report(data)
    assert hostile not in html and "&lt;script&gt;" in html
    assert "t &amp; co" in html
    assert "No latency samples in this range." in html
    assert "No worker activity in this range." in html
    _assert_self_contained(html)


def test_long_histories_are_merged_into_fewer_chart_points() -> None:
    from xmpp_queue.pipeline.report_html import MAX_POINTS, _merge_buckets

    rows = [
        {"bucket_start": START + timedelta(minutes=i), "published": 1, "acked": 2, "backlog": i}
        for i in range(1000)
    ]
    merged = _merge_buckets(rows, MAX_POINTS)
    assert len(merged) <= MAX_POINTS
    assert sum(r["published"] for r in merged) == 1000
    assert sum(r["acked"] for r in merged) == 2000
    assert merged[-1]["backlog"] == 999


def test_filtered_rows_are_counts_and_older_per_item_rows_count_one(spark: Any) -> None:
    """A ``filtered`` row of today holds a count (``deliveries``) and its topic; one
    written before the counts (one row per item, deliveries 0, no topic) is one item
    in the node's figures and in no topic's row."""
    from xmpp_queue.pipeline import analytics
    from xmpp_queue.pipeline.ledger_frame import LEDGER_SCHEMA

    at = START
    rows = [
        Row(1, at, "filtered", "eu", "old-1", None, 0, 10),
        Row(2, at, "filtered", "eu", "", None, 7, 0, None, "billing"),
        Row(3, at, "published", "eu", "e1", None, 0, 10, None, "billing"),
    ]
    frame = spark.createDataFrame([r.as_tuple() for r in rows], LEDGER_SCHEMA)
    [bucket] = analytics.node_buckets(frame, 60).collect()
    assert bucket["filtered"] == 8 == ref.node_buckets(rows, 60)[("eu", 1709287200)]["filtered"]
    got = {
        (r["topic"], r["queue"]): (r["copied"], r["filtered"])
        for r in analytics.bound_queues(frame).collect()
    }
    assert got == ref.bound_queues(rows) == {("billing", "eu"): (1, 7)}


def test_dropped_and_deduplicated_are_counted_and_a_drop_ends_the_backlog(spark: Any) -> None:
    """Issue 19's ledger kinds: a dropped item leaves the backlog; a deduplicated
    publish stored nothing, so it adds none; both are in the totals and the page."""
    from xmpp_queue.pipeline.analytics import node_buckets, node_totals
    from xmpp_queue.pipeline.ledger_frame import LEDGER_SCHEMA
    from xmpp_queue.pipeline.report import ReportResult, print_summary

    at = START
    rows = [
        Row(1, at, "published", "q", "a", None, 0, 3),
        Row(2, at, "published", "q", "b", None, 0, 3),
        Row(3, at + timedelta(seconds=5), "deduplicated", "q", "a", None, 0, 3),
        Row(4, at + timedelta(seconds=9), "dropped", "q", "b", None, 0, 3),
    ]
    frame = spark.createDataFrame([r.as_tuple() for r in rows], LEDGER_SCHEMA)
    buckets = node_buckets(frame, 60)
    empty_latency = spark.createDataFrame([], "node string, measure string, p95 double")
    (total,) = [r.asDict() for r in node_totals(buckets, empty_latency).collect()]
    assert (total["published"], total["dropped"], total["deduplicated"]) == (2, 1, 1)
    assert total["backlog"] == 1, "b dropped, a still waiting, the repeat added nothing"
    html = render_report(
        ReportData(
            title="t",
            generated_at=at,
            since=None,
            until=None,
            bucket_seconds=60,
            sources=[],
            totals=[total],
            buckets={},
            latency=[],
            workers=[],
            poison=[],
        )
    )
    assert "<th>dropped</th>" in html and "<th>deduplicated</th>" in html
    printed = io.StringIO()
    print_summary(
        ReportResult(
            out_dir="r",
            html_path="r/report.html",
            events=4,
            totals=[total],
            workers=0,
            poison=0,
            seconds=0.1,
        ),
        printed,
    )
    assert "dropped" in printed.getvalue() and "deduplicated" in printed.getvalue()
