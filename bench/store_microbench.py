"""Storage microbenchmark: the service over one store, no XMPP.

One publisher keeps a window of publishes outstanding on a queue node; four
workers with ``queue_requests`` 8 ack every item the moment its notification
comes back. Prints items/s (publish to ack, wall clock) and the process's CPU
microseconds per item, which is the figure to read on a shared machine.

    python bench/store_microbench.py --store database
    python bench/store_microbench.py --store database \\
        --url postgresql://postgres@127.0.0.1/xq_wb

The database is made empty and migrated first: SQLite, the file named by ``--url``
is deleted, so point it at a scratch file; PostgreSQL, ``--url`` names the server
only: the run creates a database of its own beside the one named, and drops it
at its end (the named database is never written). ``--store memory`` runs the
same load on the store with no database behind it: the core's own cost, the
floor any backend adds to. ``--profile FILE`` writes a cProfile of the run.

``--backlog N`` queues N items before the workers subscribe (the rate then
counts the backlog's acks too); the write-behind store is reopened after
filling it (``--store database``), so the backlog is dispatched with its
payloads still on disk.

``--memory N`` measures instead what a loaded store holds: N queued items
with 200-byte payloads are written straight into a fresh SQLite database
(about one in a hundred locked), then a StateStore is opened on it;
it prints the load time, the growth of the resident set, and (from a second
load under tracemalloc) the bytes held per item.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import resource
import sqlite3
import tempfile
import time
import tracemalloc
import uuid
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import text

from xmpp_queue.core.effects import Effect, ItemNotice
from xmpp_queue.core.limits import Limits
from xmpp_queue.core.model import Actor, Affiliation
from xmpp_queue.core.ports import Store
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.storage.engine import is_sqlite, normalize_url
from xmpp_queue.storage.migrations import upgrade

WORKERS = 4
# The store's speed is measured, not the policy: the per-JID publish rate is off.
SETTINGS = ServiceSettings(
    access=ServiceAccess.for_domain("example.org"), limits=Limits(publish_rate=0)
)
QUEUE_REQUESTS = 8
PAYLOAD = "<job xmlns='urn:example:job'>" + "x" * 170 + "</job>"


def remove_sqlite(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(path + suffix).unlink(missing_ok=True)


async def reset(url: str) -> None:
    """An empty, migrated database at *url* (SQLite: the file is deleted first;
    PostgreSQL: *url* is a database :func:`scratch_postgres` just created)."""
    if is_sqlite(url):
        await asyncio.to_thread(remove_sqlite, url.split("///", 1)[1])
    await asyncio.to_thread(upgrade, url)


async def _server_sql(url: str, statement: str) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(normalize_url(url), isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(statement))
    finally:
        await engine.dispose()


async def scratch_postgres(url: str) -> str:
    """Create a database of this run's own on *url*'s server; return its URL."""
    from sqlalchemy.engine import make_url

    name = f"xq_microbench_{uuid.uuid4().hex[:12]}"
    await _server_sql(url, f'CREATE DATABASE "{name}"')
    return make_url(url).set(database=name).render_as_string(hide_password=False)


async def drop_scratch_postgres(server_url: str, scratch_url: str) -> None:
    from sqlalchemy.engine import make_url

    name = make_url(scratch_url).database
    await _server_sql(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def open_store(kind: str, url: str) -> Store:
    from xmpp_queue.storage.store import StateStore

    if kind == "memory":
        return StateStore.in_memory()
    return await StateStore.open(url)


async def run(
    kind: str, url: str, items: int, window: int, profile: str | None, backlog: int
) -> None:
    await reset(url)
    store = await open_store(kind, url)
    service = PubSubService(
        store,
        lambda: datetime.now(UTC),
        lambda: uuid.uuid4().hex,
        SETTINGS,
    )
    await service.start()
    owner = Actor("owner@example.org/bench")
    await service.create_node(owner, "q", {"pubsub#queue": ["1"]})
    workers = {f"w{n}@example.org/r": Actor(f"w{n}@example.org/r") for n in range(WORKERS)}
    # New queues are whitelisted: the owner makes the workers members.
    members = [(w.bare, Affiliation.MEMBER) for w in workers.values()]
    await service.set_node_affiliations(owner, "q", members)
    if backlog:
        # Waiting items before any worker comes: the long queue whose tail
        # keeps its payloads in the database (write-behind).
        await load_backlog(service, owner, backlog, window)
        if kind == "database":  # start as after a restart: every payload cold
            await service.stop()
            await store.close()
            store = await open_store(kind, url)
            service = PubSubService(
                store,
                lambda: datetime.now(UTC),
                lambda: uuid.uuid4().hex,
                SETTINGS,
            )
            await service.start()
    total = items + backlog
    done = asyncio.Event()
    acked = 0
    tasks: set[asyncio.Task[None]] = set()

    async def ack(worker: Actor, item_id: str) -> None:
        nonlocal acked
        outcome = await service.retract(worker, "q", item_id)
        acked += 1
        route(outcome.effects)
        if acked == total:
            done.set()

    def route(effects: tuple[Effect, ...]) -> None:
        for effect in effects:
            if isinstance(effect, ItemNotice):
                task = asyncio.create_task(ack(workers[effect.to], effect.items[0].item_id))
                tasks.add(task)
                task.add_done_callback(tasks.discard)

    slots = asyncio.Semaphore(window)

    async def publish(n: int) -> None:
        async with slots:
            outcome = await service.publish(owner, "q", f"i{n}", PAYLOAD, len(PAYLOAD))
            route(outcome.effects)

    profiler = cProfile.Profile() if profile else None
    wall, cpu = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    for worker in workers.values():
        outcome = await service.subscribe(
            worker, "q", worker.jid, {"pubsub#queue_requests": [str(QUEUE_REQUESTS)]}
        )
        route(outcome.effects)
    await asyncio.gather(*(publish(n) for n in range(items)))
    await done.wait()
    if profiler:
        profiler.disable()
        profiler.dump_stats(profile)  # type: ignore[arg-type]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    batcher = service._ctx.batcher
    print(
        f"store={kind} db={'sqlite' if is_sqlite(url) else 'postgresql'} items={items} "
        f"backlog={backlog} window={window}: {total / wall:,.0f} items/s, "
        f"{cpu / total * 1e6:,.0f} us CPU/item "
        f"(wall {wall:.2f}s, {batcher.batches} batches, "
        f"{batcher.operations / max(1, batcher.batches):.1f} operations/batch)"
    )
    place = getattr(store.backend, "place", None)
    if place is not None:  # SQLite: commits that left the loop (storage/commit_place.py)
        print(f"slow commits on the loop {place.slow_commits}, lock taken {place.busy_commits}")
    await service.stop()
    await store.close()


async def load_backlog(service: PubSubService, owner: Actor, count: int, window: int) -> None:
    slots = asyncio.Semaphore(window)

    async def publish(n: int) -> None:
        async with slots:
            await service.publish(owner, "q", f"b{n}", PAYLOAD, len(PAYLOAD))

    await asyncio.gather(*(publish(n) for n in range(count)))


def fill_sqlite(path: str, count: int) -> None:
    """*count* queue items in node q, written with plain sqlite3 (fast to make)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        conn.execute(
            "INSERT INTO nodes (node_id, config, creator, created_at) VALUES "
            "('q', '{\"queue\":true}', '', '2026-01-01 00:00:00.000000')"
        )
        payload = "<job xmlns='urn:example:job'>" + "x" * 171 + "</job>"
        rows = (
            (
                n,
                "q",
                uuid.UUID(int=n).hex,
                "publisher@example.org/bulk",
                payload,
                len(payload),
                f"2026-01-01 00:{n // 60_000_000 % 60:02d}:{n // 1_000_000 % 60:02d}."
                f"{n % 1_000_000:06d}",
                "s1" if n % 100 == 0 else None,
                "worker@example.org/w" if n % 100 == 0 else None,
                "2026-01-02 00:00:00.000000" if n % 100 == 0 else None,
                "2026-01-02 00:05:00.000000" if n % 100 == 0 else None,
                1 if n % 100 == 0 else 0,
            )
            for n in range(1, count + 1)
        )
        conn.executemany(
            "INSERT INTO items (seq, node_id, item_id, publisher, payload, payload_size, "
            "published_at, updated_at, locked_by, lock_jid, locked_at, lock_expires_at, "
            "available_at, deliveries, headers) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?7, ?, ?, ?, ?, NULL, ?, NULL)",
            rows,
        )
        conn.execute("COMMIT")
    finally:
        conn.close()


