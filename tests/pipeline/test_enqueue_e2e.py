"""Bulk enqueue into a real queue through a real Prosody, workers drain it, and
the report of the component's own ledger counts what happened.

Uses the integration fixtures (a private Prosody, the component run as an
operator runs it) by importing them, so this test lives with the pipeline's.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.kit.ledger import needs_spark

needs_spark()  # before importing PySpark: skip (or fail under CI) without it

from tests.kit.integration import PASSWORD, ComponentFactory  # noqa: E402
from xmpp_queue.pipeline.payloads import BAD_ROW, REFUSED, TOO_LARGE  # noqa: E402
from xmpp_queue.pipeline.settings import PipelineSettings  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration]

ROWS = 150
SERVICE = "queue.localhost"


def write_input(path: Path) -> None:
    lines = ["key,customer,amount,text"]
    lines += [f"job-{n},c{n % 7},{n * 1.5},hello {n}" for n in range(ROWS)]
    # fits our check, not the node's limit; amid other rows, so it shares a batch
    lines.insert(ROWS // 2, "job-big,c1,1," + "y" * 1500)
    lines.append("job-bad,too,many,fields,here")  # malformed: more fields than the header
    lines.append("job-huge,c1,1," + "x" * 6000)  # above --max-payload-bytes
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


async def test_enqueue_drain_and_report_agree(
    spark: Any,
    prosody: Any,
    component: ComponentFactory,
    tmp_path: Path,
) -> None:
    from tests.pipeline.test_report import parse
    from xmpp_queue.client import Publisher, Worker
    from xmpp_queue.pipeline.cli import run_pipeline

    service = await component(database_url=f"sqlite:///{tmp_path / 'queue.sqlite'}")
    node = "bulk-jobs"
    async with Publisher(
        "pub@localhost",
        PASSWORD,
        SERVICE,
        host=prosody.host,
        port=prosody.c2s_port,
        allow_plain=True,
    ) as admin:
        await admin.create_queue(
            node,
            config={"pubsub#max_payload_size": 1200},
            members=[f"{name}@localhost" for name in ("w1", "w2")],
        )

    settings = PipelineSettings(
        database_url=service.database_url,
        publisher_jid="pub@localhost",
        publisher_password=PASSWORD,
        service_jid=SERVICE,
        xmpp_host=prosody.host,
        xmpp_port=prosody.c2s_port,
        allow_plain=True,
        window=16,
    )
    source = tmp_path / "jobs.csv"
    write_input(source)
    rejects = tmp_path / "rejects.jsonl"
    enqueue_argv = [
        "pipeline",
        "enqueue",
        "--node",
        node,
        "--input",
        str(source),
        "--id-column",
        "key",
        "--max-payload-bytes",
        "5000",
        "--rejects",
        str(rejects),
    ]
    enqueue = parse(enqueue_argv)

    # Twice, as after a failure: the second run replaces queued items, adds none.
    # The first run publishes 16 rows per request (the default): the batch that
    # holds job-big is refused whole and sent again row by row, so only job-big
    # is rejected. The second sends one row per publish.
    one_by_one = parse([*enqueue_argv, "--publish-batch", "1"])
    for args in (enqueue, one_by_one):
        printed = io.StringIO()
        code = await asyncio.to_thread(run_pipeline, args, settings, printed)
        text = printed.getvalue()
        assert code == 1, text  # not every row could be published
        assert re.search(rf"read\W+{ROWS + 3}\b", text), text
        assert re.search(rf"published\W+{ROWS}\b", text), text
        for category in ("bad row", "payload too large", "refused by the service"):
            assert re.search(rf"rejected: {category}\W+1\b", text), text
    outcomes = {
        line.split('"reason": "')[1].split(":")[0] for line in rejects.read_text().splitlines()
    }
    assert outcomes == {BAD_ROW, TOO_LARGE, REFUSED}
    # Replayable: every line carries its row, the one the service refused too.
    by_item = {r["item_id"]: r for r in map(json.loads, rejects.read_text().splitlines())}
    assert all(r["record"] for r in by_item.values()), by_item
    assert json.loads(by_item["job-big"]["record"])["text"] == "y" * 1500

    # Workers drain the queue: every row handled exactly once.
    handled: list[str] = []
    done = asyncio.Event()

    async def handle(job: Any) -> None:
        handled.append(job.item_id)
        assert job.json()["key"] == job.item_id
        if len(handled) >= ROWS:
            done.set()

    workers = [
        Worker(
            f"{name}@localhost",
            PASSWORD,
            SERVICE,
            node,
            handle,
            queue_requests=8,
            host=prosody.host,
            port=prosody.c2s_port,
            allow_plain=True,
            name=name,
        )
        for name in ("w1", "w2")
    ]
    for worker in workers:
        await worker.start()
    try:
        await asyncio.wait_for(done.wait(), 60)
    finally:
        for worker in workers:
            await worker.stop(grace=5)
    assert sorted(handled) == sorted(f"job-{n}" for n in range(ROWS))
    acked = sum(w.stats.acked for w in workers)
    assert acked == ROWS

    # The report of the component's ledger counts the same.
    out = tmp_path / "report"
    printed = io.StringIO()
    report = parse(["pipeline", "report", "--out", str(out), "--bucket", "10s"])
    assert await asyncio.to_thread(run_pipeline, report, settings, printed) == 0
    (totals,) = [
        r for r in spark.read.parquet(str(out / "node_totals")).collect() if r["node"] == node
    ]
    assert (totals["published"], totals["acked"], totals["backlog"]) == (ROWS, ROWS, 0)
    assert totals["delivered"] >= ROWS
    per_worker = {
        r["worker"].split("@")[0]: r["handled"]
        for r in spark.read.parquet(str(out / "workers")).collect()
    }
    assert sum(per_worker.values()) == ROWS and set(per_worker) <= {"w1", "w2"}
    assert (out / "report.html").read_text().count("<svg") >= 5
