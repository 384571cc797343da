"""Storage contract fixtures: the one store on every backend (memory, SQLite, PostgreSQL).

The contract modules (``test_items``, ``test_nodes_affiliations_subscriptions``,
``test_queue_state``, ``test_ledger_and_transactions``) take ``store``: a
:class:`StateStore` over each backend in turn. ``sql_store`` is the same over
the SQL backends only, for what needs a database (restart, reload).

SQLite: one database file is migrated per session with the real alembic
``upgrade()`` and copied for each test (a copy of a small file is faster than
migrating again). PostgreSQL: the URL comes from ``XMPP_QUEUE_TEST_PG_URL``;
its schema is dropped and migrated once per session and the tables are
emptied before each test. Without that variable the PostgreSQL cases skip,
saying why, except under ``CI``, where a missing database is a failure.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import text

from tests.conftest import PG_ENV, missing
from xmpp_queue.core.ports import Store
from xmpp_queue.storage.store import StateStore

T = TypeVar("T")
TABLES = ("queue_events", "items", "subscriptions", "affiliations", "nodes")


def pg_url() -> str:
    """The test PostgreSQL URL; skips (or fails under CI) when it is not configured."""
    url = os.environ.get(PG_ENV)
    if url:
        return url
    missing(f"PostgreSQL not configured: set {PG_ENV}=postgresql://user@host:port/db")


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from xmpp_queue.storage.migrations import upgrade

    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def pg_migrated() -> Iterator[str]:
    from xmpp_queue.storage.migrations import upgrade

    url = pg_url()
    _reset_pg_schema(url)
    upgrade(url)
    yield url


def in_thread(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run *coroutine* on its own loop in a worker thread.

    Session and module fixtures are first requested from inside a test's
    running loop, where ``asyncio.run`` is not allowed.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _reset_pg_schema(url: str) -> None:
    """Drop everything, so the session starts from an empty database."""
    from xmpp_queue.storage.engine import make_engine

    async def reset() -> None:
        engine = make_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.execute(text("DROP SCHEMA public CASCADE"))
                await conn.execute(text("CREATE SCHEMA public"))
        finally:
            await engine.dispose()

    in_thread(reset())


async def _empty_pg(url: str) -> None:
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
    if backend == "sqlite":
        path = tmp_path / "store.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    url: str = request.getfixturevalue("pg_migrated")
    await _empty_pg(url)
    return url


SQL_BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


async def _open(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> StateStore:
    if backend == "memory":
        return StateStore.in_memory()
    return await StateStore.open(await empty_database(backend, request, tmp_path))


@pytest.fixture(params=["memory", *SQL_BACKENDS])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Every backend: the contract."""
    opened = await _open(request.param, request, tmp_path)
    yield opened
    await opened.close()


@pytest.fixture(params=SQL_BACKENDS)
async def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """The SQL backends only: what needs a database behind the store."""
    opened = await _open(request.param, request, tmp_path)
    yield opened
    await opened.close()
