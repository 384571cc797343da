"""Databases for the storage contract: an empty, migrated one per test on each backend.

Helpers, not fixtures: they ask the session fixtures ``sqlite_template`` and
``pg_migrated`` (tests/storage/conftest.py) through *request*.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy import text

TABLES = ("queue_events", "items", "subscriptions", "affiliations", "nodes")


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
    if backend == "sqlite":
        path = tmp_path / "store.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    url: str = request.getfixturevalue("pg_migrated")
    await empty_pg(url)
    return url


SQL_BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
