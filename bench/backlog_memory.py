"""A deep backlog: memory per waiting item, and a restart to the first hand-out.

N waiting items (one queue node, 130-byte payloads, 32-character ids; with
``--headers`` each item also carries its own two-entry header map) are written
straight into a fresh database (SQLite with plain sqlite3, PostgreSQL with
COPY), then a StateStore is opened on it, as the component does at start, and
the first item is handed out (``next_ready`` and a lock, committed). Printed:

- **open to first hand-out**: the load plus the first dispatch's read and
  commit, wall clock (what a restart costs before workers get work again);
- **bytes per waiting item** held by the store after the load and the
  background read of the cold items' ids into their id filter (tracemalloc, a
  second open in the same process): beyond the payload cache, since the load
  keeps no waiting item whole;
- the growth of the resident set during the first open.

``--delayed`` gives every item a ``Start`` in the future (``available_at``),
scattered over the N milliseconds after the hand-out and not in publish order:
a scheduled-delivery backlog; only the newest item is due at the hand-out.

``--expiring`` gives every item an expiry time as well (30 days after the
hand-out), with or without ``--delayed``.

``--keys N`` spreads the items over N ordering keys (item *n* under key
``k{n % N}``) on a ``pubsub#queue_ordered`` queue: each key's head is what
dispatch offers, the members behind it wait cold (``storage/ordered.py``).

``--published`` measures the other way in: N items published through the store
(commits of 1,000) with ``backlog_bytes=0``, and the memory they hold once cold
(their seqs and the id filter, ``storage/id_filter.py``).

    python bench/backlog_memory.py --items 1000000
    python bench/backlog_memory.py --items 1000000 --url postgresql://postgres@127.0.0.1/postgres
    python bench/backlog_memory.py --items 1000000 --keys 1000
    PYTHONPATH=/path/to/older/checkout python bench/backlog_memory.py --items 300000

The last form measures another checkout's store with the same data (the script
uses only ``StateStore.open`` and the item repository). SQLite: ``--url`` names
a scratch file, deleted first (default: one in /tmp). PostgreSQL: ``--url``
names the server; the run creates a database of its own and drops it at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import time
import tracemalloc
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from store_microbench import drop_scratch_postgres, reset, rss_mib, scratch_postgres

from xmpp_queue.storage.engine import is_sqlite

PAYLOAD = "<job xmlns='urn:example:job'>" + "x" * 100 + "</job>"  # 130 bytes
T0 = datetime(2026, 1, 1, tzinfo=UTC)
COLUMNS = (
    "seq",
    "node_id",
    "item_id",
    "publisher",
    "payload",
    "payload_size",
    "published_at",
    "updated_at",
    "deliveries",
    "headers",
    "priority",
)


HAND_OUT_AT = T0 + timedelta(days=1)  # "now" of the first hand-out


def due_at(n: int, count: int) -> datetime:
    """``--delayed``: item *n*'s Start, scattered over the *count* milliseconds from
    the hand-out on (not in publish order, as scheduled times are); only the last
    item published is due at the first hand-out (7919 is prime: n * 7919 % count
    is 0 for n = count alone)."""
    return HAND_OUT_AT + timedelta(milliseconds=(n * 7919) % count)


EXPIRING = {"on": False}  # --expiring: every item also expires, long after the hand-out
KEYS = {"n": 0}  # --keys: items spread over this many ordering keys (0: none)
EXPIRES_AT = HAND_OUT_AT + timedelta(days=30)


def columns(delayed: bool) -> tuple[str, ...]:
    names = (*COLUMNS, "available_at") if delayed else COLUMNS
    names = (*names, "expires_at") if EXPIRING["on"] else names
    return (*names, "ordering_key") if KEYS["n"] else names


def key_of(n: int) -> str | None:
    """``--keys``: item *n*'s ordering key."""
    return f"k{n % KEYS['n']}" if KEYS["n"] else None


def keys_label() -> str:
    return f" keys={KEYS['n']:,}" if KEYS["n"] else ""


def node_config() -> str:
    """The queue node's stored config (ordered with ``--keys``)."""
    return '{"queue":true,"queue_ordered":true}' if KEYS["n"] else '{"queue":true}'


