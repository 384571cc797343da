"""Many workers leaving at once: what a departure costs, and whether others are still served.

Why: a departure (unavailable presence, unsubscribe, bounce) must cost what the leaving
subscriber holds (its subscriptions and locks), not the number of subscribers or items.
When it cost O(n), 10,000 idle workers leaving kept the component busy for minutes and a
bystander's publishes timed out meanwhile; subscribing slowed as the count grew.

What it does, over the service and its store (no XMPP: the glue adds a constant per
stanza), driven the way the component drives it:

1. ``--workers`` workers (one account each, one resource) subscribe to one queue with a
   window of 1; the subscribe rate is printed per tenth of them (it must stay flat);
2. ``--backlog`` items are published, so that many workers hold one lock each and the rest
   are idle;
3. every worker leaves at once: each departure is its own task calling the presence
   tracker the component uses (full JID gone, then its account), while a bystander
   keeps publishing to a queue of its own, one request at a time;
4. prints the time until every worker was released and the bystander's publish latency
   during it (p50, p99, max).

Run from the repository root:
    python bench/departures.py --store sqlite --workers 10000
    python bench/departures.py --store memory --workers 2000 --profile
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from xmpp_queue.app.core_inputs import new_id, utc_now  # noqa: E402
from xmpp_queue.core.limits import Limits  # noqa: E402
from xmpp_queue.core.model import AccessModel, Actor  # noqa: E402
from xmpp_queue.core.ports import Store  # noqa: E402
from xmpp_queue.core.service import PubSubService, ServiceSettings  # noqa: E402
from xmpp_queue.core.service_access import ServiceAccess  # noqa: E402
from xmpp_queue.runtime.presence import PresenceTracker  # noqa: E402

NODE = "jobs"
BYSTANDER_NODE = "bystander"
OWNER = Actor("owner@localhost/admin")
BYSTANDER = Actor("bystander@localhost/pub")
QUEUE_FORM = {
    "FORM_TYPE": ["http://jabber.org/protocol/pubsub#node_config"],
    "pubsub#queue": ["1"],
    "pubsub#access_model": [AccessModel.OPEN.value],
}
SUB_FORM = {
    "FORM_TYPE": ["http://jabber.org/protocol/pubsub#subscribe_options"],
    "pubsub#queue_requests": ["1"],
}


def pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(len(values) * q))] * 1e3 if values else 0.0


async def subscribe_all(service: PubSubService, workers: list[Actor]) -> list[float]:
    """Subscribe every worker (a window of 64 requests in flight); rate per tenth."""
    tenth = max(1, len(workers) // 10)
    rates: list[float] = []
    for start in range(0, len(workers), tenth):
        chunk = workers[start : start + tenth]
        t0 = time.perf_counter()
        for i in range(0, len(chunk), 64):
            await asyncio.gather(
                *(service.subscribe(w, NODE, w.jid, SUB_FORM) for w in chunk[i : i + 64])
            )
        rates.append(len(chunk) / (time.perf_counter() - t0))
    return rates


async def bystander(service: PubSubService, stop: asyncio.Event, lat: list[float]) -> None:
    n = 0
    while not stop.is_set():
        t0 = time.perf_counter()
        await service.publish(BYSTANDER, BYSTANDER_NODE, f"b{n}", "<job/>", 6)
        lat.append(time.perf_counter() - t0)
        n += 1
        # The bystander's worker acks at once, so its queue never fills.
        await service.retract(BYSTANDER, BYSTANDER_NODE, f"b{n - 1}")
        await asyncio.sleep(0.005)


async def open_store(kind: str, workdir: Path, pg_db: str) -> Store:
    """The store `xmpp_queue.app` runs, over the backend *kind* (PostgreSQL: *pg_db*,
    a database this run creates, and drops at its end)."""
    from xmpp_queue.storage import migrations
    from xmpp_queue.storage.store import StateStore

    if kind == "memory":
        return StateStore.in_memory()
    if kind == "sqlite":
        url = f"sqlite:///{workdir / 'queue.db'}"
    else:
        from processes import recreate_postgres_db

        await asyncio.to_thread(recreate_postgres_db, pg_db)
        url = f"postgresql://postgres@127.0.0.1:5432/{pg_db}"
    await migrations.upgrade_async(url)
    return await StateStore.open(url)


async def bench(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="xq-departures-") as tmp:
        from processes import scratch_db_name

        args.pg_db = scratch_db_name(args.pg_db)
        store = await open_store(args.store, Path(tmp), args.pg_db)
        settings = ServiceSettings(
            access=ServiceAccess.for_domain("localhost"), limits=Limits(publish_rate=0)
        )
        service = PubSubService(store, utc_now, new_id, settings)
        await service.start()
        try:
            await service.create_node(OWNER, NODE, QUEUE_FORM)
            await service.create_node(BYSTANDER, BYSTANDER_NODE, QUEUE_FORM)
            await service.subscribe(BYSTANDER, BYSTANDER_NODE, BYSTANDER.jid, SUB_FORM)
            workers = [Actor(f"worker{k}@localhost/w") for k in range(args.workers)]
            rates = await subscribe_all(service, workers)
            for i in range(0, args.backlog, 64):
                await asyncio.gather(
                    *(
                        service.publish(OWNER, NODE, f"i{k}", "<job/>", 6)
                        for k in range(i, min(args.backlog, i + 64))
                    )
                )

            released = 0

            async def release(jid: str, reason: str) -> None:
                nonlocal released
                await service.release_subscriber(jid, reason)
                released += 1

            tracker = PresenceTracker(release)
            for w in workers:
                tracker.available(w.jid)
            stop = asyncio.Event()
            lat: list[float] = []
            by = asyncio.create_task(bystander(service, stop, lat))
            await asyncio.sleep(0.05)
            profiler = cProfile.Profile() if args.profile else None
            if profiler:
                profiler.enable()
            t0 = time.perf_counter()
            await asyncio.wait_for(
                asyncio.gather(*(tracker.gone(w.jid, "unavailable") for w in workers)),
                args.timeout,
            )
            took = time.perf_counter() - t0
            if profiler:
                profiler.disable()
            stop.set()
            await by
            left = len(await service.get_node_subscriptions(OWNER, NODE))
        finally:
            await service.stop()
            await store.close()
            if args.store == "postgresql":
                from processes import drop_postgres_db

                await asyncio.to_thread(drop_postgres_db, args.pg_db)
    lat.sort()
    print(
        f"store={args.store} workers={args.workers} backlog={args.backlog}: "
        f"subscribe/s by tenth {' '.join(f'{r:.0f}' for r in rates)}"
    )
    print(
        f"  all {args.workers} released in {took:.2f} s ({released} releases, "
        f"{left} subscriptions left); bystander publishes meanwhile: {len(lat)}, "
        f"p50 {pct(lat, 0.5):.1f} ms p99 {pct(lat, 0.99):.1f} ms "
        f"max {(lat[-1] * 1e3 if lat else 0.0):.1f} ms"
    )
    if profiler:
        for key in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(args.top)
            print(f"--- cProfile by {key}")
            print(out.getvalue().split("\n\n", 1)[-1].rstrip())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", choices=("memory", "sqlite", "postgresql"), default="sqlite")
    p.add_argument("--workers", type=int, default=10_000)
    p.add_argument("--backlog", type=int, default=1000, help="items locked before they leave")
    p.add_argument(
        "--pg-db",
        default="xq_bench_departures",
        help="name prefix of the database the run creates (and drops at its end)",
    )
    p.add_argument("--profile", action="store_true", help="cProfile the departures")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--timeout", type=float, default=900.0)
    asyncio.run(bench(p.parse_args()))


if __name__ == "__main__":
    main()
