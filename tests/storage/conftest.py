"""Storage contract fixtures: the one store on every backend (memory, SQLite, PostgreSQL).

The contract modules (``test_items``, ``test_nodes_affiliations_subscriptions``,
``test_queue_state``, ``test_ledger_and_transactions``) take ``store``: a
:class:`StateStore` over each backend in turn. ``sql_store`` is the same over
the SQL backends only, for what needs a database (restart, reload).

SQLite: one database file is migrated per session with the real alembic
``upgrade()`` and copied for each test (a copy of a small file is faster than
migrating again). PostgreSQL: one database of the session's own is created on
the server ``XMPP_QUEUE_TEST_PG_URL`` names, migrated once, emptied before each
test and dropped at the end (``tests/kit/pg.py``: nothing else on that server is
touched). Without that variable the PostgreSQL cases skip, saying why, except
under ``CI``, where a missing database is a failure.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.kit import pg
from tests.kit.stores import COLD_BACKENDS, SQL_BACKENDS, empty_database, open_store
from xmpp_queue.core.ports import Store
from xmpp_queue.storage.store import StateStore


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from xmpp_queue.storage.migrations import upgrade

    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def pg_migrated() -> Iterator[str]:
    """The session's own migrated PostgreSQL database (dropped at the session's end)."""
    with pg.migrated("store") as url:
        yield url


async def _open(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> StateStore:
    if backend == "memory":
        return StateStore.in_memory()
    return await open_store(backend, await empty_database(backend, request, tmp_path))


@pytest.fixture(params=["memory", *SQL_BACKENDS, *COLD_BACKENDS])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Every backend: the contract."""
    opened = await _open(request.param, request, tmp_path)
    yield opened
    await opened.close()


@pytest.fixture(params=[*SQL_BACKENDS, *COLD_BACKENDS])
async def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """The SQL backends only: what needs a database behind the store."""
    opened = await _open(request.param, request, tmp_path)
    yield opened
    await opened.close()
