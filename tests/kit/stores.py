"""Databases for the storage contract: an empty, migrated one per test on each backend.

Helpers, not fixtures: they ask the session fixtures ``sqlite_template`` and
``pg_migrated`` (tests/storage/conftest.py) through *request*.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from sqlalchemy import text

from xmpp_queue.storage.backlog import DEFAULT_BUDGET
from xmpp_queue.storage.store import StateStore

TABLES = (
    "queue_events",
    "items",
    "subscriptions",
    "affiliations",
    "nodes",
    "node_placement",
    "commit_marks",
)


async def empty_pg(url: str) -> None:
    """Delete every row of the session's own database (never one it did not create)."""
    from xmpp_queue.storage.engine import make_engine

    engine = make_engine(url)
    try:
        # DELETE, not TRUNCATE: on a handful of rows it is far cheaper (TRUNCATE
        # swaps files); no test depends on the values of seq or ids, only their order.
        async with engine.begin() as conn:
            for table in TABLES:
                await conn.execute(text(f"DELETE FROM {table}"))
    finally:
        await engine.dispose()


async def empty_database(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty, migrated database of *backend* for one test."""
    if database_kind(backend) == "sqlite":
        path = tmp_path / "store.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    url: str = request.getfixturevalue("pg_migrated")
    await empty_pg(url)
    return url


SQL_BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]

COLD_BACKENDS = ["sqlite-cold", pytest.param("postgresql-cold", marks=pytest.mark.postgres)]
"""The SQL backends with no memory for whole waiting items (``backlog_bytes=0``):
every plain waiting item a commit writes goes cold, so every read meets cold items."""

PROPERTY_BACKENDS = [
    "sqlite",
    "sqlite-cold",
    pytest.param("postgresql-cold", marks=pytest.mark.postgres),
]
"""Where the property machines run besides memory. PostgreSQL runs once, with every
waiting item cold: its commits write the same rows as with whole items, its loads read
the locked and finished items whole and the rest as seqs, and the whole items' own logic
runs in memory and on SQLite (the store tests restart PostgreSQL stores with whole items
too). A second PostgreSQL run cost the suite some 25 s for nothing those do not cover."""


def database_kind(backend: str) -> str:
    """``sqlite`` or ``postgresql`` for a backend name of the lists above."""
    return backend.removesuffix("-cold")


def backlog_bytes(backend: str) -> int:
    """The store's memory for whole waiting items on *backend* (0: all go cold)."""
    return 0 if backend.endswith("-cold") else DEFAULT_BUDGET


async def open_store(backend: str, url: str) -> StateStore:
    return await StateStore.open(url, backlog_bytes=backlog_bytes(backend))


StoreOpener = Callable[[], Awaitable[StateStore]]


def example_openers(
    backend: str, request: pytest.FixtureRequest
) -> tuple[StoreOpener, StoreOpener]:
    """(open, reopen) for a property test on *backend*: each example opens an empty
    migrated database (a copy of the SQLite template, or the emptied PostgreSQL one),
    and a restart reopens the same database."""
    if database_kind(backend) == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        workdir = Path(tempfile.mkdtemp(prefix="xq-properties-"))
        request.addfinalizer(lambda: shutil.rmtree(workdir, ignore_errors=True))
        counter = itertools.count()
        current: list[str] = []

        async def open_db() -> StateStore:
            path = workdir / f"example-{next(counter)}.db"
            shutil.copyfile(template, path)
            current[:] = [f"sqlite:///{path}"]
            return await open_store(backend, current[0])

        async def reopen_db() -> StateStore:
            return await open_store(backend, current[0])

        return open_db, reopen_db

    url: str = request.getfixturevalue("pg_migrated")

    async def open_pg() -> StateStore:
        await empty_pg(url)
        return await open_store(backend, url)

    async def reopen_pg() -> StateStore:
        return await open_store(backend, url)

    return open_pg, reopen_pg
