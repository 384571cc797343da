"""Engines: URL handling and the SQLite durability settings, on both SQLite engines."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from xmpp_queue.storage.engine import (
    make_engine,
    make_sqlite_engine,
    normalize_url,
    redacted_url,
)
from xmpp_queue.storage.store import StateStore


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


async def test_the_store_refuses_an_in_memory_sqlite_database() -> None:
    with pytest.raises(ValueError, match="in-memory"):
        await StateStore.open("sqlite://")


def test_the_store_without_a_database_does_not_import_sqlalchemy() -> None:
    """Unit tests run the store on its memory backend; that stays free of SQLAlchemy
    (fast start)."""
    import subprocess
    import sys

    code = (
        "import sys, xmpp_queue.storage.store as s; s.StateStore.in_memory(); "
        "sys.exit('sqlalchemy' in sys.modules or 'alembic' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
