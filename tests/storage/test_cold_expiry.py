"""Waiting items with an expiry time in a backlog bounded by disk: past the budget
such an item keeps its seq (and due time, if delayed) and its expiry time in
memory, so expiry still fires; it is read back whole when it expires.

On SQLite and PostgreSQL with no memory for whole waiting items (every committed
item goes cold); the property machines' ``-cold`` backends cover the rest.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit.stores import SQL_BACKENDS, empty_database
from tests.storage.samples import T0, at, item, node
from xmpp_queue.storage.store import StateStore

# (item id, due, expires): seconds after T0 or None, in publish order.
BACKLOG = (
    ("p1", None, None),
    ("e1", None, 30),
    ("e2", None, 10),
    ("de", 20, 15),  # expires before it is due
    ("d1", 5, 40),
)


@pytest.fixture(params=SQL_BACKENDS)
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await empty_database(request.param, request, tmp_path)


async def cold_store(url: str) -> StateStore:
    store = await StateStore.open(url, backlog_bytes=0)
    async with store.transaction() as tx:
        await tx.nodes.add(node("jobs", queue=True))
        for item_id, due, expires in BACKLOG:
            await tx.items.put(
                item(
                    "jobs",
                    item_id,
                    f"<job id='{item_id}'/>",
                    available_at=None if due is None else at(due),
                    expires_at=None if expires is None else at(expires),
                )
            )
        await tx.commit()
    async with store.transaction():
        pass  # settled: the commit's items went cold
    return store


def cold_counts(store: StateStore) -> tuple[int, int, int]:
    """(whole items, cold items, cold expiry times) of node jobs."""
    ns = store.state.nodes["jobs"]
    tail = ns.queue.tail
    assert tail is not None
    return len(ns.items), len(tail), len(tail.expiry)


async def expire(store: StateStore, seconds: float) -> list[str]:
    """What the expiry timer would see at T0 + *seconds*; it drops those items."""
    async with store.transaction() as tx:
        found = await tx.items.expired_waiting(at(seconds), 10)
        assert all(i.payload == f"<job id='{i.item_id}'/>" for i in found)
        for i in found:
            assert await tx.items.remove("jobs", i.item_id)
        await tx.commit()
    return [i.item_id for i in found]


async def test_an_item_with_an_expiry_goes_cold_and_still_expires(url: str) -> None:
    store = await cold_store(url)
    try:
        assert cold_counts(store) == (0, 5, 4)
        async with store.transaction() as tx:
            assert await tx.items.next_deadline(T0) == at(5)  # d1's due time first
            assert await tx.items.expired_waiting(at(9), 10) == []
        assert await expire(store, 10) == ["e2"]
        async with store.transaction() as tx:
            assert await tx.items.due_delayed_nodes(at(10), 10) == ["jobs"]  # d1 came due
            assert await tx.items.next_deadline(at(10)) == at(15)
        assert await expire(store, 16) == ["de"]  # expired before it was ever due
        assert cold_counts(store) == (0, 3, 2)
        async with store.transaction() as tx:
            ready = await tx.items.next_ready("jobs", at(16), 5)
            assert [i.item_id for i in ready] == ["p1", "e1", "d1"]
            assert await tx.items.lock("jobs", "e1", "s1", "w@example.org/a", at(16), at(60))
            await tx.commit()
        assert await expire(store, 35) == []  # e1 is held: a worker has it
        assert await expire(store, 41) == ["d1"]
        async with store.transaction() as tx:
            assert [i.item_id for i in await tx.items.next_ready("jobs", at(41), 5)] == ["p1"]
    finally:
        await store.close()


async def test_a_restart_loads_expiry_times_not_rows(url: str) -> None:
    store = await cold_store(url)
    await store.close()
    store = await StateStore.open(url, backlog_bytes=0)
    try:
        assert cold_counts(store) == (0, 5, 4)
        async with store.transaction() as tx:
            assert await tx.items.next_deadline(T0) == at(5)
            assert (await tx.items.queue_stats("jobs")).delayed == 2
        assert await expire(store, 15) == ["e2", "de"]
        async with store.transaction() as tx:
            got = await tx.items.get("jobs", "e1")  # a read by id takes its expiry along
            assert got is not None and got.expires_at == at(30)
        assert cold_counts(store) == (2, 1, 1)  # p1 came back whole for the stats
        assert await expire(store, 45) == ["e1", "d1"]
    finally:
        await store.close()
