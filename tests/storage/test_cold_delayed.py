"""Delayed waiting items in a backlog bounded by disk (``storage/tail.py``,
``storage/schedule.py``): past the budget a committed delayed item keeps only
its seq and due time in memory, and every path still answers as with whole items.

Each test runs on SQLite and PostgreSQL with no memory for whole waiting items
(``backlog_bytes=0``), so every committed item goes cold; the property machines
(``-cold`` backends) cover the same paths at random.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit.stores import SQL_BACKENDS, empty_database
from tests.storage.samples import T0, at, item, node
from xmpp_queue.core.model import PageRequest
from xmpp_queue.storage.ready import HEAP_SLACK
from xmpp_queue.storage.store import StateStore

HIGH, MEDIUM, LOW = 2, 1, 0
# (item id, due in seconds after T0 or None, priority), in publish order.
BACKLOG = (
    ("p1", None, MEDIUM),
    ("d1", 20, MEDIUM),
    ("d2", 10, HIGH),
    ("p2", None, MEDIUM),
    ("d3", 10, MEDIUM),
    ("d4", 30, LOW),
)
DELAYED = [b for b in BACKLOG if b[1] is not None]


@pytest.fixture(params=SQL_BACKENDS)
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await empty_database(request.param, request, tmp_path)


async def cold_store(
    url: str, backlog: tuple[tuple[str, int | None, int], ...] = BACKLOG
) -> StateStore:
    store = await StateStore.open(url, backlog_bytes=0)
    async with store.transaction() as tx:
        await tx.nodes.add(node("jobs", queue=True))
        for item_id, due, priority in backlog:
            await tx.items.put(
                item(
                    "jobs",
                    item_id,
                    f"<job id='{item_id}'/>",
                    available_at=None if due is None else at(due),
                    priority=priority,
                )
            )
        await tx.commit()
    async with store.transaction():
        pass  # the commit settled: its items went cold between transactions
    return store


def shape(store: StateStore) -> tuple[int, int, int]:
    """(whole items, cold ready, cold delayed) of node jobs."""
    ns = store.state.nodes["jobs"]
    tail = ns.queue.tail
    if tail is None:
        return len(ns.items), 0, 0
    return len(ns.items), len(tail) - tail.delayed_count(), tail.delayed_count()


async def ids_ready(store: StateStore, now_seconds: float, limit: int = 10) -> list[str]:
    async with store.transaction() as tx:
        return [i.item_id for i in await tx.items.next_ready("jobs", at(now_seconds), limit)]


async def test_a_delayed_item_keeps_its_seq_and_due_time_only(url: str) -> None:
    store = await cold_store(url)
    try:
        assert shape(store) == (0, 2, 4)
        q = store.state.nodes["jobs"].queue
        assert q.tail is not None and len(q.tail.due) == 4 and q.delayed_live == 0
        async with store.transaction() as tx:
            stats = await tx.items.queue_stats("jobs")
            assert (stats.backlog, stats.delayed, stats.in_flight) == (6, 4, 0)
            assert stats.oldest_waiting == T0
            # The timer is driven by the earliest cold due time, not by polling.
            assert await tx.items.next_deadline(T0) == at(10)
    finally:
        await store.close()


async def test_dispatch_hands_delayed_items_out_when_due_in_dispatch_order(url: str) -> None:
    store = await cold_store(url)
    try:
        assert await ids_ready(store, 5) == ["p1", "p2"]  # nothing delayed is due yet
        assert shape(store)[2] == 4
        async with store.transaction() as tx:
            assert await tx.items.due_delayed_nodes(at(9), 10) == []
            assert await tx.items.due_delayed_nodes(at(10), 10) == ["jobs"]
            assert await tx.items.next_deadline(at(10)) == at(20)
        assert shape(store)[2] == 2  # d2 and d3 came due: cold ready now, not read yet
        # High first, then publish order within a level (d3 was published after p2).
        assert await ids_ready(store, 10) == ["d2", "p1", "p2", "d3"]
        assert await ids_ready(store, 40) == ["d2", "p1", "d1", "p2", "d3", "d4"]
        async with store.transaction() as tx:
            ready = await tx.items.next_ready("jobs", at(40), 10)
            assert [i.payload for i in ready][:2] == ["<job id='d2'/>", "<job id='p1'/>"]
            assert ready[1].available_at is None and ready[0].available_at == at(10)
            assert await tx.items.lock("jobs", "d2", "s1", "w@example.org/a", at(40), at(70))
            await tx.commit()
        async with store.transaction() as tx:
            stats = await tx.items.queue_stats("jobs")
            assert (stats.backlog, stats.in_flight, stats.delayed) == (5, 1, 0)
    finally:
        await store.close()


async def test_a_read_by_id_brings_a_delayed_item_back_still_delayed(url: str) -> None:
    store = await cold_store(url)
    try:
        async with store.transaction() as tx:
            got = await tx.items.get("jobs", "d1")
            assert got is not None and got.payload == "<job id='d1'/>"
            assert got.available_at == at(20)
        assert shape(store) == (1, 2, 3)
        assert await ids_ready(store, 15) == ["d2", "p1", "p2", "d3"]  # d1 is not due yet
        assert await ids_ready(store, 20) == ["d2", "p1", "d1", "p2", "d3"]
        async with store.transaction() as tx:  # a cold item that came due, read by id
            assert await tx.items.due_delayed_nodes(at(31), 10) == ["jobs"]
            got = await tx.items.get("jobs", "d4")
            assert got is not None and got.payload == "<job id='d4'/>"
        assert await ids_ready(store, 31) == ["d2", "p1", "d1", "p2", "d3", "d4"]
    finally:
        await store.close()


async def test_paging_and_counts_see_cold_delayed_items_in_publish_order(url: str) -> None:
    store = await cold_store(url)
    order = [b[0] for b in BACKLOG]
    try:
        async with store.transaction() as tx:
            every = await tx.items.page("jobs", PageRequest())
            assert [i.item_id for i in every.items] == order and every.count == 6
            assert [i.payload for i in every.items] == [f"<job id='{x}'/>" for x in order]
            page = await tx.items.page("jobs", PageRequest(max=2, after="d2"))
            assert [i.item_id for i in page.items] == ["p2", "d3"] and page.first_index == 3
            last = await tx.items.page("jobs", PageRequest(max=2, before=""))
            assert [i.item_id for i in last.items] == ["d3", "d4"]
            assert [i.item_id for i in await tx.items.latest("jobs", 3)] == ["p2", "d3", "d4"]
            assert await tx.items.count("jobs") == 6
        assert shape(store) == (0, 2, 4)  # pages read rows without keeping them
    finally:
        await store.close()


async def test_a_publisher_retracts_a_cold_delayed_item(url: str) -> None:
    store = await cold_store(url)
    try:
        async with store.transaction() as tx:
            assert await tx.items.remove("jobs", "d2")
            assert not await tx.items.remove("jobs", "d2")
            await tx.commit()
        async with store.transaction() as tx:
            assert await tx.items.next_deadline(T0) == at(10)  # d3 still due then
            assert await tx.items.remove("jobs", "d3")
            await tx.commit()
        async with store.transaction() as tx:
            # The node stays filed under 10 until then (a wake-up with nothing due,
            # as for whole items); its next time is d1's.
            assert await tx.items.due_delayed_nodes(at(10), 10) == ["jobs"]
            assert await tx.items.next_deadline(at(10)) == at(20)
            assert (await tx.items.queue_stats("jobs")).delayed == 2
        assert await ids_ready(store, 15) == ["p1", "p2"]
        assert await ids_ready(store, 40) == ["p1", "d1", "p2", "d4"]
    finally:
        await store.close()


async def test_a_purge_takes_cold_delayed_items_and_their_due_times(url: str) -> None:
    store = await cold_store(url)
    try:
        async with store.transaction() as tx:
            removed = await tx.items.remove_all("jobs")
            assert sorted(i.item_id for i in removed) == sorted(b[0] for b in BACKLOG)
            await tx.commit()
        async with store.transaction() as tx:
            assert await tx.items.count("jobs") == 0
            assert await tx.items.next_deadline(T0) is None
            assert await tx.items.due_delayed_nodes(at(100), 10) == []
    finally:
        await store.close()


async def test_a_cold_delayed_item_moves_to_another_node_whole(url: str) -> None:
    """A redrive's and a dead letter's path: the item leaves its node for another."""
    store = await cold_store(url)
    try:
        async with store.transaction() as tx:
            await tx.nodes.add(node("other", queue=True))
            moved = await tx.items.move("jobs", "d4", "other", "d4", {}, at(1))
            assert moved.payload == "<job id='d4'/>" and moved.available_at is None
            await tx.commit()
        async with store.transaction() as tx:
            assert await tx.items.get("jobs", "d4") is None
            assert [i.item_id for i in await tx.items.next_ready("other", at(1), 5)] == ["d4"]
            assert (await tx.items.queue_stats("jobs")).delayed == 3
    finally:
        await store.close()


async def test_overflow_takes_the_oldest_whatever_its_due_time(url: str) -> None:
    store = await cold_store(url, (("d0", 50, MEDIUM), *BACKLOG))
    try:
        async with store.transaction() as tx:
            oldest = await tx.items.oldest_waiting("jobs", 2)
            assert [i.item_id for i in oldest] == ["d0", "p1"]
            assert await tx.items.oldest_ids("jobs", 3) == ["d0", "p1", "d1"]
    finally:
        await store.close()


async def test_a_restart_loads_delayed_items_as_due_times(url: str) -> None:
    store = await cold_store(url)
    async with store.transaction() as tx:  # one comes due, one is nacked for later
        assert await tx.items.lock("jobs", "p1", "s1", "w@example.org/a", T0, at(60))
        assert await tx.items.unlock("jobs", "p1", "s1", at(25))
        await tx.commit()
    await store.close()
    store = await StateStore.open(url, backlog_bytes=0)
    try:
        assert shape(store) == (0, 1, 5)  # p1 is delayed now
        async with store.transaction() as tx:
            assert await tx.items.next_deadline(T0) == at(10)
            stats = await tx.items.queue_stats("jobs")
            assert (stats.backlog, stats.delayed) == (6, 5)
            assert stats.oldest_waiting == T0
        assert await ids_ready(store, 10) == ["d2", "p2", "d3"]
        assert await ids_ready(store, 30) == ["d2", "p1", "d1", "p2", "d3", "d4"]
        await store.id_filters_filled()
        async with store.transaction() as tx:  # the loaded ids are known: d1 found by id
            got = await tx.items.get("jobs", "d1")
            assert got is not None and got.available_at == at(20)
            assert await tx.items.get("jobs", "new") is None
    finally:
        await store.close()


async def test_a_deep_scheduled_backlog_keeps_no_object_per_item(url: str) -> None:
    """1,000 delayed items with due times in random order: no whole item, no entry
    in the node's heap of whole delayed items, every due time in the index."""
    spread = [(f"d{n}", (n * 7919) % 1000 + 1, MEDIUM) for n in range(1000)]
    store = await cold_store(url, tuple(spread))
    try:
        q = store.state.nodes["jobs"].queue
        assert shape(store) == (0, 0, 1000) and len(q.delayed) <= HEAP_SLACK
        assert q.tail is not None and q.tail.earliest_due() is not None
        assert [d for d, _ in q.tail.due.pairs()] == sorted(d for d, _ in q.tail.due.pairs())
        assert await ids_ready(store, 1.5, 3) == ["d0"]  # due at 1 (7919 * 0 % 1000 + 1)
        due_by_3 = {f"d{n}" for n in range(1000) if (n * 7919) % 1000 + 1 <= 3}
        assert set(await ids_ready(store, 3, 10)) == due_by_3
    finally:
        await store.close()


async def test_a_roomy_store_keeps_delayed_items_whole(url: str) -> None:
    store = await StateStore.open(url)
    try:
        async with store.transaction() as tx:
            await tx.nodes.add(node("jobs", queue=True))
            await tx.items.put(item("jobs", "d1", available_at=at(10)))
            await tx.commit()
        async with store.transaction():
            pass
        assert shape(store) == (1, 0, 0)
    finally:
        await store.close()
