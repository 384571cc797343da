"""``pipeline enqueue --ordering-key-column`` into a real ordered queue through
Prosody (issue 20): the rows of each key are stored in the file's order although
batches are refused (a row too large for the node sends its batch row by row)
and the service's publish rate makes publishes wait and retry (issue 24).

The order is read from the component's own store (``items.seq``, the order the
service accepted them in), which is what an ordered queue hands out by.
"""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.kit.ledger import needs_spark

needs_spark()

from tests.kit.integration import PASSWORD, ComponentFactory  # noqa: E402
from xmpp_queue.pipeline.settings import PipelineSettings  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration]

SERVICE = "queue.localhost"
ROWS, KEYS = 400, 5


def write_rows(path: Path) -> set[str]:
    """ROWS lines over KEYS interleaved keys; every 9th row is too large for the
    node (so its batch is refused whole). Returns the ids of those rows."""
    big: set[str] = set()
    with path.open("w", encoding="utf-8") as handle:
        for n in range(ROWS):
            row_id = f"r{n:04d}"
            filler = "x" * (600 if n % 9 == 4 else 10)
            if n % 9 == 4:
                big.add(row_id)
            handle.write(json.dumps({"id": row_id, "key": f"k{n % KEYS}", "pad": filler}) + "\n")
    return big


async def test_each_keys_rows_are_stored_in_file_order_despite_refusals_and_waits(
    spark: Any,
    prosody: Any,
    component: ComponentFactory,
    tmp_path: Path,
) -> None:
    from tests.pipeline.test_settings_cli import parse
    from xmpp_queue.client import Publisher
    from xmpp_queue.pipeline.cli import run_pipeline

    db = tmp_path / "queue.sqlite"
    # A low publish rate for this account: publishes are told to wait and retried. Low
    # enough (about 4 s for the file) that even a slow, loaded machine outruns it.
    await component(
        database_url=f"sqlite:///{db}", limits={"publish_rate": 100, "publish_burst": 20}
    )
    big = write_rows(tmp_path / "rows.jsonl")
    settings = PipelineSettings(
        publisher_jid="pub@localhost",
        publisher_password=PASSWORD,
        service_jid=SERVICE,
        xmpp_host=prosody.host,
        xmpp_port=prosody.c2s_port,
        allow_plain=True,
        window=16,
    )
    argv = [
        "pipeline",
        "enqueue",
        "--node",
        "orders",
        "--input",
        str(tmp_path / "rows.jsonl"),
        "--id-column",
        "id",
        "--ordering-key-column",
        "key",
        "--publish-batch",
        "6",
        "--connections",
        "2",
    ]
    async with Publisher(
        "pub@localhost",
        PASSWORD,
        SERVICE,
        host=prosody.host,
        port=prosody.c2s_port,
        allow_plain=True,
    ) as pub:
        await pub.create_queue("orders", ordered=True, config={"pubsub#max_payload_size": 300})
        printed = io.StringIO()
        code = await asyncio.to_thread(run_pipeline, parse(argv), settings, printed)
    output = printed.getvalue()
    assert code == 1, output  # the large rows are refused, each on its own
    assert "payload" in output.lower()

    with sqlite3.connect(db) as conn:
        stored = conn.execute(
            "SELECT item_id, ordering_key FROM items WHERE node_id = 'orders' ORDER BY seq"
        ).fetchall()
    assert {item for item, _ in stored} == {f"r{n:04d}" for n in range(ROWS)} - big
    by_key: dict[str, list[str]] = {}
    for item, key in stored:
        by_key.setdefault(key, []).append(item)
    assert sorted(by_key) == [f"k{k}" for k in range(KEYS)]
    for key, items in by_key.items():
        assert items == sorted(items), f"{key} out of file order: {items}"
    assert "throttled" in output, output  # the rate was hit, and the summary names it
    assert "rate_exempt" in output
