"""Contract: queue state (ready items, conditional locks, deadlines), on every store."""

from __future__ import annotations

from datetime import UTC

from xmpp_queue.core.ports import QueueStats, Store, Transaction

from .samples import T0, at, item, node

W1, W2 = "w1@example.org/a", "w2@example.org/b"


async def fill(tx: Transaction, node_id: str, count: int) -> None:
    await tx.nodes.add(node(node_id, queue=True))
    for n in range(1, count + 1):
        await tx.items.put(item(node_id, f"i{n}", published_at=at(n), updated_at=at(n)))


async def test_next_ready_gives_unlocked_available_items_in_publish_order(store: Store) -> None:
    async with store.transaction() as tx:
        await fill(tx, "jobs", 5)
        assert await tx.items.lock("jobs", "i1", "s1", W1, T0, at(30))
        assert await tx.items.lock("jobs", "i3", "s1", W1, T0, at(30))
        assert await tx.items.unlock("jobs", "i3", "s1", at(10))  # back, delayed to T0+10
        assert await tx.items.lock("jobs", "i4", "s1", W1, T0, at(30))
        assert await tx.items.unlock("jobs", "i4", "s1", at(5))  # available exactly at now
        ready = await tx.items.next_ready("jobs", at(5), 10)
        assert [i.item_id for i in ready] == ["i2", "i4", "i5"]
        assert [i.item_id for i in await tx.items.next_ready("jobs", at(5), 2)] == ["i2", "i4"]
        assert await tx.items.next_ready("jobs", at(5), 0) == []
        later = await tx.items.next_ready("jobs", at(10), 10)
        assert [i.item_id for i in later] == ["i2", "i3", "i4", "i5"]
        assert await tx.items.next_ready("other", at(5), 10) == []


async def test_lock_sets_the_holder_and_counts_a_delivery(store: Store) -> None:
    async with store.transaction() as tx:
        await fill(tx, "jobs", 1)
        assert await tx.items.lock("jobs", "i1", "s1", W1, at(1), at(31))
        await tx.commit()
    async with store.transaction() as tx:
        got = await tx.items.get("jobs", "i1")
    assert got is not None
    assert (got.locked_by, got.lock_jid, got.deliveries) == ("s1", W1, 1)
    assert got.locked_at == at(1) and got.lock_expires_at == at(31)
    assert got.available_at is None


async def test_a_second_lock_loses_even_for_the_same_subscription(store: Store) -> None:
    async with store.transaction() as tx:
        await fill(tx, "jobs", 1)
        assert await tx.items.lock("jobs", "i1", "s1", W1, at(1), at(31)) is True
        assert await tx.items.lock("jobs", "i1", "s2", W2, at(2), at(32)) is False
        assert await tx.items.lock("jobs", "i1", "s1", W1, at(2), at(32)) is False
        assert await tx.items.lock("jobs", "missing", "s1", W1, at(2), at(32)) is False
        got = await tx.items.get("jobs", "i1")
    assert got is not None
    assert (got.locked_by, got.deliveries, got.lock_expires_at) == ("s1", 1, at(31))


async def test_unlock_only_by_the_holder(store: Store) -> None:
    async with store.transaction() as tx:
        await fill(tx, "jobs", 1)
        assert await tx.items.unlock("jobs", "i1", "s1", None) is False  # not locked
        assert await tx.items.lock("jobs", "i1", "s1", W1, at(1), at(31))
        assert await tx.items.unlock("jobs", "i1", "s2", None) is False  # wrong subid
        assert await tx.items.unlock("jobs", "missing", "s1", None) is False
        assert await tx.items.unlock("jobs", "i1", "s1", at(40)) is True
        assert await tx.items.unlock("jobs", "i1", "s1", None) is False  # already released
        got = await tx.items.get("jobs", "i1")
    assert got is not None
    assert (got.locked_by, got.lock_jid, got.locked_at, got.lock_expires_at) == (None,) * 4
    assert got.available_at == at(40) and got.deliveries == 1


async def test_relock_counts_deliveries_and_clears_the_retry_delay(store: Store) -> None:
    async with store.transaction() as tx:
        await fill(tx, "jobs", 1)
        assert await tx.items.lock("jobs", "i1", "s1", W1, at(1), at(31))
        assert await tx.items.unlock("jobs", "i1", "s1", at(5))
        assert await tx.items.lock("jobs", "i1", "s2", W2, at(6), at(36))
        got = await tx.items.get("jobs", "i1")
    assert got is not None
    assert (got.locked_by, got.lock_jid, got.deliveries, got.available_at) == ("s2", W2, 2, None)


async def test_extend_only_by_the_holder(store: Store) -> None:
    async with store.transaction() as tx:
        await fill(tx, "jobs", 1)
        assert await tx.items.extend("jobs", "i1", "s1", at(99)) is False  # not locked
        assert await tx.items.lock("jobs", "i1", "s1", W1, at(1), at(31))
        assert await tx.items.extend("jobs", "i1", "s2", at(99)) is False
        assert await tx.items.extend("jobs", "i1", "s1", at(90)) is True
        got = await tx.items.get("jobs", "i1")
    assert got is not None
    assert got.lock_expires_at == at(90) and got.deliveries == 1 and got.locked_at == at(1)


