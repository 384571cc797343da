"""Engines: one place that turns a configured URL into a durable async engine.

Users write plain URLs (``sqlite:///queue.db``, ``postgresql://...``); the
async drivers are an implementation detail, so :func:`normalize_url` picks
them. SQLite gets the settings a queue needs:

- ``journal_mode=WAL``: readers never block the writer and a commit appends to
  the log instead of rewriting pages.
- ``synchronous=FULL``: a commit is on disk before it returns. An item is
  acknowledged to its publisher only after its commit, so we never trade this
  away; group commit (many operations per transaction) is how we stay fast.
- ``busy_timeout``: a second process (an admin CLI) waits instead of failing.
- ``foreign_keys=ON``: SQLite ignores foreign keys unless asked.
- ``BEGIN IMMEDIATE``: Python's sqlite3 begins transactions lazily and only for
  DML, so a transaction that reads then writes can fail mid-way with "database
  is locked" when another writer sneaked in. We switch the driver's own
  transaction handling off and emit BEGIN ourselves (SQLAlchemy's documented
  recipe), taking the write lock up front so writers queue on busy_timeout.
  A connection can ask for a plain deferred BEGIN with the execution option
  ``sqlite_begin="DEFERRED"`` (read-only work from another process).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry

_ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}
_BACKEND_ALIASES = {"postgres": "postgresql"}
_BEGIN_MODES = frozenset({"DEFERRED", "IMMEDIATE", "EXCLUSIVE"})

DEFAULT_BUSY_TIMEOUT_MS = 5000


def _parse(url: str | URL) -> URL:
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    backend = _BACKEND_ALIASES.get(backend, backend)
    if backend not in _ASYNC_DRIVERS:
        raise ValueError(f"unsupported database {backend!r}: use sqlite or postgresql")
    return parsed.set(drivername=_ASYNC_DRIVERS[backend])


def normalize_url(url: str | URL) -> str:
    """The URL with its async driver: ``sqlite://`` → aiosqlite, ``postgresql://`` → asyncpg.

    A URL naming another driver (``postgresql+psycopg2``) gets the async one too:
    the storage layer only runs on asyncio.
    """
    return _parse(url).render_as_string(hide_password=False)


def redacted_url(url: str | URL) -> str:
    """The URL as it may be shown in logs and admin status: password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL may still hold a secret: show nothing of it
        return "<unparsable database url>"


def is_sqlite(url: str | URL) -> bool:
    return _parse(url).get_backend_name() == "sqlite"


def make_engine(
    url: str | URL,
    *,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    foreign_keys: bool = True,
    echo: bool = False,
) -> AsyncEngine:
    """An async engine for *url* with the durability settings described above.

    ``foreign_keys=False`` is for migrations only: SQLite batch migrations copy
    and drop tables, and with foreign keys on a dropped parent table would
    cascade-delete its children.
    """
    parsed = _parse(url)
    if parsed.get_backend_name() == "sqlite":
        engine = create_async_engine(parsed, echo=echo)
        _configure_sqlite(engine.sync_engine, busy_timeout_ms, foreign_keys)
        return engine
    # pre_ping: after a PostgreSQL restart, a pooled connection is replaced
    # instead of failing the next batch.
    return create_async_engine(parsed, echo=echo, pool_pre_ping=True)


def make_sqlite_engine(
    url: str | URL, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS, echo: bool = False
) -> Engine:
    """A blocking pysqlite engine with the same settings, for the SQLite backend.

    ``check_same_thread`` is off because the backend's connection is opened on
    one thread and used on its worker thread. An in-memory database is refused:
    each engine would see its own empty one, so migrations could not reach the
    store's (use ``StateStore.in_memory()`` for a store that lives in the process).
    """
    parsed = _parse(url).set(drivername="sqlite+pysqlite")
    if parsed.database in (None, "", ":memory:") or "mode=memory" in str(parsed.query):
        raise ValueError("the SQLite backend needs a file, not an in-memory database")
    engine = create_engine(parsed, echo=echo, connect_args={"check_same_thread": False})
    _configure_sqlite(engine, busy_timeout_ms, foreign_keys=True)
    return engine


def _configure_sqlite(engine: Engine, busy_timeout_ms: int, foreign_keys: bool) -> None:
    pragmas = (
        "PRAGMA journal_mode=WAL",
        "PRAGMA synchronous=FULL",
        f"PRAGMA busy_timeout={int(busy_timeout_ms)}",
        f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}",
    )

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        # Take transaction control away from the driver (see module docstring).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            for pragma in pragmas:
                cursor.execute(pragma)
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(conn: Connection) -> None:
        mode = str(conn.get_execution_options().get("sqlite_begin", "IMMEDIATE")).upper()
        if mode not in _BEGIN_MODES:
            raise ValueError(f"sqlite_begin must be one of {sorted(_BEGIN_MODES)}")
        conn.exec_driver_sql(f"BEGIN {mode}")
