"""Each report aggregate equals a plain-Python computation over the same rows."""

from __future__ import annotations

from datetime import UTC
from typing import Any

import pytest

from tests.pipeline import reference as ref
from tests.pipeline.ledger_factory import Row
from xmpp_queue.core.ledger import EventKind as K

pytestmark = pytest.mark.spark

BUCKET = 60
TOP = 3  # fewer than the simulated values and reasons per node: the cut is tested


@pytest.fixture(scope="module")
def computed(ledger_frame: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The report job over the whole ledger; its Parquet tables read back as dicts."""
    from xmpp_queue.pipeline import analytics
    from xmpp_queue.pipeline.report import TABLES, ReportOptions, run_report

    out = tmp_path_factory.mktemp("report")
    options = ReportOptions(out_dir=str(out), bucket_seconds=BUCKET, poison_limit=10, top=TOP)
    result = run_report(ledger_frame, options)
    spark = ledger_frame.sparkSession
    tables: dict[str, Any] = {
        name: [r.asDict(recursive=True) for r in spark.read.parquet(result.paths[name]).collect()]
        for name in TABLES
    }
    lifecycles = analytics.item_lifecycles(analytics.with_lifecycle(ledger_frame))
    tables["lifecycles"] = [r.asDict() for r in lifecycles.collect()]
    tables["html"] = (out / "report.html").read_text(encoding="utf-8")
    return tables


def test_the_simulated_ledger_covers_every_kind(ledger_rows: list[Row]) -> None:
    assert {r.kind for r in ledger_rows} == {k.value for k in K}
    lives = ref.lifecycles(ledger_rows)
    assert any(key[2] > 0 for key in lives), "an item id is reused after its removal"
    assert {life.outcome for life in lives.values()} >= {"queued", "acked", "dead_lettered"}


def test_lifecycles_match_python(computed: dict[str, Any], ledger_rows: list[Row]) -> None:
    expected = ref.lifecycles(ledger_rows)
    got = {(r["node"], r["item_id"], r["cycle"]): r for r in computed["lifecycles"]}
    assert set(got) == set(expected)
    for key, life in expected.items():
        row = got[key]
        assert _aware(row["published_at"]) == life.published_at, key
        assert _aware(row["first_delivered_at"]) == life.first_delivered_at, key
        assert _aware(row["ended_at"]) == life.ended_at, key
        assert row["outcome"] == life.outcome, key
        assert row["handler"] == life.handler, key
        assert row["deliveries"] == life.deliveries, key
        assert (row["unlocks"], row["expiries"]) == (life.unlocks, life.expiries), key
        for measure in ("wait_s", "handling_s", "end_to_end_s"):
            assert row[measure] == pytest.approx(getattr(life, measure)), (key, measure)


def test_node_buckets_and_backlog_match_python(
    computed: dict[str, Any], ledger_rows: list[Row]
) -> None:
    expected = ref.node_buckets(ledger_rows, BUCKET)
    got = {(r["node"], int(_epoch(r["bucket_start"]))): r for r in computed["node_buckets"]}
    assert set(got) == set(expected)
    for key, counts in expected.items():
        assert {k: got[key][k] for k in [*ref.KINDS, "backlog"]} == counts, key
    assert any(c[K.PUBLISHED] == 0 and c[K.ACKED] == 0 for c in expected.values()), (
        "quiet buckets are present with zeros"
    )


def test_latency_percentiles_match_python(computed: dict[str, Any], ledger_rows: list[Row]) -> None:
    expected = ref.latency(ref.lifecycles(ledger_rows).values())
    got = {(r["node"], r["measure"]): r for r in computed["latency"]}
    assert set(got) == set(expected)
    for key, stats in expected.items():
        for stat, value in stats.items():
            assert got[key][stat] == pytest.approx(value), (key, stat)
    assert all(stats["samples"] for stats in expected.values())


def test_worker_stats_match_python(computed: dict[str, Any], ledger_rows: list[Row]) -> None:
    expected = ref.workers(ledger_rows, ref.lifecycles(ledger_rows).values())
    got = {r["worker"]: r for r in computed["workers"]}
    assert set(got) == set(expected)
    for worker, stats in expected.items():
        for stat, value in stats.items():
            assert got[worker][stat] == pytest.approx(value), (worker, stat)


def test_poison_candidates_match_python(computed: dict[str, Any], ledger_rows: list[Row]) -> None:
    expected = ref.poison(ref.lifecycles(ledger_rows).values(), min_deliveries=2, limit=10)
    got = sorted(
        computed["poison_candidates"],
        key=lambda r: (
            -r["deliveries"],
            -(r["unlocks"] + r["expiries"]),
            r["node"],
            r["item_id"],
            r["cycle"],
        ),
    )
    assert [(r["node"], r["item_id"], r["cycle"]) for r in got] == [
        (life.node, life.item_id, life.cycle) for life in expected
    ]
    for row, life in zip(got, expected, strict=True):
        assert row["deliveries"] == life.deliveries
        assert row["holders"] == sorted(life.holders)
        assert row["outcome"] == life.outcome
    assert got[0]["deliveries"] >= 3


def test_node_totals_sum_the_buckets(computed: dict[str, Any], ledger_rows: list[Row]) -> None:
    lat = ref.latency(ref.lifecycles(ledger_rows).values())
    buckets = ref.node_buckets(ledger_rows, BUCKET)
    for row in computed["node_totals"]:
        node = row["node"]
        for kind in ref.KINDS:
            mine = [r for r in ledger_rows if r.node == node and r.kind == kind]
            # a filtered row counts items (one row per bound queue and batch)
            n = sum(max(r.deliveries, 1) for r in mine) if kind == K.FILTERED else len(mine)
            assert row[kind] == n, (node, kind)
        last = max(b for (n, b) in buckets if n == node)
        assert row["backlog"] == buckets[(node, last)]["backlog"]
        assert row["end_to_end_p95"] == pytest.approx(lat[(node, "end_to_end")]["p95"])


def test_report_html_draws_every_chart(computed: dict[str, Any]) -> None:
    html = computed["html"]
    nodes = {r["node"] for r in computed["node_totals"]}
    for node in nodes:
        assert f"{node}: events per bucket" in html and f"{node}: backlog" in html
    assert html.count("<polyline class='series'") >= 2 * len(nodes)
    latency_nodes = {r["node"] for r in computed["latency"] if r.get("samples")}
    for node in latency_nodes:  # a latency chart per node, each on its own scale
        assert f"{node}: latency (seconds, log scale)" in html
    for title in ("Items handled per worker", "Handling time p95 per worker"):
        assert title in html
    detail_charts = len({r["node"] for r in computed["attribute_values"]}) + len(
        {(r["node"], r["category"]) for r in computed["reasons"]}
    )
    assert detail_charts > len(nodes)
    assert html.count("<svg") == 2 * len(nodes) + 3 + 2 + detail_charts
    worst = max(computed["poison_candidates"], key=lambda r: r["deliveries"])
    assert worst["item_id"] in html


def test_attribute_keys_and_values_match_python(
    computed: dict[str, Any], ledger_rows: list[Row]
) -> None:
    keys = {(r["node"], r["key"], r["items"], r["rank"]) for r in computed["attribute_keys"]}
    assert keys == ref.attribute_keys(ledger_rows, TOP)
    values = {
        (r["node"], r["key"], r["value"], r["items"], r["rank"])
        for r in computed["attribute_values"]
    }
    assert values == ref.attribute_values(ledger_rows, TOP)
    assert {r["rank"] for r in computed["attribute_values"]} == set(range(1, TOP + 1))
    # The service's own headers never reach the ledger, so never the report.
    assert not {r["key"] for r in computed["attribute_keys"]} & {"reason", "last-error"}


def test_reasons_match_python(computed: dict[str, Any], ledger_rows: list[Row]) -> None:
    got = {(r["node"], r["category"], r["reason"], r["n"], r["rank"]) for r in computed["reasons"]}
    assert got == ref.reasons(ledger_rows, TOP)
    assert {r["category"] for r in computed["reasons"]} == {"failure", "dead_letter", "dropped"}
    # A nack without a reason is counted in the totals, never as a reason.
    assert None not in {r["reason"] for r in computed["reasons"]}
    assert any(r.kind == K.UNLOCKED and r.reason is None for r in ledger_rows)


def test_report_html_shows_the_details(computed: dict[str, Any]) -> None:
    html = computed["html"]
    top_failure = min(
        (r for r in computed["reasons"] if r["category"] == "failure"), key=lambda r: r["rank"]
    )
    assert f"{top_failure['node']}: failure reasons (unlocks and lock timeouts)" in html
    assert html.count(": dead-letter reasons</title>") == len(
        {r["node"] for r in computed["reasons"] if r["category"] == "dead_letter"}
    )
    pair = computed["attribute_values"][0]
    assert f"{pair['key']}={pair['value']}" in html
    assert "<th>most common values</th>" in html


def _aware(moment: Any) -> Any:
    """PySpark returns naive datetimes in the local zone of the Python process."""
    return None if moment is None else moment.astimezone(UTC)


def _epoch(naive_local: Any) -> float:
    return float(naive_local.astimezone(UTC).timestamp())


def test_bound_queues_match_python(computed: dict[str, Any], ledger_rows: list[Row]) -> None:
    """Issue 21: per topic, each bound queue with the items copied in and filtered out."""
    got = {(r["topic"], r["queue"]): (r["copied"], r["filtered"]) for r in computed["bound_queues"]}
    expected = ref.bound_queues(ledger_rows)
    assert got == expected
    assert set(got) == {("billing", "mail"), ("billing", "reports/eu")}  # jobs is unbound
    assert all(copied and filtered for copied, filtered in got.values())
    # a filtered row counts several items: the counts, not the rows, are summed
    assert any(r.kind == K.FILTERED and r.deliveries > 1 for r in ledger_rows)
    html = computed["html"]
    assert "<h2>Topics and their bound queues</h2>" in html
    for (topic, queue), (copied, filtered) in expected.items():
        row = f"<tr><td>{topic}</td><td>{queue}</td><td>{copied:,}</td><td>{filtered:,}</td>"
        assert row in html, row
