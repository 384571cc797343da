"""The SQLite backend: the stdlib ``sqlite3`` connection, with one worker thread.

It runs the connection of ``engine.make_sqlite_engine`` (so the same WAL /
``synchronous=FULL`` / foreign-key pragmas as every other connection). A commit
is ``BEGIN IMMEDIATE``, a handful of ``executemany`` calls and ``COMMIT`` (the one
fsync). It runs on the event loop while commits there stay quick, else on the
worker thread, where the loop keeps parsing stanzas while the disk syncs
(``commit_place``). Loads and reads always run on the thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy.engine import Engine

from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import Item
from xmpp_queue.storage.backend import FlushFailed
from xmpp_queue.storage.commit_place import CommitPlace
from xmpp_queue.storage.engine import make_sqlite_engine
from xmpp_queue.storage.flush import Flush
from xmpp_queue.storage.load import StateBuilder
from xmpp_queue.storage.load_rows import schedule_rows, whole_item
from xmpp_queue.storage.sql_outages import sqlite_outage, translate
from xmpp_queue.storage.sql_rows import (
    ledger_event,
    sqlite_time,
    sqlite_times,
    sqlite_when,
    write_plan,
)
from xmpp_queue.storage.sql_statements import SQLITE
from xmpp_queue.storage.state import MemoryState

log = logging.getLogger("xmpp_queue.storage.store")
T = TypeVar("T")


class SqliteBackend:
    """SQLite through one connection: commits on the loop or the worker thread, reads
    on the thread (see the module docstring)."""

    keeps_payloads = True

    def __init__(self, url: str) -> None:
        self._engine: Engine = make_sqlite_engine(url)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="xmpp-queue-wb")
        self._raw: Any = None
        self._conn: sqlite3.Connection | None = None
        self._busy_ms = 0  # the connection's busy timeout, read when it opens
        self._busy_now = 0  # the one it has now: 0 after a commit on the loop
        self._handed = 0  # calls handed to the worker thread and not yet back
        self.place = CommitPlace()

    async def _run(self, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        self._handed += 1

        def patiently() -> T:  # the thread waits for a lock the loop never waits for
            if self._busy_now != self._busy_ms:
                self._connection().execute(f"PRAGMA busy_timeout = {self._busy_ms}")
                self._busy_now = self._busy_ms
            return fn()

        try:
            return await loop.run_in_executor(self._worker, patiently)
        except FlushFailed as failed:
            failed.error = translate(failed.error, sqlite_outage)
            raise
        except Exception as exc:
            raise translate(exc, sqlite_outage) from exc
        finally:
            self._handed -= 1

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._raw = self._engine.raw_connection()  # pragmas: engine.py
            conn = self._raw.driver_connection
            assert isinstance(conn, sqlite3.Connection)
            self._busy_ms = self._busy_now = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
            self._conn = conn
        return self._conn

    async def load(self) -> MemoryState:
        return await self._run(self._load)

    def _load(self) -> MemoryState:
        conn = self._connection()
        builder = StateBuilder(sqlite_when)
        conn.execute("BEGIN")  # one consistent snapshot
        try:
            builder.nodes(conn.execute(SQLITE.load_nodes))
            builder.affiliations(conn.execute(SQLITE.load_affs))
            builder.subscriptions(conn.execute(SQLITE.load_subs))
            ordered = (json.dumps(builder.ordered_nodes()),)
            builder.items(conn.execute(SQLITE.load_items, ordered))
            builder.tail(
                (node, priority, json.loads(seqs), size)
                for node, priority, seqs, size in conn.execute(SQLITE.load_tail)
            )
            builder.delayed(
                (node, priority, json.loads(seqs), size)
                for node, priority, seqs, size in conn.execute(SQLITE.load_delayed)
            )
            builder.keyed(
                (node, key, json.loads(seqs), size)
                for node, key, seqs, size in conn.execute(SQLITE.load_keyed, ordered)
            )
            builder.schedule(schedule_rows(conn.execute(SQLITE.load_schedule)))
            builder.schedule(schedule_rows(conn.execute(SQLITE.load_expiry, ordered)), expiry=True)
            builder.snapshots(conn.execute(SQLITE.load_snapshots))
            for node_id, window in builder.dedup_nodes():
                last = sqlite_when(conn.execute(SQLITE.ledger_last, (node_id,)).fetchone()[0])
                if last is not None:
                    since = sqlite_time(last - timedelta(seconds=window))
                    builder.finished(
                        node_id, conn.execute(SQLITE.ledger_finished, (node_id, since))
                    )
            floor = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'items'").fetchone()
        finally:
            conn.execute("ROLLBACK")
        if builder.orphans:
            log.warning("event=orphan_rows count=%d action=ignored", builder.orphans)
        return builder.finish(seq_floor=floor[0] if floor else 0)

    async def write(self, flush: Flush) -> None:
        """Commit *flush*: here on the loop while commits stay quick and nothing else
        is on the thread, else on the thread (``commit_place``); the same rows and
        errors either way."""
        if not self.write_now(flush):
            plan = write_plan(flush, SQLITE, sqlite_times())
            await self._run(lambda: self._write(plan))
            self.place.thread_commits += 1

    def write_now(self, flush: Flush) -> bool:
        """Commit *flush* on the loop if commits go there now (see :meth:`write`)."""
        if self._handed or not self.place.on_loop(time.monotonic()):
            return False
        try:
            return self._write_on_loop(write_plan(flush, SQLITE, sqlite_times()))
        except FlushFailed as failed:
            failed.error = translate(failed.error, sqlite_outage)
            raise
        except Exception as exc:
            raise translate(exc, sqlite_outage) from exc

    def _write_on_loop(self, plan: list[tuple[str, list[tuple[Any, ...]]]]) -> bool:
        """Commit *plan* here, on the event loop; False when the write lock was taken
        by another connection (nothing written: the thread waits for the lock)."""
        conn = self._connection()
        started = time.monotonic()
        if self._busy_now != 0:  # never wait for a lock on the loop (the thread resets it)
            conn.execute("PRAGMA busy_timeout = 0")
            self._busy_now = 0
        try:
            self._write(plan)
        except FlushFailed as failed:
            if _lock_taken(failed):
                self.place.lock_taken(time.monotonic())
                return False
            raise
        ended = time.monotonic()
        self.place.loop_commits += 1
        self.place.took(ended - started, ended)
        return True

    def _write(self, plan: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
        conn = self._connection()
        try:
            conn.execute("BEGIN IMMEDIATE")
            for sql, rows in plan:
                conn.executemany(sql, rows)
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise FlushFailed(exc, maybe_committed=False) from exc
        try:
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            # A full disk refuses the commit's pages before any is written: surely
            # not committed. Other errors (an fsync that failed) may have committed.
            full = getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
            raise FlushFailed(exc, maybe_committed=not full) from exc

    async def payloads(self, node_id: str, item_ids: list[str]) -> dict[str, str | None]:
        params = (node_id, json.dumps(item_ids))
        rows = await self._run(
            lambda: self._connection().execute(SQLITE.payloads, params).fetchall()
        )
        return dict(rows)

    async def items_by_seq(self, node_id: str, seqs: list[int]) -> list[Item]:
        params = (node_id, json.dumps(seqs))
        rows = await self._run(
            lambda: self._connection().execute(SQLITE.items_by_seq, params).fetchall()
        )
        return [whole_item(r, sqlite_when) for r in rows]

    async def tail_ids(self, node_id: str, after: int, upto: int) -> list[tuple[int, str]]:
        params = (node_id, after, upto)
        rows = await self._run(
            lambda: self._connection().execute(SQLITE.tail_ids, params).fetchall()
        )
        return [(r[0], r[1]) for r in rows]

    async def item_by_id(self, node_id: str, item_id: str) -> Item | None:
        params = (node_id, item_id)
        row = await self._run(
            lambda: self._connection().execute(SQLITE.item_by_id, params).fetchone()
        )
        return whole_item(row, sqlite_when) if row is not None else None

    async def ledger_count(self, node_id: str, kind: EventKind, since: datetime) -> int:
        params = (node_id, kind.value, sqlite_time(since.astimezone(UTC)))
        row = await self._run(lambda: self._connection().execute(SQLITE.ledger_count, params))
        return int(row.fetchone()[0])

    async def ledger_events(self, node_id: str | None) -> list[LedgerEvent]:
        def read() -> list[Any]:
            conn = self._connection()
            if node_id is None:
                return conn.execute(SQLITE.ledger_all).fetchall()
            return conn.execute(SQLITE.ledger_for_node, (node_id,)).fetchall()

        return [ledger_event(r, sqlite_when) for r in await self._run(read)]

    async def close(self) -> None:
        def shut() -> None:
            if self._raw is not None:
                self._raw.close()
                self._raw = self._conn = None
            self._engine.dispose()

        try:
            await asyncio.get_running_loop().run_in_executor(self._worker, shut)
        finally:
            self._worker.shutdown(wait=True)


def _lock_taken(failed: FlushFailed) -> bool:
    """A write that did not start: another connection held the write lock."""
    error = failed.error
    code = getattr(error, "sqlite_errorcode", None) or 0
    return (
        not failed.maybe_committed
        and isinstance(error, sqlite3.OperationalError)
        and code & 0xFF == sqlite3.SQLITE_BUSY  # SQLITE_BUSY or one of its extended codes
    )
