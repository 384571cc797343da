"""A lock is written in place on PostgreSQL (migration ``0012_locks_in_place``).

Locking an item changes no indexed column, so PostgreSQL writes the lock as a
heap-only tuple: the new row version beside the old one, no index entry. On the
schema before that revision (``locked_by`` in an index) every lock wrote a new
entry in each of the table's indexes. Real PostgreSQL (``XMPP_QUEUE_TEST_PG_URL``),
a database of its own: the counters read are the table's, since it was made.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import asyncpg
import pytest

from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.storage import migrations
from xmpp_queue.storage.backend_postgres import PostgresBackend
from xmpp_queue.storage.flush import Flush

from .samples import T0, item, node

pytestmark = pytest.mark.postgres

ITEMS = 20


async def _lock_every_item(url: str) -> None:
    """Publish ITEMS items in one commit, then lock each of them in the next."""
    backend = PostgresBackend(url)
    try:
        await backend.load()
        await backend.write(Flush(node_upserts=[node("jobs")]))
        published = [item("jobs", f"i{s}", seq=s) for s in range(1, ITEMS + 1)]
        events = [LedgerEvent(T0, EventKind.PUBLISHED, "jobs", i.item_id) for i in published]
        await backend.write(Flush(item_upserts=published, events=events, max_seq=ITEMS))
        locked = [
            replace(i, locked_by="s1", lock_jid="w@example.org/r", locked_at=T0, deliveries=1)
            for i in published
        ]
        await backend.write(Flush(item_upserts=locked))
    finally:
        await backend.close()  # the session's counters reach the statistics as it ends


async def _updates(url: str) -> tuple[int, int]:
    """(row updates, of them heap-only) of ``items``, once the writer's session has
    reported its counters (it does so as it exits, just after its connection closed)."""
    for _ in range(100):
        conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
        try:
            row = await conn.fetchrow(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'items'"
            )
        finally:
            await conn.close()
        assert row is not None
        if row[0] >= ITEMS:
            return int(row[0]), int(row[1])
        await asyncio.sleep(0.05)
    raise AssertionError(f"the writer's counters never arrived: {tuple(row)}")


async def test_a_lock_touches_no_index(pg_database: str) -> None:
    await migrations.upgrade_async(pg_database)
    await _lock_every_item(pg_database)
    assert await _updates(pg_database) == (ITEMS, ITEMS)


async def test_before_the_revision_no_lock_was_written_in_place(pg_database: str) -> None:
    await migrations.upgrade_async(pg_database, "0011_steady_row_types")
    await _lock_every_item(pg_database)
    assert await _updates(pg_database) == (ITEMS, 0)