def rss_mib() -> float:
    """The resident set size now (Linux)."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * resource.getpagesize() / 2**20


async def measure_memory(url: str, count: int) -> None:
    from xmpp_queue.storage.store import StateStore

    await reset(url)
    await asyncio.to_thread(fill_sqlite, url.split("///", 1)[1], count)
    before = rss_mib()
    wall = time.perf_counter()
    store = await StateStore.open(url)
    wall = time.perf_counter() - wall
    grown = rss_mib() - before
    locked = store.state.locked_total
    await store.close()
    del store
    tracemalloc.start()
    store = await StateStore.open(url)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    await store.close()
    print(
        f"{count:,} items ({locked:,} locked) loaded in {wall:.1f}s; "
        f"tracemalloc: {held / count:,.0f} bytes/item ({held / 2**20:,.0f} MiB); "
        f"RSS grew {grown:,.0f} MiB during the load"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("database", "memory"), default="database")
    parser.add_argument("--url", help="database URL (default: a SQLite file in /tmp)")
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument(
        "--backlog", type=int, default=0, help="items waiting before the workers subscribe"
    )
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the run")
    parser.add_argument("--memory", type=int, metavar="N", help="measure N loaded items")
    args = parser.parse_args()
    url = args.url or f"sqlite:///{Path(tempfile.gettempdir()) / 'xq-store-microbench.db'}"
    if args.memory:
        if not is_sqlite(url):
            parser.error("--memory needs a SQLite --url")
        asyncio.run(measure_memory(url, args.memory))
        return
    asyncio.run(run_on(args.store, url, args.items, args.window, args.profile, args.backlog))


async def run_on(
    kind: str, url: str, items: int, window: int, profile: str | None, backlog: int
) -> None:
    """:func:`run` on *url* (SQLite), or on a scratch database beside it (PostgreSQL)."""
    if is_sqlite(url):
        await run(kind, url, items, window, profile, backlog)
        return
    scratch = await scratch_postgres(url)
    try:
        await run(kind, scratch, items, window, profile, backlog)
    finally:
        await drop_scratch_postgres(url, scratch)


if __name__ == "__main__":
    main()