def rows(count: int, headers: bool, delayed: bool = False) -> Any:
    for n in range(1, count + 1):
        at = T0 + timedelta(microseconds=n)
        shim = json.dumps({"Trace": f"t-{n}", "Tenant": f"tenant-{n % 1000}"}) if headers else None
        row: tuple[Any, ...] = (
            n,
            "q",
            uuid.UUID(int=n).hex,
            "pub@example.org/bulk",
            PAYLOAD,
            len(PAYLOAD),
            at,
            at,
            0,
            shim,
            1,
        )
        row = (*row, due_at(n, count)) if delayed else row
        row = (*row, EXPIRES_AT) if EXPIRING["on"] else row
        yield (*row, key_of(n)) if KEYS["n"] else row


def fill_sqlite(path: str, count: int, headers: bool, delayed: bool) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        conn.execute(
            "INSERT INTO nodes (node_id, config, creator, created_at) VALUES "
            "('q', ?, '', '2026-01-01 00:00:00.000000')",
            (node_config(),),
        )
        text_rows = (
            tuple(
                v.isoformat(" ", "microseconds")[:26] if isinstance(v, datetime) else v for v in r
            )
            for r in rows(count, headers, delayed)
        )
        names = columns(delayed)
        marks = ", ".join("?" * len(names))
        conn.executemany(f"INSERT INTO items ({', '.join(names)}) VALUES ({marks})", text_rows)
        conn.execute("COMMIT")
    finally:
        conn.close()


async def fill_postgres(url: str, count: int, headers: bool, delayed: bool) -> None:
    import asyncpg
    from sqlalchemy.engine import make_url

    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "INSERT INTO nodes (node_id, config, creator, created_at) VALUES ('q', $1, '', $2)",
            node_config(),
            T0,
        )
        await conn.copy_records_to_table(
            "items", records=rows(count, headers, delayed), columns=columns(delayed)
        )
        await conn.execute("SELECT setval(pg_get_serial_sequence('items', 'seq'), $1)", count + 1)
        await conn.execute("ANALYZE items")
    finally:
        await conn.close()


async def first_hand_out(url: str) -> tuple[float, float, float, Any]:
    """(seconds to open, to open and hand out the first item, to the end of the
    background read of the cold ids; the store)."""
    from xmpp_queue.storage.store import StateStore

    started = time.perf_counter()
    store = await StateStore.open(url)
    opened = time.perf_counter() - started
    async with store.transaction() as tx:
        head = await tx.items.next_ready("q", HAND_OUT_AT, 1)
        assert head and head[0].payload == PAYLOAD, head
        assert await tx.items.lock(
            "q", head[0].item_id, "s1", "w@example.org/r", T0, T0 + timedelta(days=2)
        )
        await tx.commit()
    first = time.perf_counter() - started
    if hasattr(store, "id_filters_filled"):  # this store reads the cold ids in the background
        await store.id_filters_filled()
    return opened, first, time.perf_counter() - started, store


async def measure(
    url: str, count: int, headers: bool, delayed: bool, traced_fill: bool = True
) -> None:
    fill_started = time.perf_counter()
    await reset(url)
    if is_sqlite(url):
        await asyncio.to_thread(fill_sqlite, url.split("///", 1)[1], count, headers, delayed)
    else:
        await fill_postgres(url, count, headers, delayed)
    filled = time.perf_counter() - fill_started
    before = rss_mib()
    opened, first, filled_ids, store = await first_hand_out(url)
    grown = rss_mib() - before
    await store.close()
    del store
    tracemalloc.start()
    from xmpp_queue.storage.store import StateStore

    store = await StateStore.open(url)
    if traced_fill and hasattr(store, "id_filters_filled"):
        await store.id_filters_filled()
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    async with store.transaction() as tx:
        backlog = await tx.items.count("q")
    await store.close()
    db = "sqlite" if is_sqlite(url) else "postgresql"
    print(
        f"{db} items={count:,} headers={'own' if headers else 'none'}"
        f"{' delayed' if delayed else ''}{' expiring' if EXPIRING['on'] else ''}"
        f"{keys_label()}"
        f" (filled in {filled:.0f}s): "
        f"open {opened:.2f}s, open to first hand-out {first:.2f}s; "
        f"tracemalloc {held / count:,.1f} bytes/waiting item ({held / 2**20:,.1f} MiB); "
        f"RSS grew {grown:,.0f} MiB; backlog counted {backlog:,}; "
        f"cold ids read into the id filter {filled_ids:.1f}s after the open began"
        f"{'' if traced_fill else ' (bytes/item before that read)'}"
    )


