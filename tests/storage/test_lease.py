"""The leader lease on PostgreSQL, and the one-process guard of SQLite.

Real PostgreSQL (``XMPP_QUEUE_TEST_PG_URL``); each test uses its own lease name,
so tests never see each other's rows.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from pathlib import Path

import pytest

from tests.kit.stores import empty_database
from xmpp_queue.core.errors import NotActive
from xmpp_queue.storage.file_lock import DatabaseInUse, DatabaseLock
from xmpp_queue.storage.lease import LeaseLost, PostgresLease, lease_status
from xmpp_queue.storage.store import StateStore

from .samples import item, node


@pytest.fixture
async def pg(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await empty_database("postgresql", request, tmp_path)


def _name() -> str:
    return f"queue-{uuid.uuid4().hex[:8]}.example.org"


async def test_one_holder_at_a_time_and_a_standby_waits(pg: str) -> None:
    name = _name()
    a, b = PostgresLease(pg, name, holder="a:1"), PostgresLease(pg, name, holder="b:2")
    try:
        assert await a.try_acquire() == 1
        assert await b.try_acquire() is None
        status = await lease_status(pg, name)
        assert status.holder == "a:1" and status.token == 1
        assert [(m.holder, m.role) for m in status.members] == [
            ("a:1", "active"),
            ("b:2", "standby"),
        ]
    finally:
        await a.close()
        await b.close()


async def test_a_dead_holder_is_replaced_at_once_with_a_new_token(pg: str) -> None:
    """The holder's database session is gone (process killed): no need to wait a term."""
    name = _name()
    a = PostgresLease(pg, name, holder="a:1", ttl=60)
    b = PostgresLease(pg, name, holder="b:2", ttl=60, poll=0.05)
    try:
        assert await a.try_acquire() == 1
        a._drop_connection()  # as a SIGKILL would: the session ends without a word
        stop = asyncio.Event()
        token = await asyncio.wait_for(b.acquire(stop), 5)
        assert token == 2
    finally:
        await b.close()


async def test_a_hung_holder_is_replaced_after_its_term_and_cannot_renew(pg: str) -> None:
    name = _name()
    a = PostgresLease(pg, name, holder="a:1", ttl=2)
    b = PostgresLease(pg, name, holder="b:2", ttl=2, poll=0.1)
    try:
        assert await a.try_acquire() == 1
        assert await b.try_acquire() is None  # alive and within its term
        token = await asyncio.wait_for(b.acquire(asyncio.Event()), 6)  # a never renews
        assert token == 2
        with pytest.raises(LeaseLost):
            await a.renew()
    finally:
        await a.close()
        await b.close()


async def test_keep_gives_up_when_renewals_cannot_be_confirmed(pg: str) -> None:
    name = _name()
    a = PostgresLease(pg, name, holder="a:1", ttl=2)
    assert await a.try_acquire() == 1
    a._dsn = "postgresql://postgres@127.0.0.1:1/none"  # the database becomes unreachable
    a._drop_connection()
    started = asyncio.get_running_loop().time()
    with pytest.raises(LeaseLost):
        await asyncio.wait_for(a.keep(), 10)
    assert asyncio.get_running_loop().time() - started <= 2.5  # within its term
    await a.close()


async def test_a_fenced_commit_fails_and_leaves_memory_as_it_was(pg: str) -> None:
    """The old holder's store cannot commit once another process took the lease."""
    name = _name()
    a, b = PostgresLease(pg, name, holder="a:1"), PostgresLease(pg, name, holder="b:2")
    store = None
    try:
        await a.try_acquire()
        store = await StateStore.open(pg, a.fence)
        async with store.transaction() as tx:
            await tx.nodes.add(node("jobs"))
            await tx.commit()  # ours: committed
        await a.release()  # as if its term ran out while it was paused
        assert await b.try_acquire() == 2
        with pytest.raises(NotActive):
            async with store.transaction() as tx:
                await tx.items.put(item("jobs", "late"))
                await tx.commit()
        async with store.transaction() as tx:
            assert await tx.items.count("jobs") == 0
        fresh = await StateStore.open(pg, b.fence)  # what the new holder loads
        try:
            async with fresh.transaction() as tx:
                assert [n.node_id for n in await tx.nodes.all()] == ["jobs"]
                assert await tx.items.count("jobs") == 0
        finally:
            await fresh.close()
    finally:
        if store is not None:
            await store.close()
        await a.close()
        await b.close()


async def test_a_clean_release_lets_a_standby_in_at_once(pg: str) -> None:
    name = _name()
    a = PostgresLease(pg, name, holder="a:1", ttl=60)
    b = PostgresLease(pg, name, holder="b:2", ttl=60)
    try:
        assert await a.try_acquire() == 1
        await a.release()
        assert await b.try_acquire() == 2
    finally:
        await a.close()
        await b.close()


def test_a_second_process_on_a_sqlite_file_is_refused_naming_the_holder(
    sqlite_template: Path, tmp_path: Path
) -> None:
    path = tmp_path / "queue.db"
    shutil.copyfile(sqlite_template, path)
    url = f"sqlite:///{path}"
    first = DatabaseLock(url)
    first.acquire()
    try:
        with pytest.raises(DatabaseInUse) as refused:
            DatabaseLock(url).acquire()
        assert str(refused.value.path) == str(path)
        assert refused.value.holder.split(" since ")[0].endswith(f":{os.getpid()}")
    finally:
        first.release()
    again = DatabaseLock(url)
    again.acquire()  # free once the holder let go (or exited)
    again.release()


async def test_a_holder_frozen_in_the_middle_of_a_commit_does_not_block_a_takeover(
    pg: str,
) -> None:
    """The commit's fencing check holds the lease row until the transaction ends; the
    server ends a transaction left idle (the process froze) within half a term."""
    from xmpp_queue.storage.lease import FENCE_CHECK

    name = _name()
    a = PostgresLease(pg, name, holder="a:1", ttl=2)
    b = PostgresLease(pg, name, holder="b:2", ttl=2, poll=0.1)
    store = None
    try:
        await a.try_acquire()
        store = await StateStore.open(pg, a.fence)
        conn = await store.backend._connection()  # type: ignore[attr-defined]
        frozen = conn.transaction()
        await frozen.start()
        await conn.execute(FENCE_CHECK, name, a.fence.token)  # holds the row, then "freezes"
        token = await asyncio.wait_for(b.acquire(asyncio.Event()), 8)
        assert token == 2
    finally:
        if store is not None:
            await store.close()
        await a.close()
        await b.close()
