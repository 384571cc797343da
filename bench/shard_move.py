"""How long a queue move between shards pauses its shards (docs/scaling.md, "Moving a queue").

Two shard stores on one PostgreSQL database (as two processes would hold them),
the real service and the real mover (``sharding_moves.py``). The old shard holds
one queue of ``--items`` waiting items (plus ``--other`` items on another queue
that stays); a worker holds 100 of them locked. Prints, per size, the time the
old shard's store is held still (the fenced placement rewrite plus its reload:
nothing of that shard commits meanwhile) and the time the new shard takes to
adopt it (its reload plus the sweep that hands out work). Both are a full load of
the shard: they grow with what the shard holds, not with the moved queue alone.

Run from the repository root (needs the tests' PostgreSQL server):
    XMPP_QUEUE_TEST_PG_URL=postgresql://postgres@127.0.0.1:5432/test \\
        python bench/shard_move.py --items 1000 10000 100000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.kit import FakeClock, build_service  # noqa: E402
from tests.kit.pg import migrated  # noqa: E402
from xmpp_queue.core.model import AccessModel, Actor, NewItem  # noqa: E402
from xmpp_queue.sharding_moves import ShardMover  # noqa: E402
from xmpp_queue.storage.placement import PlacementTable  # noqa: E402
from xmpp_queue.storage.shard_backend import open_shard_store  # noqa: E402

P0, P1 = "p0.bench", "p1.bench"
OWNER = Actor("owner@example.org/desk")
WORKER = Actor("w1@example.org/proc")
QUEUE = {"pubsub#queue": ["1"], "pubsub#access_model": [AccessModel.OPEN.value]}


async def one(url: str, items: int, other: int) -> tuple[float, float]:
    clock = FakeClock()
    stores = [await open_shard_store(url, None, s) for s in (P0, P1)]
    services = [build_service(s, clock) for s in stores]
    table = PlacementTable(url)
    movers = [
        ShardMover(name, (P0, P1), store, table, svc, lambda effects: None)
        for name, store, svc in zip((P0, P1), stores, services, strict=True)
    ]
    try:
        for svc in services:
            await svc.start()
        old = services[0]
        await old.create_node(OWNER, "jobs", QUEUE)
        await old.create_node(OWNER, "stays", QUEUE)
        for node, count in (("jobs", items), ("stays", other)):
            for start in range(0, count, 1000):
                batch = [
                    NewItem(f"i{n}", "<p xmlns='x'/>", 14, {})
                    for n in range(start, min(count, start + 1000))
                ]
                await old.publish_items(OWNER, node, batch)
                clock.advance(1.0)  # under the service's publish rate limit
        await old.subscribe(WORKER, "jobs", WORKER.jid, {"pubsub#queue_requests": ["100"]})
        began = time.perf_counter()
        await movers[0].move("jobs", P1)
        held = time.perf_counter() - began
        began = time.perf_counter()
        adopted = await movers[1].adopt()
        adopt = time.perf_counter() - began
        assert adopted == ["jobs"], adopted
        return held, adopt
    finally:
        for svc, store in zip(services, stores, strict=True):
            await svc.stop()
            await store.close()
        await table.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--other", type=int, default=1000, help="items of a queue that stays")
    args = parser.parse_args()
    print(f"{'items moved':>12} {'old shard held still':>21} {'new shard adopts':>17}")
    for items in args.items:
        with migrated("xq_move_bench") as url:
            held, adopt = await one(url, items, args.other)
        print(f"{items:>12} {held * 1000:>18.0f} ms {adopt * 1000:>14.0f} ms")


if __name__ == "__main__":
    asyncio.run(main())
