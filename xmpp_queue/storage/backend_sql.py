"""The SQL backends of the store: load everything at start, write each commit's Flush.

Two backends with one face (:class:`Backend`):

- ``SqliteBackend`` runs the stdlib ``sqlite3`` connection of
  ``engine.make_sqlite_engine`` (so the same WAL / ``synchronous=FULL`` /
  foreign-key pragmas as every other connection) on one worker thread. A
  commit is ``BEGIN IMMEDIATE``, a handful of ``executemany`` calls and
  ``COMMIT`` (the one fsync), all on that thread: the event loop keeps parsing
  stanzas while the disk syncs, and sqlite3 releases the GIL while it works.
- ``PostgresBackend`` talks to asyncpg directly: its ``executemany`` runs
  a prepared statement over all rows in one pipelined round trip, and it
  encodes datetimes in C. Going through SQLAlchemy would add a bind processor
  call per value and a cursor adaptation per statement, the very per-row
  Python this store exists to avoid.

Each has a module of its own (``backend_sqlite``, ``backend_postgres``); they
share the statements (``sql_statements``: compiled once from SQLAlchemy constructs
on ``schema``, so table and column names have one source), the rows
(``sql_rows``: a commit's Flush as rows, values encoded as ``schema.UtcDateTime``
and ``codec`` would) and what counts as an outage (``sql_outages``). This module
only picks the backend for a URL.
"""

from __future__ import annotations

from xmpp_queue.storage.backend import Backend
from xmpp_queue.storage.backend_postgres import PostgresBackend
from xmpp_queue.storage.backend_sqlite import SqliteBackend
from xmpp_queue.storage.engine import is_sqlite
from xmpp_queue.storage.lease import Fence


async def open_sql_backend(url: str, fence: Fence | None = None) -> Backend:
    if is_sqlite(url):
        if fence is not None:
            raise ValueError("a leader lease needs PostgreSQL; SQLite runs one process")
        return SqliteBackend(url)
    return PostgresBackend(url, fence)
