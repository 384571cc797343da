"""Engines: URL handling and the SQLite durability settings, on both SQLite engines."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from xmpp_queue.storage.engine import (
    make_engine,
    make_sqlite_engine,
    normalize_url,
    redacted_url,
)
from xmpp_queue.storage.sql import SqlStore

from .samples import node


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///queue.db", "sqlite+aiosqlite:///queue.db"),
        ("sqlite:////var/lib/xq/queue.db", "sqlite+aiosqlite:////var/lib/xq/queue.db"),
        ("sqlite://", "sqlite+aiosqlite://"),
        ("sqlite+aiosqlite:///q.db", "sqlite+aiosqlite:///q.db"),
        ("postgresql://u:p@db:5432/xq", "postgresql+asyncpg://u:p@db:5432/xq"),
        ("postgres://u@db/xq", "postgresql+asyncpg://u@db/xq"),
        ("postgresql+psycopg2://u@db/xq", "postgresql+asyncpg://u@db/xq"),
    ],
)
def test_normalize_url_picks_the_async_driver(url: str, expected: str) -> None:
    assert normalize_url(url) == expected


def test_normalize_url_refuses_other_databases() -> None:
    with pytest.raises(ValueError, match="mysql"):
        normalize_url("mysql://u@db/xq")


def test_redacted_url_hides_the_password() -> None:
    shown = redacted_url("postgresql://queue:s3cr%40t@db:5432/xq")
    assert "s3cr" not in shown and shown == "postgresql://queue:***@db:5432/xq"
    assert redacted_url("sqlite:///q.db") == "sqlite:///q.db"
    assert "hunter2" not in redacted_url("::not a url hunter2")


PRAGMAS = ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
EXPECTED = {"journal_mode": "wal", "synchronous": 2, "foreign_keys": 1, "busy_timeout": 5000}


async def test_the_async_sqlite_engine_is_durable(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        async with engine.connect() as conn:
            found = {p: (await conn.execute(text(f"PRAGMA {p}"))).scalar() for p in PRAGMAS}
    finally:
        await engine.dispose()
    assert found == EXPECTED


def test_the_blocking_sqlite_engine_is_durable(tmp_path: Path) -> None:
    engine = make_sqlite_engine(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        with engine.connect() as conn:
            found = {p: conn.execute(text(f"PRAGMA {p}")).scalar() for p in PRAGMAS}
    finally:
        engine.dispose()
    assert found == EXPECTED


async def test_sqlite_transactions_take_the_write_lock_at_begin(
    sqlite_template: Path, tmp_path: Path
) -> None:
    """BEGIN IMMEDIATE: while a store transaction is open, another writer cannot start."""
    path = tmp_path / "lock.db"
    shutil.copyfile(sqlite_template, path)
    store = await SqlStore.open(f"sqlite:///{path}")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        async with store.transaction() as tx:
            await tx.nodes.all()  # only a read so far, yet the lock is held
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN IMMEDIATE")  # free again once the block is left
        other.execute("ROLLBACK")
    finally:
        other.close()
        await store.close()


async def test_a_cancelled_begin_does_not_keep_the_write_lock(
    sqlite_template: Path, tmp_path: Path
) -> None:
    path = tmp_path / "cancel.db"
    shutil.copyfile(sqlite_template, path)
    store = await SqlStore.open(f"sqlite:///{path}")
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock

    async def write() -> None:
        async with store.transaction() as tx:
            await tx.nodes.add(node("never"))
            await tx.commit()

    try:
        waiting = asyncio.create_task(write())
        await asyncio.sleep(0)  # let it reach BEGIN, which now waits on busy_timeout
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        blocker.execute("ROLLBACK")
        # The abandoned BEGIN completes and its connection is closed: we can write.
        async with store.transaction() as tx:
            await tx.nodes.add(node("jobs"))
            await tx.commit()
        async with store.transaction() as tx:
            assert [n.node_id for n in await tx.nodes.all()] == ["jobs"]
    finally:
        blocker.close()
        await store.close()


async def test_sql_store_refuses_an_in_memory_sqlite_database() -> None:
    with pytest.raises(ValueError, match="in-memory"):
        await SqlStore.open("sqlite://")


def test_the_memory_store_does_not_import_sqlalchemy() -> None:
    """Unit tests import storage.memory; it must stay free of SQLAlchemy (fast start)."""
    import subprocess
    import sys

    code = (
        "import sys, xmpp_queue.storage.memory; "
        "sys.exit('sqlalchemy' in sys.modules or 'alembic' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
