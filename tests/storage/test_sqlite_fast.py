"""SQLite's prepared-statement path agrees with SQLAlchemy's, in both directions.

The store writes and reads SQLite through ``storage/sqlite_fast.py``; migrations,
admin queries and the pipeline go through SQLAlchemy. Values written by one
must read back identically through the other.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import event, insert, select

from xmpp_queue.storage import codec, schema
from xmpp_queue.storage.sql import SqlStore

from .samples import T0, at, item, node


@pytest.fixture
async def sqlite_store(sqlite_template: Path, tmp_path: Path) -> AsyncIterator[SqlStore]:
    path = tmp_path / "fast.db"
    shutil.copyfile(sqlite_template, path)
    store = await SqlStore.open(f"sqlite:///{path}")
    yield store
    await store.close()


async def test_rows_written_by_the_store_read_the_same_through_sqlalchemy(
    sqlite_store: SqlStore,
) -> None:
    odd_zone = timezone(timedelta(hours=-3, minutes=-30))
    published = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=odd_zone)
    async with sqlite_store.transaction() as tx:
        await tx.nodes.add(node("jobs"))
        stored = await tx.items.put(
            item("jobs", "i1", published_at=published, updated_at=T0, headers={"k": "v"})
        )
        assert await tx.items.lock("jobs", "i1", "s1", "w@example.org", at(1), at(31))
        await tx.commit()
    async with sqlite_store.engine.connect() as conn:
        row = (await conn.execute(select(*codec.ITEM_COLUMNS))).one()
    seen = codec.item_from_row(row)
    assert seen.seq == stored.seq
    assert seen.published_at == published and seen.published_at.tzinfo == UTC
    assert (seen.locked_at, seen.lock_expires_at) == (at(1), at(31))
    assert dict(seen.headers) == {"k": "v"}


async def test_rows_written_through_sqlalchemy_read_the_same_through_the_store(
    sqlite_store: SqlStore,
) -> None:
    async with sqlite_store.engine.begin() as conn:
        await conn.execute(insert(schema.nodes), codec.node_values(node("jobs")))
        values = codec.item_values(item("jobs", "i1", available_at=at(0.000001)))
        await conn.execute(insert(schema.items), values)
    async with sqlite_store.transaction() as tx:
        got = await tx.items.get("jobs", "i1")
        ready = await tx.items.next_ready("jobs", at(0.000001), 5)
        early = await tx.items.next_ready("jobs", T0, 5)
    assert got is not None and got.available_at == at(0.000001)
    assert got.available_at is not None and got.available_at.tzinfo == UTC
    assert [i.item_id for i in ready] == ["i1"] and early == []  # microseconds compare


async def test_with_sqlalchemy_listeners_statements_go_through_sqlalchemy(
    sqlite_store: SqlStore,
) -> None:
    assert sqlite_store.sqlite is not None
    seen: list[str] = []

    def on_execute(*args: object) -> None:
        seen.append(str(args[2]).split()[0])

    engine = sqlite_store.sqlite.engine
    event.listen(engine, "before_cursor_execute", on_execute)
    try:
        async with sqlite_store.transaction() as tx:
            await tx.nodes.add(node("jobs"))
            await tx.items.put(item("jobs", "i1"))
            assert await tx.items.count("jobs") == 1
            await tx.commit()
    finally:
        event.remove(engine, "before_cursor_execute", on_execute)
    assert seen == ["BEGIN", "INSERT", "INSERT", "SELECT"]
