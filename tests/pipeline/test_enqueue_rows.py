"""Bulk enqueue without a network: reading input, rows -> payloads, why rows are refused."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.kit.ledger import needs_spark

needs_spark()  # before importing PySpark: skip (or fail under CI) without it

from xmpp_queue.client import (  # noqa: E402
    Account,
    PublishError,
    json_payload,
    parse_json_payload,
)
from xmpp_queue.pipeline.payloads import (  # noqa: E402
    BAD_ROW,
    NOT_SENT,
    REFUSED,
    TOO_LARGE,
    category_of,
    xml_problem,
)
from xmpp_queue.pipeline.settings import PublisherConfig  # noqa: E402

pytestmark = pytest.mark.spark

ACCOUNT = Account(jid="p@x", password="pw", service="pubsub.x")


# --- pure Python ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ("<job xmlns='urn:example'><n>1</n></job>", None),
        ("<a/>", None),
        ("<a>", "not well-formed"),
        ("<a/><b/>", "not well-formed"),
        ("just text", "not well-formed"),
        ("<!DOCTYPE a [<!ENTITY x 'boom'>]><a>&x;</a>", "DOCTYPE"),
    ],
)
def test_xml_payload_checks(payload: str, problem: str | None) -> None:
    found = xml_problem(payload)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found and category_of(found) == BAD_ROW


# --- Spark: reading and preparing ------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def prepared(spark: Any, inputs: list[str], **options: Any) -> list[dict[str, Any]]:
    from xmpp_queue.pipeline.enqueue import read_input
    from xmpp_queue.pipeline.payloads import prepare_items

    frame = read_input(spark, inputs, options.pop("input_format", None))
    rows = prepare_items(frame, **{"mode": "json", "max_payload_bytes": 400, **options})
    return [r.asDict() for r in rows.collect()]


def test_csv_rows_become_json_containers_and_bad_rows_are_named(spark: Any, tmp_path: Path) -> None:
    csv = write(
        tmp_path / "in" / "jobs.csv",
        "id,name,size,note\n"
        "a1,alpha,3,plain\n"
        'a2,<b> & co,4,"a, b"\n'
        " ,nameless,5,no id\n"
        "a4,big,6," + "x" * 500 + "\n"
        "a5,broken,7,too,many,fields\n",
    )
    rows = {r["record"] or r["item_id"]: r for r in prepared(spark, [str(csv)], id_column="id")}
    ok = [r for r in rows.values() if r["reject"] is None]
    assert sorted(r["item_id"] for r in ok) == ["a1", "a2"]
    by_id = {r["item_id"]: r for r in ok}
    assert parse_json_payload(by_id["a2"]["payload"]) == {
        "id": "a2",
        "name": "<b> & co",
        "size": 4,
        "note": "a, b",
    }
    assert by_id["a1"]["payload"].startswith("<json xmlns='urn:xmpp:json:0'>")
    assert by_id["a1"]["payload_bytes"] == len(by_id["a1"]["payload"].encode())
    assert by_id["a1"]["_source"].endswith("jobs.csv")
    big = json_payload({"id": "a4", "name": "big", "size": 6, "note": "x" * 500})
    reasons = sorted(r["reject"] for r in rows.values() if r["reject"])
    assert reasons == [
        f"{BAD_ROW}: empty item id in column id",
        f"{BAD_ROW}: malformed record",
        f"{TOO_LARGE}: {len(big.encode())} bytes > 400",
    ]
    assert all(r["payload"] is None for r in rows.values() if r["reject"])


def test_json_lines_from_a_glob_and_an_xml_column(spark: Any, tmp_path: Path) -> None:
    write(tmp_path / "d" / "part1.jsonl", '{"k": "x1", "xml": "<job n=\'1\'/>"}\n{oops\n')
    write(tmp_path / "d" / "part2.jsonl", '{"k": "x2", "xml": ""}\n{"k": "x3", "xml": "<a>"}\n')
    rows = prepared(
        spark, [str(tmp_path / "d" / "*.jsonl")], mode="xml", xml_column="xml", id_column="k"
    )
    by_id = {r["item_id"]: r for r in rows}
    assert by_id["x1"]["payload"] == "<job n='1'/>" and by_id["x1"]["reject"] is None
    assert by_id["x2"]["reject"] == f"{BAD_ROW}: empty XML in column xml"
    # Well-formedness is checked on the executors, just before publishing.
    assert by_id["x3"]["reject"] is None and xml_problem(by_id["x3"]["payload"])
    assert [r["reject"] for r in rows if r["item_id"] is None] == [f"{BAD_ROW}: malformed record"]


def test_parquet_directory_without_an_id_column_lets_the_service_name_items(
    spark: Any, tmp_path: Path
) -> None:
    src = spark.createDataFrame([(1, "one"), (2, "two")], "n int, word string")
    src.write.parquet(str(tmp_path / "pq"))
    rows = prepared(spark, [str(tmp_path / "pq")])
    assert {r["item_id"] for r in rows} == {None}
    assert sorted(parse_json_payload(r["payload"])["n"] for r in rows) == [1, 2]


def test_unknown_columns_and_formats_are_refused_early(spark: Any, tmp_path: Path) -> None:
    from xmpp_queue.pipeline.enqueue import detect_format

    csv = write(tmp_path / "x.csv", "a,b\n1,2\n")
    with pytest.raises(ValueError, match="--id-column 'nope'"):
        prepared(spark, [str(csv)], id_column="nope")
    with pytest.raises(ValueError, match="--xml-column"):
        prepared(spark, [str(csv)], mode="xml")
    write(tmp_path / "mixed" / "a.csv", "a\n1\n")
    write(tmp_path / "mixed" / "b.parquet", "")
    with pytest.raises(ValueError, match="give --format"):
        detect_format([str(tmp_path / "mixed")])
    assert detect_format([str(tmp_path / "*.csv")]) == "csv"


# --- outcomes of publishing, against a stand-in for the network ---------------------------------


class StandInPublisher:
    """Answers like the service would: ids starting with "refuse" are forbidden,
    "lost" ones never get an answer because the stream died. A batch is all or
    none, with the error of its first failing item."""

    instances: list[StandInPublisher] = []
    fail_connect = False
    retries = 0  # wait errors retried (the real Publisher counts them)

    def __init__(self, account: Account, **options: Any) -> None:
        self.account = account
        self.options = options
        self.sent: list[tuple[str, str | None, str | None]] = []
        self.requests: list[list[str | None]] = []  # item ids of each publish request
        self.headers: dict[str | None, dict[str, str]] = {}  # the SHIM headers of each item
        self.closed = False
        StandInPublisher.instances.append(self)

    async def connect(self) -> None:
        if StandInPublisher.fail_connect:
            raise ConnectionRefusedError("connection refused")

    async def submit(
        self,
        node: str,
        payload: str | None,
        item_id: str | None,
        attributes: dict[str, str] | None = None,
    ) -> Any:
        return await self.submit_batch(node, [(payload, item_id, attributes or {})], single=True)

    async def submit_batch(self, node: str, items: list[Any], single: bool = False) -> Any:
        from xmpp_queue.client import PublishItem

        assert single or len(items) > 1, "a batch of one goes as a plain publish"
        entries = [
            (i.payload, i.item_id, i.headers()) if isinstance(i, PublishItem) else (*i, {})[:3]
            for i in items
        ]
        self.requests.append([item_id for _, item_id, _ in entries])
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        for _, item_id, _ in entries:
            if item_id and item_id.startswith("refuse"):
                future.set_exception(PublishError("forbidden", "not a publisher"))
                return future
            if item_id and item_id.startswith("lost"):
                future.set_exception(PublishError("connection-lost"))
                return future
        self.sent += [(node, payload, item_id) for payload, item_id, _ in entries]
        self.headers.update({item_id: headers for _, item_id, headers in entries})
        ids = [item_id or "generated" for _, item_id, _ in entries]
        future.set_result(ids[0] if single else ids)
        return future

    async def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


def row(item_id: str, payload: str | None = "<a/>", reject: str | None = None) -> dict:
    return {
        "item_id": item_id,
        "payload": payload,
        "reject": reject,
        "_source": "f.csv",
        "record": None if reject is None else '{"id":1}',
    }


def test_each_row_ends_published_rejected_or_not_sent(monkeypatch: Any) -> None:
    import xmpp_queue.client
    from xmpp_queue.pipeline.enqueue import publish_partition, summarize

    monkeypatch.setattr(xmpp_queue.client, "Publisher", StandInPublisher)
    StandInPublisher.instances = []
    config = PublisherConfig(ACCOUNT, window=4, batch=1)

    rows = [
        row("ok1"),
        row("refuse1"),
        row("ok2", "<a>"),
        row("lost1"),
        row("bad", None, f"{BAD_ROW}: malformed record"),
        row("ok3"),
    ]
    records = list(publish_partition(config, "jobs", rows, check_xml=True))
    summary = summarize(records)
    assert (summary.rows_read, summary.published, summary.failed) == (6, 2, 1)
    assert summary.rejected == {BAD_ROW: 2, REFUSED: 1}
    reasons = {e["item_id"]: e["reason"] for e in summary.examples}
    assert reasons["refuse1"].startswith(f"{REFUSED}: forbidden")
    assert reasons["lost1"] == f"{NOT_SENT}: connection-lost"
    assert reasons["ok2"].startswith(f"{BAD_ROW}: not well-formed XML")
    assert reasons["bad"] == f"{BAD_ROW}: malformed record"
    sent = [item for p in StandInPublisher.instances for _, _, item in p.sent]
    assert sent == ["ok1", "ok3"]
    assert all(p.closed for p in StandInPublisher.instances)
    assert StandInPublisher.instances[0].options["window"] == 4


def test_a_refused_batch_is_sent_again_row_by_row_so_only_its_culprit_is_rejected(
    monkeypatch: Any,
) -> None:
    import xmpp_queue.client
    from xmpp_queue.pipeline.enqueue import publish_partition, summarize

    monkeypatch.setattr(xmpp_queue.client, "Publisher", StandInPublisher)
    StandInPublisher.instances = []
    config = PublisherConfig(ACCOUNT, window=4, batch=3)
    names = ["ok1", "ok2", "refuse1", "ok3", "ok4", "ok5", "lost1", "ok6"]
    summary = summarize(publish_partition(config, "jobs", [row(n) for n in names], False))
    assert (summary.published, summary.failed, summary.rejected) == (5, 2, {REFUSED: 1})
    reasons = {e["item_id"]: e["reason"] for e in summary.examples}
    assert reasons["refuse1"].startswith(f"{REFUSED}: forbidden")
    # A lost stream may or may not have stored the batch: not sent, and not sent again.
    assert reasons["lost1"] == reasons["ok6"] == f"{NOT_SENT}: connection-lost"
    (publisher,) = StandInPublisher.instances
    assert publisher.requests == [
        ["ok1", "ok2", "refuse1"],
        ["ok3", "ok4", "ok5"],
        ["lost1", "ok6"],
        ["ok1"],  # the refused batch, again one row per publish
        ["ok2"],
        ["refuse1"],
    ]
    assert [item for _, _, item in publisher.sent] == ["ok3", "ok4", "ok5", "ok1", "ok2"]


def test_batches_respect_their_size_and_a_payload_budget() -> None:
    from xmpp_queue.pipeline.sender import batches

    rows = [row(f"i{n}", "<a>" + "x" * 90 + "</a>") for n in range(7)]  # 97 bytes each
    assert [len(b) for b in batches(rows, 3)] == [3, 3, 1]
    assert [len(b) for b in batches(rows, 10, max_bytes=300)] == [3, 3, 1]
    big = row("big", "<a>" + "y" * 500 + "</a>")
    grouped = batches([rows[0], big, rows[1]], 10, max_bytes=300)
    assert [[r["item_id"] for r in b] for b in grouped] == [["i0"], ["big"], ["i1"]]
    assert [len(b) for b in batches([row("e", None)] * 5, 2)] == [2, 2, 1]
    assert batches([], 4) == []


def test_a_partition_that_cannot_connect_reports_its_rows_as_not_sent(monkeypatch: Any) -> None:
    import xmpp_queue.client
    from xmpp_queue.pipeline.enqueue import publish_partition, summarize

    monkeypatch.setattr(xmpp_queue.client, "Publisher", StandInPublisher)
    monkeypatch.setattr(StandInPublisher, "fail_connect", True)
    config = PublisherConfig(ACCOUNT, window=4)
    rows = [
        {"item_id": f"i{n}", "payload": "<a/>", "reject": None, "_source": None, "record": None}
        for n in range(3)
    ]
    summary = summarize(publish_partition(config, "jobs", rows, check_xml=False))
    assert (summary.published, summary.failed, summary.ok) == (0, 3, False)
    assert all("cannot connect" in e["reason"] for e in summary.examples)


def test_rejects_are_written_as_json_lines(tmp_path: Path) -> None:
    from xmpp_queue.pipeline.enqueue import write_rejects

    path = tmp_path / "rejects.jsonl"
    write_rejects(str(path), [{"reason": "bad row: x", "item_id": None}])
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {"reason": "bad row: x", "item_id": None}
    ]


def test_the_summary_tells_the_whole_wall_time_apart_from_publishing() -> None:
    import io

    from xmpp_queue.pipeline.enqueue_summary import EnqueueSummary, print_enqueue_summary

    summary = EnqueueSummary(rows_read=10, published=10, seconds=2.0, total_seconds=14.5)
    out = io.StringIO()
    print_enqueue_summary(summary, "jobs", out)
    text = out.getvalue()
    assert "wall time, all" in text and "14.5 s" in text
    assert "wall time, reading + publishing" in text and "2.0 s" in text
    assert "rate while publishing" in text and "5 items/s" in text
