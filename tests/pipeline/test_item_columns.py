"""``pipeline enqueue`` columns → item attributes, delay, expiry and priority (issue 19).

Spark local mode for the column expressions; the executor half (``row_headers``)
and the publishing path against the stand-in publisher of test_enqueue_rows.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.kit.ledger import needs_spark
from xmpp_queue.pipeline.item_columns import ItemColumns, parse_column_list, row_headers
from xmpp_queue.pipeline.settings import PipelineSettings, PipelineSettingsError

NOW = datetime(2026, 11, 25, 8, 0, tzinfo=UTC)


# --- no Spark: options, settings and the executor half -----------------------------------


def test_the_options_parse_and_the_setting_is_the_default() -> None:
    from tests.pipeline.test_settings_cli import parse
    from xmpp_queue.pipeline.cli import item_columns

    args = parse(
        [
            *("pipeline", "enqueue", "--node", "j", "--input", "a.csv"),
            *("--attribute-columns", "tenant, region", "--delay-column", "wait"),
            *("--ttl-column", "ttl", "--priority-column", "prio"),
        ]
    )
    columns = item_columns(args, PipelineSettings(attribute_columns=("x",)))
    assert columns == ItemColumns(("tenant", "region"), "wait", None, "ttl", "prio")
    plain = parse(["pipeline", "enqueue", "--node", "j", "--input", "a.csv"])
    assert item_columns(plain, PipelineSettings(attribute_columns=("x",))).attributes == ("x",)
    assert PipelineSettings.from_dict({"attribute_columns": "a, b"}).attribute_columns == ("a", "b")
    assert PipelineSettings.from_dict({"attribute_columns": ["a"]}).attribute_columns == ("a",)
    with pytest.raises(PipelineSettingsError, match="attribute_columns must be a list"):
        PipelineSettings.from_dict({"attribute_columns": [1]})
    assert parse_column_list(" a,,b ") == ("a", "b")


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (ItemColumns(delay="a", deliver_at="b"), "--delay-column or --deliver-at-column"),
        (ItemColumns(delay="a", ttl="a"), "two of the item's roles"),
        (ItemColumns(("a", "a")), "names a column twice"),
        (ItemColumns(("reason",)), "a header the service sets itself"),
        (ItemColumns(("TTL",)), "use --delay-column"),
    ],
)
def test_contradictory_choices_are_refused_before_spark(columns: ItemColumns, message: str) -> None:
    with pytest.raises(PipelineSettingsError, match=message):
        columns.check()


def test_the_command_refuses_them_in_one_line_with_exit_2(tmp_path: Path) -> None:
    from tests.kit.integration import subprocess_env

    argv = ["pipeline", "enqueue", "--node", "j", "--input", "a.csv"]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "xmpp_queue",
            *argv,
            "--delay-column",
            "a",
            "--deliver-at-column",
            "b",
        ],
        cwd=tmp_path,  # no config.toml there
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--delay-column or --deliver-at-column" in lines[0]


def test_row_headers_use_the_clients_rules() -> None:
    spec = json.dumps(
        {
            "attributes": {"tenant": "acme", "empty": "", "n": "3"},
            "delay": "90",
            "ttl": "600",
            "priority": "High",
        }
    )
    assert row_headers(spec, NOW) == {
        "tenant": "acme",
        "n": "3",
        "Start": "2026-11-25T08:01:30Z",
        "TTL": "600",
        "Urgency": "high",
    }
    assert row_headers(None) == {}
    assert row_headers(json.dumps({"deliver_at": "2026-11-25 09:00:00"}))["Start"] == (
        "2026-11-25T09:00:00Z"  # no zone: UTC
    )
    assert row_headers(json.dumps({"deliver_at": "1795593600"}))["Start"] == "2026-11-25T08:00:00Z"
    assert row_headers(json.dumps({"delay": None, "ttl": " "})) == {}
    for bad, message in [
        ({"ttl": "1.5"}, "ttl must be a whole number"),
        ({"priority": "urgent"}, "priority must be"),
        ({"delay": "soon"}, "not a number of seconds"),
        ({"delay": "-5"}, "must not be negative"),
        ({"deliver_at": "tomorrow"}, "not a time"),
    ]:
        with pytest.raises(ValueError, match=message):
            row_headers(json.dumps(bad))


def test_a_bad_cell_rejects_its_row_and_headers_go_with_each_item(monkeypatch: Any) -> None:
    import xmpp_queue.client
    from tests.pipeline.test_enqueue_rows import StandInPublisher, row
    from xmpp_queue.client import Account
    from xmpp_queue.pipeline.enqueue import publish_partition, summarize
    from xmpp_queue.pipeline.settings import PublisherConfig

    monkeypatch.setattr(xmpp_queue.client, "Publisher", StandInPublisher)
    StandInPublisher.instances = []
    config = PublisherConfig(Account(jid="p@x", password="pw", service="pubsub.x"), 4, 3)
    spec = {"attributes": {"tenant": "acme"}, "priority": "low"}
    rows = [
        {**row("a1"), "item_headers": json.dumps(spec)},
        {**row("a2"), "item_headers": json.dumps({"ttl": "0"})},  # refused by the client
        {**row("a3"), "item_headers": None},
        {**row("a4"), "item_headers": json.dumps({"attributes": {"tenant": "beta"}})},
    ]
    summary = summarize(publish_partition(config, "jobs", rows, False))
    assert (summary.published, dict(summary.rejected)) == (3, {"bad row": 1})
    (example,) = summary.examples
    assert example["item_id"] == "a2" and "ttl must be a whole number" in example["reason"]
    (publisher,) = StandInPublisher.instances
    assert publisher.headers == {
        "a1": {"tenant": "acme", "Urgency": "low"},
        "a3": {},
        "a4": {"tenant": "beta"},
    }


def test_batches_count_header_bytes_in_their_budget() -> None:
    from tests.pipeline.test_enqueue_rows import row
    from xmpp_queue.pipeline.item_columns import Outgoing
    from xmpp_queue.pipeline.sender import batches

    plain = [row(f"p{n}", "<a>" + "x" * 90 + "</a>") for n in range(3)]  # 97 bytes each
    assert [len(b) for b in batches(plain, 10, max_bytes=300)] == [3]
    heavy = [Outgoing(r, {"note": "y" * 60}) for r in plain]
    assert [len(b) for b in batches(heavy, 10, max_bytes=300)] == [1, 1, 1]


# --- Spark: the column expression ----------------------------------------------------------


def test_chosen_columns_reach_each_row_as_headers(spark: Any, tmp_path: Path) -> None:
    needs_spark()
    from tests.pipeline.test_enqueue_rows import prepared, write

    csv = write(
        tmp_path / "in.csv",
        "key,tenant,region,wait,ttl,prio\n"
        "k1,acme,eu,30,600,high\n"
        "k2,beta,,,,\n"
        "k3,acme,us,5,1.5,low\n",
    )
    columns = ItemColumns(("tenant", "region"), "wait", None, "ttl", "prio")
    rows = prepared(spark, [str(csv)], id_column="key", item_columns=columns)
    by_id = {r["item_id"]: r for r in rows}
    assert row_headers(by_id["k1"]["item_headers"], NOW) == {
        "tenant": "acme",
        "region": "eu",
        "Start": "2026-11-25T08:00:30Z",
        "TTL": "600",
        "Urgency": "high",
    }
    assert row_headers(by_id["k2"]["item_headers"], NOW) == {"tenant": "beta"}
    with pytest.raises(ValueError, match="ttl must be a whole number"):
        row_headers(by_id["k3"]["item_headers"], NOW)
    # the columns stay in the row's JSON payload
    assert "acme" in by_id["k1"]["payload"]
    # without chosen columns nothing is computed
    assert {r["item_headers"] for r in prepared(spark, [str(csv)])} == {None}


def test_a_timestamp_column_keeps_its_instant(spark: Any, tmp_path: Path) -> None:
    needs_spark()
    from tests.pipeline.test_enqueue_rows import prepared, write

    path = write(tmp_path / "in.json", '{"k": "t1", "at": "2026-11-25T10:00:00+02:00"}\n')
    frame = spark.read.json(str(path)).selectExpr("k", "to_timestamp(at) as at")
    frame.write.parquet(str(tmp_path / "p"))
    rows = prepared(
        spark,
        [str(tmp_path / "p")],
        input_format="parquet",
        item_columns=ItemColumns(deliver_at="at"),
    )
    assert row_headers(rows[0]["item_headers"])["Start"] == "2026-11-25T08:00:00Z"


def test_a_missing_column_is_named(spark: Any, tmp_path: Path) -> None:
    needs_spark()
    from tests.pipeline.test_enqueue_rows import prepared, write

    csv = write(tmp_path / "in.csv", "a,b\n1,2\n")
    with pytest.raises(PipelineSettingsError, match="--ttl-column 'nope' is not a column"):
        prepared(spark, [str(csv)], item_columns=ItemColumns(ttl="nope"))
