"""Contract: the event ledger and transaction boundaries.

Rollback is promised by the SQL stores only (``sql_store``); the memory twin
applies writes at once by design (see ``storage/memory.py``).
"""

from __future__ import annotations

import asyncio
from datetime import UTC

import pytest

from xmpp_queue.core.errors import StorageUnavailable
from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import Affiliation, NodeConfig
from xmpp_queue.core.ports import Store

from .samples import T0, at, item, node, sub


def event(kind: EventKind, item_id: str, seconds: float, node_id: str = "jobs") -> LedgerEvent:
    return LedgerEvent(at(seconds), kind, node_id, item_id, "w@example.org/a", 1, 6)


async def test_ledger_rows_are_readable_in_the_same_transaction_and_after_commit(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        tx.ledger.append(event(EventKind.PUBLISHED, "i1", 0))
        tx.ledger.append(event(EventKind.DELIVERED, "i1", 1))
        # A read flushes what append() buffered.
        assert [e.kind for e in await tx.ledger.events()] == [
            EventKind.PUBLISHED,
            EventKind.DELIVERED,
        ]
        tx.ledger.append(event(EventKind.ACKED, "i1", 2))
        tx.ledger.append(event(EventKind.PUBLISHED, "x1", 3, node_id="other"))
        await tx.commit()
    async with store.transaction() as tx:
        events = await tx.ledger.events()
        jobs = await tx.ledger.events("jobs")
    assert [(e.node, e.item_id, e.kind) for e in events] == [
        ("jobs", "i1", EventKind.PUBLISHED),
        ("jobs", "i1", EventKind.DELIVERED),
        ("jobs", "i1", EventKind.ACKED),
        ("other", "x1", EventKind.PUBLISHED),
    ]
    assert [e.kind for e in jobs] == [EventKind.PUBLISHED, EventKind.DELIVERED, EventKind.ACKED]
    assert events[1] == event(EventKind.DELIVERED, "i1", 1)
    assert events[1].at.tzinfo == UTC


async def test_ledger_event_without_subscriber_round_trips(store: Store) -> None:
    purged = LedgerEvent(T0, EventKind.PURGED, "jobs", "i1")
    async with store.transaction() as tx:
        tx.ledger.append(purged)
        await tx.commit()
    async with store.transaction() as tx:
        assert await tx.ledger.events() == [purged]


async def test_ledger_details_round_trip(store: Store) -> None:
    """A published row's attributes (JSON text) and a failure's reason come back
    as written, unicode and all; rows without them come back with None."""
    published = LedgerEvent(
        at(0), EventKind.PUBLISHED, "jobs", "i1", None, 0, 6, '{"tenant":"ÅB","ordering-key":"k"}'
    )
    unlocked = LedgerEvent(
        at(1), EventKind.UNLOCKED, "jobs", "i1", "w@example.org/a", 1, 6, None, "db down: ✗"
    )
    dead = LedgerEvent(
        at(2), EventKind.DEAD_LETTERED, "jobs", "i1", None, 1, 6, None, "max-deliveries"
    )
    plain = event(EventKind.DELIVERED, "i2", 3)
    async with store.transaction() as tx:
        for e in (published, unlocked, dead, plain):
            tx.ledger.append(e)
        await tx.commit()
    async with store.transaction() as tx:
        assert await tx.ledger.events("jobs") == [published, unlocked, dead, plain]
    assert (plain.attributes, plain.reason) == (None, None)


async def test_ledger_count_by_node_kind_and_time(store: Store) -> None:
    async with store.transaction() as tx:
        for n in range(5):
            tx.ledger.append(event(EventKind.DELIVERED, f"i{n}", n))
        tx.ledger.append(event(EventKind.EXPIRED, "i0", 9))
        tx.ledger.append(event(EventKind.DELIVERED, "x", 9, node_id="other"))
        assert await tx.ledger.count("jobs", EventKind.DELIVERED, at(2)) == 3  # at >= since
        assert await tx.ledger.count("jobs", EventKind.EXPIRED, T0) == 1
        assert await tx.ledger.count("other", EventKind.DELIVERED, T0) == 1
        assert await tx.ledger.count("jobs", EventKind.ACKED, T0) == 0


async def test_committed_writes_are_visible_to_the_next_transaction(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.nodes.add(node("jobs"))
        await tx.items.put(item("jobs", "i1"))
        await tx.commit()
    async with store.transaction() as tx:
        assert await tx.items.count("jobs") == 1


async def test_a_concurrent_lock_race_has_exactly_one_winner(store: Store) -> None:
    """Two transactions try to lock the same item; the later one sees False."""
    async with store.transaction() as tx:
        await tx.nodes.add(node("jobs", queue=True))
        await tx.items.put(item("jobs", "i1"))
        await tx.commit()
    second_started = asyncio.Event()

    async def second() -> bool:
        second_started.set()
        async with store.transaction() as tx:
            won = await tx.items.lock("jobs", "i1", "s2", "b@example.org", T0, at(30))
            await tx.commit()
            return won

    async with store.transaction() as tx:
        assert await tx.items.lock("jobs", "i1", "s1", "a@example.org", T0, at(30))
        racer = asyncio.create_task(second())
        await second_started.wait()
        await tx.commit()
    assert await asyncio.wait_for(racer, timeout=30) is False
    async with store.transaction() as tx:
        got = await tx.items.get("jobs", "i1")
    assert got is not None and (got.locked_by, got.deliveries) == ("s1", 1)


# --- SQL stores only ------------------------------------------------------------------------


async def test_leaving_without_commit_rolls_everything_back(sql_store: Store) -> None:
    async with sql_store.transaction() as tx:
        await tx.nodes.add(node("kept"))
        await tx.items.put(item("kept", "i1"))
        await tx.commit()
    async with sql_store.transaction() as tx:
        await tx.nodes.add(node("jobs"))
        await tx.items.put(item("jobs", "i1"))
        await tx.subscriptions.add(sub("jobs", "a@example.org", "s1"))
        await tx.affiliations.set("jobs", "a@example.org", Affiliation.OWNER)
        assert await tx.items.lock("kept", "i1", "s1", "a@example.org", T0, at(30))
        tx.ledger.append(event(EventKind.PUBLISHED, "i1", 0))
        assert len(await tx.ledger.events()) == 1  # flushed into the transaction
        tx.ledger.append(event(EventKind.DELIVERED, "i1", 1))  # still buffered
    async with sql_store.transaction() as tx:
        assert [n.node_id for n in await tx.nodes.all()] == ["kept"]
        assert await tx.items.count_all() == 1
        assert await tx.subscriptions.count() == 0
        assert await tx.ledger.events() == []
        kept = await tx.items.get("kept", "i1")
    assert kept is not None and kept.locked_by is None and kept.deliveries == 0


async def test_an_exception_rolls_back_and_propagates(sql_store: Store) -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        async with sql_store.transaction() as tx:
            await tx.nodes.add(node("jobs"))
            raise Boom
    async with sql_store.transaction() as tx:
        assert await tx.nodes.all() == []


async def test_unbuffered_ledger_rows_are_written_at_commit(sql_store: Store) -> None:
    async with sql_store.transaction() as tx:
        for n in range(50):
            tx.ledger.append(event(EventKind.PUBLISHED, f"i{n}", n))
        await tx.commit()
    async with sql_store.transaction() as tx:
        events = await tx.ledger.events()
    assert [e.item_id for e in events] == [f"i{n}" for n in range(50)]


async def test_an_unreachable_database_is_storage_unavailable(tmp_path: object) -> None:
    from xmpp_queue.storage.store import StateStore

    missing_dir = f"sqlite:///{tmp_path}/no/such/dir/queue.db"
    for url in (missing_dir, "postgresql://postgres@127.0.0.1:1/none"):
        with pytest.raises(StorageUnavailable):
            await StateStore.open(url)


async def test_reads_after_writes_in_one_transaction_see_the_writes(store: Store) -> None:
    """Every write shows in the next read of the same transaction."""
    async with store.transaction() as tx:
        assert await tx.nodes.get("jobs") is None
        await tx.nodes.add(node("jobs", queue=True))
        got = await tx.nodes.get("jobs")
        assert got is not None and got.config.queue
        await tx.nodes.update_config("jobs", NodeConfig(title="t", queue=True))
        got = await tx.nodes.get("jobs")
        assert got is not None and got.config.title == "t"

        assert await tx.affiliations.get("jobs", "a@example.org") is Affiliation.NONE
        await tx.affiliations.set("jobs", "a@example.org", Affiliation.PUBLISHER)
        assert await tx.affiliations.get("jobs", "a@example.org") is Affiliation.PUBLISHER

        assert await tx.subscriptions.for_node("jobs") == []
        await tx.subscriptions.add(sub("jobs", "a@example.org", "s1", queue_requests=2))
        subs = await tx.subscriptions.for_node("jobs")
        assert [s.subid for s in subs] == ["s1"]
        subs.clear()  # a caller mutating the list must not change the store's view
        assert len(await tx.subscriptions.for_node("jobs")) == 1
        await tx.subscriptions.remove("jobs", "s1")
        assert await tx.subscriptions.for_node("jobs") == []

        for n in range(3):
            await tx.items.put(item("jobs", f"i{n}"))
        assert await tx.items.in_flight("jobs") == {}
        assert await tx.items.lock("jobs", "i0", "s1", "a@example.org", T0, at(30))
        assert await tx.items.lock("jobs", "i1", "s1", "a@example.org", T0, at(30))
        loads = await tx.items.in_flight("jobs")
        assert loads == {"s1": 2}
        loads["s1"] = 99  # the returned dict is the caller's
        assert await tx.items.unlock("jobs", "i0", "s1", None)
        assert await tx.items.in_flight("jobs") == {"s1": 1}
        assert await tx.items.remove("jobs", "i1")  # an ack of a locked item
        assert await tx.items.in_flight("jobs") == {}
        assert await tx.items.lock("jobs", "i2", "s2", "b@example.org", T0, at(30))
        await tx.items.remove_all("jobs")
        assert await tx.items.in_flight("jobs") == {}

        await tx.nodes.remove("jobs")
        assert await tx.nodes.get("jobs") is None
        assert await tx.affiliations.get("jobs", "a@example.org") is Affiliation.NONE
        await tx.nodes.add(node("jobs"))
        assert await tx.subscriptions.for_node("jobs") == []
        assert await tx.items.in_flight("jobs") == {}
