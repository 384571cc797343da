"""The PostgreSQL commit path alone: this checkout's backend against another's.

Why: through Prosody (``queue_throughput.py``) a commit is one cost among many
and a shared machine moves the figures by more than a change to the commit
path. Here both backends (``PostgresBackend`` of this checkout and of
``--compare-src``, loaded side by side in one process) write the same shape of
steady-state commits, each to a scratch database of its own (migrated by this
checkout), interleaved round by round, with a lease (every commit checks the
fence, as a deployment's does). Printed: the medians over the rounds of this
process's CPU, the server session's CPU and the wall time per commit, and the
write-ahead log written per new item.

    git archive <commit> | tar -x -C /tmp/base
    python bench/pg_commit_path.py --compare-src /tmp/base --per 5 --rounds 10

``--compare-revision REV`` compares schemas instead: this checkout's backend on
two scratch databases, one migrated to head, the other only to REV (an index
dropped or changed), each with its own session, interleaved the same way.
``--alter SQL`` runs SQL on that other database once it is migrated: a schema
change tried before a migration is written for it
(``--compare-revision head --alter "DROP INDEX ..."``).

A commit of ``--per`` N holds N new items, up to N locked ones (a delivery) and
N deletes (acks), with a ledger row for each: the shape of a batch of about N
operations at steady state.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from processes import cpu_seconds, drop_postgres_db, recreate_postgres_db, scratch_db_name

from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import Item
from xmpp_queue.storage.backend_postgres import PostgresBackend
from xmpp_queue.storage.flush import Flush
from xmpp_queue.storage.lease import Fence
from xmpp_queue.storage.migrations import upgrade

LEASE = "bench-lease"


class Commits:
    """Steady-state commits of one node: publish, lock (deliver), delete (ack)."""

    def __init__(self, node: str, first_seq: int, per: int) -> None:
        self.node, self.seq, self.per = node, first_seq, per
        self.waiting: list[Item] = []
        self.locked: list[Item] = []

    def next(self, now: datetime) -> Flush:
        upserts: list[Item] = []
        events: list[LedgerEvent] = []
        deletes: list[tuple[str, str]] = []
        for _ in range(self.per):
            self.seq += 1
            item = Item(self.node, f"i{self.seq}", self.seq, "pub@example.org/p",
                        "<job>" + "x" * 100 + "</job>", now, now, 110)  # fmt: skip
            upserts.append(item)
            self.waiting.append(item)
            events.append(LedgerEvent(now, EventKind.PUBLISHED, self.node, item.item_id))
        while len(self.waiting) > 3 * self.per and len(upserts) < 2 * self.per:
            item = replace(self.waiting.pop(0), locked_by="s1", lock_jid="w@example.org/r",
                           locked_at=now, lock_expires_at=now + timedelta(seconds=30),
                           deliveries=1)  # fmt: skip
            upserts.append(item)
            self.locked.append(item)
            events.append(LedgerEvent(now, EventKind.DELIVERED, self.node, item.item_id))
        while len(self.locked) > self.per and len(deletes) < self.per:
            item = self.locked.pop(0)
            deletes.append((self.node, item.item_id))
            events.append(LedgerEvent(now, EventKind.ACKED, self.node, item.item_id))
        return Flush(item_deletes=deletes, item_upserts=upserts, events=events, max_seq=self.seq)


# Modules of the compared checkout that its backend imports its commit statements
# from: loaded from there, under their own names, while its backend module loads.
_ITS_OWN = ("pg_steady",)


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def backend_of(src: Path) -> Any:
    """``PostgresBackend`` of the checkout *src* (its module and its statements, on
    this one's package otherwise)."""
    storage = src / "xmpp_queue" / "storage"
    saved = {n: sys.modules.get(f"xmpp_queue.storage.{n}") for n in _ITS_OWN}
    try:
        for n in _ITS_OWN:
            sys.modules[f"xmpp_queue.storage.{n}"] = _load(storage / f"{n}.py", f"compared_{n}")
        return _load(storage / "backend_postgres.py", "compared_backend_postgres").PostgresBackend
    finally:
        for n, module in saved.items():
            if module is None:
                sys.modules.pop(f"xmpp_queue.storage.{n}", None)
            else:
                sys.modules[f"xmpp_queue.storage.{n}"] = module


async def run(
    url: str, compare: Path | None, per: int, rounds: int, commits: int, other_url: str
) -> None:
    for target in {url, other_url}:
        conn = await asyncpg.connect(target)
        await conn.execute(
            "INSERT INTO nodes VALUES ('a', '{}', 'x', now()), ('b', '{}', 'x', now())"
        )
        await conn.execute(
            f"INSERT INTO leader_leases (name, holder, token) VALUES ('{LEASE}', 'b', 1)"
        )
        await conn.close()
    fence = Fence(LEASE, 1)
    compared = PostgresBackend if compare is None else backend_of(compare)
    backends = {"this": PostgresBackend(url, fence), "compared": compared(other_url, fence)}
    shapes = {"this": Commits("a", 10**9, per), "compared": Commits("a", 10**9, per)}
    sessions = {}
    for name, backend in backends.items():
        await backend.load()
        backend._seq_reserved = 3 * 10**9  # the sequence moves are not what is compared
        sessions[name] = (await backend._connection()).get_server_pid()
    spent: dict[str, list[tuple[float, ...]]] = {name: [] for name in backends}
    now = datetime.now(UTC)
    # The write-ahead log the commits wrote (one log for the whole server: the sides
    # take turns, so each block's growth is its own, give or take a background write).
    lsn = await asyncpg.connect(url)
    wal_at = "SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn"
    for r in range(rounds):
        for name in ("this", "compared") if r % 2 == 0 else ("compared", "this"):
            flushes = [shapes[name].next(now) for _ in range(commits)]
            wal = await lsn.fetchval(wal_at)
            own, server, wall = (
                time.process_time(),
                cpu_seconds(sessions[name]),
                time.perf_counter(),
            )
            for flush in flushes:
                await backends[name].write(flush)
            spent[name].append(
                (
                    (time.process_time() - own) * 1e6 / commits,
                    (cpu_seconds(sessions[name]) - server) * 1e6 / commits,
                    (time.perf_counter() - wall) * 1e6 / commits,
                    float(await lsn.fetchval(wal_at) - wal) / (commits * per),
                )
            )
    await lsn.close()
    for name, figures in spent.items():
        client, server, wall, log = (statistics.median(f[i] for f in figures) for i in range(4))
        print(
            f"{name:8} per={per}: client {client:5.0f} µs/commit, PostgreSQL session "
            f"{server:5.0f} µs/commit, wall {wall:6.0f} µs/commit, log {log:5.0f} bytes/item "
            f"(medians of {rounds} rounds)"
        )
    for backend in backends.values():
        await backend.close()


async def _alter(url: str, sql: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--compare-src", type=Path, help="another checkout")
    which.add_argument(
        "--compare-revision", help="this backend on a database migrated only to this revision"
    )
    p.add_argument("--alter", help="SQL run on the --compare-revision database after migrating")
    p.add_argument("--per", type=int, default=5, help="operations per commit")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--commits", type=int, default=300, help="commits per round and backend")
    args = p.parse_args()
    name = scratch_db_name("xq_commit_path")
    # A scratch database each: in a shared one, the side whose keys sort last (its
    # node id, its seqs) appends at the right end of every index and the other
    # inserts in the middle, a fifth less server CPU at --per 20 for the same code.
    names = [name, f"{name}_other"]
    for n in names:
        recreate_postgres_db(n)
    try:
        urls = [f"postgresql://postgres@127.0.0.1:5432/{n}" for n in names]
        upgrade(urls[0])
        upgrade(urls[1], args.compare_revision or "head")
        if args.alter:
            asyncio.run(_alter(urls[1], args.alter))
        asyncio.run(run(urls[0], args.compare_src, args.per, args.rounds, args.commits, urls[-1]))
    finally:
        for n in names:
            drop_postgres_db(n)


if __name__ == "__main__":
    main()
