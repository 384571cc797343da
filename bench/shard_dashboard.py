"""What one read of a sharded dashboard's "Every shard" list costs (docs/scaling.md,
"The dashboard of a sharded deployment").

Every shard's listener answers ``/api/deployment`` with one grouped pass over the
items table of the shared PostgreSQL (``PlacementTable.placed_queues``), cached
5 s. This fills a migrated database with ``--queues`` queue nodes over three
shards and ``--items`` items spread over them (one in ten locked, one in twenty
delayed), written straight in SQL, then times the read (median of ``--runs``).

Run from the repository root (needs the tests' PostgreSQL server):
    XMPP_QUEUE_TEST_PG_URL=postgresql://postgres@127.0.0.1:5432/test \\
        python bench/shard_dashboard.py --items 10000 100000 1000000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import asyncpg  # noqa: E402

from tests.kit.pg import migrated  # noqa: E402
from xmpp_queue.core.model import NodeConfig  # noqa: E402
from xmpp_queue.storage import codec  # noqa: E402
from xmpp_queue.storage.lease import asyncpg_dsn  # noqa: E402
from xmpp_queue.storage.placement import PlacementTable  # noqa: E402

SHARDS = ("p0.bench", "p1.bench", "p2.bench")
FILL = """
INSERT INTO items (node_id, item_id, publisher, payload, payload_size, published_at,
                   updated_at, locked_by, deliveries, available_at)
SELECT 'q' || (n % $1), 'i' || n, 'pub@bench', '<p/>', 4, now(), now(),
       CASE WHEN n % 10 = 0 THEN 's' || n END, 0,
       CASE WHEN n % 20 = 1 THEN now() + interval '1 hour' END
  FROM generate_series(1, $2) AS n
"""


async def fill(url: str, queues: int, items: int) -> None:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        config = codec.encode_config(NodeConfig(queue=True))
        await conn.executemany(
            "INSERT INTO nodes (node_id, config, creator, created_at) VALUES ($1, $2, '', now())",
            [(f"q{n}", config) for n in range(queues)],
        )
        await conn.executemany(
            "INSERT INTO node_placement (node_id, shard, epoch, placed_at) "
            "VALUES ($1, $2, 1, now())",
            [(f"q{n}", SHARDS[n % len(SHARDS)]) for n in range(queues)],
        )
        await conn.execute(FILL, queues, items)
        await conn.execute("ANALYZE items")
    finally:
        await conn.close()


async def one(url: str, queues: int, items: int, runs: int) -> float:
    await fill(url, queues, items)
    table = PlacementTable(url)
    try:
        times = []
        for _ in range(runs):
            began = time.perf_counter()
            rows = await table.placed_queues(datetime.now(UTC))
            times.append(time.perf_counter() - began)
        assert len(rows) == queues and sum(r.in_flight for r in rows) == items // 10
        return statistics.median(times)
    finally:
        await table.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, nargs="+", default=[10000, 100000, 1000000])
    parser.add_argument("--queues", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"{'items':>10} {'queues':>7} {'one read (median)':>18}")
    for items in args.items:
        with migrated("xq_dash_bench") as url:
            took = await one(url, args.queues, items, args.runs)
        print(f"{items:>10} {args.queues:>7} {took * 1000:>15.0f} ms")


if __name__ == "__main__":
    asyncio.run(main())