async def test_in_flight_locked_by_and_locked(store: Store) -> None:
    async with store.transaction() as tx:
        await fill(tx, "jobs", 5)
        await fill(tx, "other", 1)
        for item_id, subid in (("i4", "s1"), ("i1", "s1"), ("i2", "s2")):
            assert await tx.items.lock("jobs", item_id, subid, W1, at(1), at(31))
        assert await tx.items.lock("other", "i1", "s1", W1, at(1), at(31))
        assert await tx.items.in_flight("jobs") == {"s1": 2, "s2": 1}
        assert await tx.items.in_flight("empty") == {}
        assert [i.item_id for i in await tx.items.locked_by("jobs", "s1")] == ["i1", "i4"]
        assert await tx.items.locked_by("jobs", "s9") == []
        assert [i.item_id for i in await tx.items.locked("jobs")] == ["i1", "i2", "i4"]
        assert await tx.items.count_locked() == 4


async def test_expired_locks_come_earliest_deadline_first_over_all_nodes(store: Store) -> None:
    async with store.transaction() as tx:
        await fill(tx, "a", 3)
        await fill(tx, "b", 2)
        assert await tx.items.lock("a", "i1", "s1", W1, T0, at(30))
        assert await tx.items.lock("a", "i2", "s1", W1, T0, at(10))
        assert await tx.items.lock("b", "i1", "s2", W2, T0, at(20))
        assert await tx.items.lock("b", "i2", "s2", W2, T0, at(99))
        assert await tx.items.lock("a", "i3", "s1", W1, T0, at(10))
        due = await tx.items.expired_locks(at(30), 10)
        assert [(i.node, i.item_id) for i in due] == [
            ("a", "i2"),
            ("a", "i3"),  # same deadline: publish order
            ("b", "i1"),
            ("a", "i1"),  # deadline == now is due
        ]
        assert [(i.node, i.item_id) for i in await tx.items.expired_locks(at(30), 1)] == [
            ("a", "i2")
        ]
        assert await tx.items.expired_locks(at(9), 10) == []
        assert due[0].locked_by == "s1" and due[0].lock_jid == W1


async def test_next_deadline_is_the_earliest_lock_deadline_or_retry(store: Store) -> None:
    async with store.transaction() as tx:
        assert await tx.items.next_deadline(T0) is None
        await fill(tx, "jobs", 4)
        assert await tx.items.next_deadline(T0) is None  # nothing locked or delayed
        assert await tx.items.lock("jobs", "i1", "s1", W1, T0, at(50))
        assert await tx.items.next_deadline(T0) == at(50)
        assert await tx.items.lock("jobs", "i2", "s1", W1, T0, at(40))
        assert await tx.items.unlock("jobs", "i2", "s1", at(20))  # delayed retry
        assert await tx.items.next_deadline(T0) == at(20)
        # A retry time already past is overdue until a tick takes its node: the
        # tick dispatches only the nodes the store names as due.
        assert await tx.items.next_deadline(at(25)) == at(20)
        assert await tx.items.due_delayed_nodes(at(25), 10) == ["jobs"]
        assert await tx.items.next_deadline(at(25)) == at(50)
        # A lock deadline already past still does: it is overdue.
        assert await tx.items.next_deadline(at(60)) == at(50)
        found = await tx.items.next_deadline(T0)
    assert found is not None and found.tzinfo == UTC


async def test_due_delayed_nodes_names_only_nodes_whose_delay_came(store: Store) -> None:
    async with store.transaction() as tx:
        for node in ("a", "b", "c", "idle"):
            await fill(tx, node, 3)
        for node, item_id, due in (("a", "i1", 10), ("a", "i2", 30), ("b", "i1", 20)):
            assert await tx.items.lock(node, item_id, "s1", W1, T0, at(99))
            assert await tx.items.unlock(node, item_id, "s1", at(due))
        assert await tx.items.lock("c", "i1", "s1", W1, T0, at(99))  # locked, not delayed
        assert await tx.items.due_delayed_nodes(at(5), 10) == []
        assert await tx.items.due_delayed_nodes(at(25), 10) == ["a", "b"]
        # taken: not named again until a's next delayed item comes due
        assert await tx.items.due_delayed_nodes(at(25), 10) == []
        assert await tx.items.next_deadline(at(25)) == at(30)
        # what came due is ready now (a's i2 is still held back)
        assert [i.item_id for i in await tx.items.next_ready("a", at(25), 10)] == ["i1", "i3"]
        assert await tx.items.due_delayed_nodes(at(30), 1) == ["a"]
        assert await tx.items.next_deadline(at(30)) == at(99)


async def test_queue_stats(store: Store) -> None:
    async with store.transaction() as tx:
        assert await tx.items.queue_stats("jobs") == QueueStats(0, 0, None)
        await fill(tx, "jobs", 4)
        assert await tx.items.lock("jobs", "i1", "s1", W1, T0, at(30))
        assert await tx.items.lock("jobs", "i3", "s1", W1, T0, at(30))
        stats = await tx.items.queue_stats("jobs")
    assert stats == QueueStats(backlog=2, in_flight=2, oldest_waiting=at(2))
    assert stats.oldest_waiting is not None and stats.oldest_waiting.tzinfo == UTC
