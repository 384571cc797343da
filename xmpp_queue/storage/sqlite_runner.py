"""SQLite transactions without a thread hop per statement.

Why not aiosqlite for the store: it runs every DBAPI call (cursor, execute,
fetch, close) on its own thread and waits for the answer, four or five hops per
statement. Measured on the store's hot path that made each statement several
times dearer than the statement itself, and a publish takes five or more. A
SQLite statement on an indexed row is a few microseconds of C, cheaper than
one hop, so here statements run directly on the event loop's thread (and,
prepared once, on the raw cursor: see ``sqlite_fast.py``).

What can block for long runs on one worker thread instead:

- ``BEGIN IMMEDIATE``, which waits up to ``busy_timeout`` when another process
  holds the write lock;
- ``COMMIT``, which fsyncs (``synchronous=FULL``) and may checkpoint the WAL;
- closing the connection (a rollback when the block was left without commit).

Once BEGIN IMMEDIATE returned, this connection holds the write lock, and in WAL
mode readers never block it, so statements inside the transaction do not wait
for locks. Transactions of one store are serialised by an asyncio lock (SQLite
has one writer anyway): a second transaction waits on the loop, not on the
worker thread that the first one needs to commit.

The aiosqlite engine (``engine.make_engine``) remains what migrations use.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import Executable
from sqlalchemy.engine import Connection, CursorResult, Dialect, Engine

from xmpp_queue.storage.errors import translated_errors
from xmpp_queue.storage.sqlite_fast import FastResult, FastStatements


class BlockingSqliteConnection:
    """The async face SqlTransaction expects, over a blocking pysqlite connection.

    Statements go through :class:`FastStatements` on the raw sqlite3 cursor,
    or through SQLAlchemy when that cannot prepare them or when SQLAlchemy's
    cursor events have listeners.
    """

    def __init__(
        self, conn: Connection, worker: ThreadPoolExecutor, statements: FastStatements
    ) -> None:
        self._conn = conn
        self._worker = worker
        self._statements = statements
        raw = conn.connection.dbapi_connection
        assert isinstance(raw, sqlite3.Connection), "SqliteRunner needs the pysqlite driver"
        self._cursor: sqlite3.Cursor = raw.cursor()
        self.dialect: Dialect = conn.dialect
        # Someone watches SQLAlchemy's statements (echo, a tracer, a statement
        # counter in bench/): let them all go through SQLAlchemy so it sees them.
        self._watched: bool = bool(
            conn.engine.echo
            or conn.dispatch.before_cursor_execute
            or conn.dispatch.after_cursor_execute
        )

    async def execute(
        self,
        statement: Executable,
        params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    ) -> FastResult | CursorResult[*tuple[Any, ...]]:
        if not self._watched:
            result = self._statements.execute(self._cursor, statement, params)
            if result is not None:
                return result
        return self._conn.execute(statement, params)

    async def commit(self) -> None:
        loop = asyncio.get_running_loop()
        with translated_errors():
            await loop.run_in_executor(self._worker, self._conn.commit)


class SqliteRunner:
    """Hands out SQLite transactions: one at a time, slow steps on a worker thread."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="xmpp-queue-sqlite")
        self._turn = asyncio.Lock()
        self.statements = FastStatements(engine.dialect)

    def _begin(self) -> Connection:
        conn = self.engine.connect()
        try:
            conn.begin()  # BEGIN IMMEDIATE (engine.make_sqlite_engine's begin hook)
        except BaseException:
            conn.close()
            raise
        return conn

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[BlockingSqliteConnection]:
        loop = asyncio.get_running_loop()
        async with self._turn:
            opened: list[Connection] = []

            def begin() -> Connection:
                opened.append(self._begin())
                return opened[-1]

            begun = loop.run_in_executor(self._worker, begin)
            try:
                with translated_errors():
                    conn = await asyncio.shield(begun)
            except asyncio.CancelledError:
                # The BEGIN still finishes on the worker. Queue the close right
                # behind it, before any later transaction's BEGIN (those wait
                # for _turn), or the write lock would be held for good.
                self._worker.submit(_close_all, opened)
                raise
            try:
                yield BlockingSqliteConnection(conn, self._worker, self.statements)
            finally:
                # Rolls back what was not committed and returns the connection.
                with translated_errors():
                    await loop.run_in_executor(self._worker, conn.close)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._worker, self.engine.dispose)
        self._worker.shutdown(wait=True)


def _close_all(connections: list[Connection]) -> None:
    for conn in connections:
        conn.close()