async def measure_published(url: str, count: int, headers: bool, delayed: bool) -> None:
    """Items published through the store (commits of 1,000), with no memory for
    whole waiting items: what each costs in memory once it went cold."""
    from xmpp_queue.core.model import Node, NodeConfig, new_item
    from xmpp_queue.storage.store import StateStore

    await reset(url)
    store = await StateStore.open(url, backlog_bytes=0)
    async with store.transaction() as tx:
        config = NodeConfig(queue=True, queue_ordered=bool(KEYS["n"]))
        await tx.nodes.add(Node("q", config, T0, ""))
        await tx.commit()
    shim = {"Trace": "t", "Tenant": "tenant"} if headers else {}
    tracemalloc.start()
    started = time.perf_counter()
    for first in range(0, count, 1000):
        async with store.transaction() as tx:
            for n in range(first, min(count, first + 1000)):
                at = T0 + timedelta(microseconds=n)
                item_id = uuid.UUID(int=n).hex
                await tx.items.put(
                    new_item(
                        "q",
                        item_id,
                        "pub@example.org/bulk",
                        PAYLOAD,
                        len(PAYLOAD),
                        shim,
                        at,
                        available_at=due_at(n + 1, count) if delayed else None,
                        expires_at=EXPIRES_AT if EXPIRING["on"] else None,
                        ordering_key=key_of(n + 1),
                    )
                )
            await tx.commit()
    wall = time.perf_counter() - started
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    async with store.transaction() as tx:
        backlog = await tx.items.count("q")
    await store.close()
    db = "sqlite" if is_sqlite(url) else "postgresql"
    print(
        f"{db} published={count:,}{' delayed' if delayed else ''}"
        f"{' expiring' if EXPIRING['on'] else ''}"
        f"{keys_label()} through the store, "
        f"backlog_bytes=0 ({wall:.0f}s): "
        f"tracemalloc {held / count:,.1f} bytes/waiting item; backlog counted {backlog:,}"
    )


async def main_async(
    url: str, count: int, headers: bool, published: bool, traced_fill: bool, delayed: bool
) -> None:
    async def run(target: str) -> None:
        if published:
            await measure_published(target, count, headers, delayed)
        else:
            await measure(target, count, headers, delayed, traced_fill)

    if is_sqlite(url):
        await run(url)
        return
    scratch = await scratch_postgres(url)
    try:
        await run(scratch)
    finally:
        await drop_scratch_postgres(url, scratch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--url", help="database URL (default: a SQLite file in /tmp)")
    parser.add_argument("--headers", action="store_true", help="each item its own header map")
    parser.add_argument(
        "--published",
        action="store_true",
        help="publish through the store (budget 0) instead of loading a filled database",
    )
    parser.add_argument(
        "--memory-before-fill",
        action="store_true",
        help="read tracemalloc before the id filter is filled (its read is slow under it)",
    )
    parser.add_argument(
        "--delayed",
        action="store_true",
        help="every item's Start in the future (a scheduled backlog; one due at the hand-out)",
    )
    parser.add_argument(
        "--expiring", action="store_true", help="every item also has an expiry time (30 days on)"
    )
    parser.add_argument(
        "--keys",
        type=int,
        default=0,
        help="spread the items over N ordering keys on an ordered queue (0: no keys)",
    )
    args = parser.parse_args()
    EXPIRING["on"] = args.expiring
    KEYS["n"] = args.keys
    url = args.url or f"sqlite:///{Path('/tmp') / 'xq-backlog-memory.db'}"
    asyncio.run(
        main_async(
            url,
            args.items,
            args.headers,
            args.published,
            not args.memory_before_fill,
            args.delayed,
        )
    )


if __name__ == "__main__":
    main()
