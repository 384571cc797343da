"""The storage contract suite, run on WriteBehindStore (SQLite and PostgreSQL).

How: the contract tests are plain functions that take a ``store`` (or
``sql_store``) fixture. This module imports every such test from the contract
modules into its own namespace, where pytest collects them again, and defines
``store``/``sql_store`` fixtures of its own, which override the conftest ones
for the tests collected here. So the suite runs unchanged, its modules and
``conftest.py`` stay untouched, and a test added to a contract module later is
picked up here without an edit. Tests that build their own store (no fixture)
are not re-run.

The ``sql_store`` tests (rollback) run too: the write-behind store promises
rollback like the SQL stores do.
"""

from __future__ import annotations

import inspect
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import pytest
from sqlalchemy import text

from xmpp_queue.core.ports import Store

from . import (
    test_items,
    test_ledger_and_transactions,
    test_nodes_affiliations_subscriptions,
    test_queue_state,
)
from .conftest import SQL_BACKENDS, TABLES

CONTRACT_MODULES: tuple[ModuleType, ...] = (
    test_items,
    test_ledger_and_transactions,
    test_nodes_affiliations_subscriptions,
    test_queue_state,
)
STORE_FIXTURES = frozenset({"store", "sql_store"})


def _contract_tests() -> dict[str, object]:
    found: dict[str, object] = {}
    for module in CONTRACT_MODULES:
        for name, value in vars(module).items():
            if not name.startswith("test_") or not inspect.iscoroutinefunction(value):
                continue
            if STORE_FIXTURES & set(inspect.signature(value).parameters):
                found[name] = value
    return found


globals().update(_contract_tests())


async def _empty_pg(url: str) -> None:
    from xmpp_queue.storage.engine import make_engine

    engine = make_engine(url)
    try:
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


async def _open_write_behind(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    from xmpp_queue.storage.write_behind import WriteBehindStore

    return await WriteBehindStore.open(await empty_database(backend, request, tmp_path))


@pytest.fixture(params=SQL_BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = await _open_write_behind(request.param, request, tmp_path)
    yield opened
    await opened.close()


@pytest.fixture(params=SQL_BACKENDS)
async def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = await _open_write_behind(request.param, request, tmp_path)
    yield opened
    await opened.close()
