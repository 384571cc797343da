"""The demo's numbers come from the component's ledger through the store's own
readers (issue 25 point 7): counts by kind and redeliveries, for the demo's queue
only. A migrated SQLite file written as the storage layer writes it; no servers."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.kit.ledger import insert_rows
from tests.pipeline.ledger_factory import Row
from xmpp_queue.demo.ledger import DemoLedger
from xmpp_queue.demo.plan import NODE
from xmpp_queue.storage.migrations import upgrade

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _rows() -> list[Row]:
    script = [
        ("published", NODE, "a"),
        ("published", NODE, "b"),
        ("published", NODE, "p"),
        ("delivered", NODE, "a"),
        ("unlocked", NODE, "a"),
        ("delivered", NODE, "a"),  # a redelivery
        ("acked", NODE, "a"),
        ("delivered", NODE, "b"),
        ("expired", NODE, "b"),
        ("delivered", NODE, "b"),  # another
        ("acked", NODE, "b"),
        ("delivered", NODE, "p"),
        ("dead_lettered", NODE, "p"),
        ("published", "elsewhere", "x"),  # another node: not the demo's
        ("acked", "elsewhere", "x"),
    ]
    return [
        Row(n + 1, T0 + timedelta(seconds=n), kind, node, item, None, 1, 10)
        for n, (kind, node, item) in enumerate(script)
    ]


async def test_counts_and_summary_read_the_demo_queue_s_ledger(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.sqlite'}"
    await asyncio.to_thread(upgrade, url)
    await asyncio.to_thread(insert_rows, url, _rows())
    async with DemoLedger(url) as ledger:
        assert await ledger.counts() == {"published": 3, "acked": 2, "dead_lettered": 1}
        assert await ledger.summary() == {
            "published": 3,
            "acked": 2,
            "delivered": 5,
            "redelivered": 2,
            "unlocked": 1,
            "expired": 1,
            "dead_lettered": 1,
        }
