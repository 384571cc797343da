"""StateStore beyond the contract: rollback, failed commits, restart,
rows shared with the SQL store, index upkeep, and a SIGKILL in a busy run.

The contract suite (``conftest.py``) runs on this store over every backend.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import os
import signal
import sqlite3
import sys
import threading
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.kit.stores import SQL_BACKENDS, empty_database
from xmpp_queue.core.effects import ItemNotice
from xmpp_queue.core.errors import StorageUnavailable
from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import (
    Actor,
    Affiliation,
    Item,
    NodeConfig,
    PageRequest,
    SubscriptionState,
)
from xmpp_queue.core.ports import Store
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.storage import items_queue, state
from xmpp_queue.storage.backend import FlushFailed
from xmpp_queue.storage.backend_sqlite import SqliteBackend
from xmpp_queue.storage.commit_place import CommitPlace
from xmpp_queue.storage.item_values import COLD, EMPTY_HEADERS, stored_item
from xmpp_queue.storage.node_state import NodeState
from xmpp_queue.storage.state import MemoryState
from xmpp_queue.storage.store import StateStore

from .samples import T0, at, item, node, sub

REPO = Path(__file__).resolve().parents[2]
W1, W2 = "w1@example.org/a", "w2@example.org/b"
LATER = at(10**6)


@pytest.fixture(params=SQL_BACKENDS)
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await empty_database(request.param, request, tmp_path)


@pytest.fixture
async def sqlite_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await empty_database("sqlite", request, tmp_path)


@pytest.fixture
async def wb(url: str) -> AsyncIterator[StateStore]:
    store = await StateStore.open(url)
    yield store
    await store.close()


# --- helpers ---------------------------------------------------------------------------


async def view(store: Store) -> dict[str, Any]:
    """Everything a store answers, through the ports only (any store)."""
    async with store.transaction() as tx:
        out: dict[str, Any] = {"nodes": await tx.nodes.all()}
        out["deadline"] = await tx.items.next_deadline(T0)
        out["expired"] = await tx.items.expired_locks(LATER, 10**6)
        out["count_locked"] = await tx.items.count_locked()
        out["count_all"] = await tx.items.count_all()
        out["sub_count"] = await tx.subscriptions.count()
        out["w1"] = await tx.subscriptions.for_jid(W1)
        out["account"] = await tx.subscriptions.for_account("w2@example.org")
        out["aff_w1"] = await tx.affiliations.for_jid(W1)
        out["ledger"] = await tx.ledger.events()
        for n in out["nodes"]:
            nid = n.node_id
            out[nid] = {
                "items": (await tx.items.page(nid, PageRequest())).items,
                "subs": await tx.subscriptions.for_node(nid),
                "affs": await tx.affiliations.for_node(nid),
                "loads": await tx.items.in_flight(nid),
                "ready": [i.item_id for i in await tx.items.next_ready(nid, T0, 10**6)],
                "locked": await tx.items.locked(nid),
                "stats": await tx.items.queue_stats(nid),
                "latest": await tx.items.latest(nid, 2),
            }
        await tx.commit()
    return out


def check_indexes(state: MemoryState) -> None:
    """The queue indexes agree with the items they index."""
    total = 0
    for ns in state.nodes.values():
        q = ns.queue
        locked = [i for i in ns.items.values() if i.locked_by is not None]
        assert set(q.locked) == {i.item_id for i in locked}
        assert q.loads == dict(collections.Counter(i.locked_by for i in locked))
        ready = q.ready.members()
        for seq, item_id in ready.items():
            found = ns.items[item_id]
            assert found.seq == seq and found.locked_by is None
        live_delayed = {
            (e[1], e[2])
            for e in q.delayed
            if (i := ns.items.get(e[2])) is not None
            and i.seq == e[1]
            and i.locked_by is None
            and i.available_at == e[0]
            and i.seq not in ready
        }
        for i in ns.items.values():
            if i.locked_by is None and i.seq not in ready:
                assert i.available_at is not None and (i.seq, i.item_id) in live_delayed
        assert q.delayed_live == len(live_delayed)
        total += len(locked)
        for i in locked:
            if i.lock_expires_at is not None:
                entry = (i.lock_expires_at, i.seq, i.node, i.item_id)
                assert entry in state.lock_heap
    assert state.locked_total == total


async def seed(store: Store) -> None:
    """A committed state with something of every kind."""
    async with store.transaction() as tx:
        await tx.nodes.add(node("jobs", queue=True))
        await tx.nodes.add(node("mail", max_items=10))
        await tx.nodes.add(node("gone"))
        await tx.affiliations.set("jobs", "owner@example.org", Affiliation.OWNER)
        await tx.affiliations.set("mail", W1, Affiliation.PUBLISHER)
        await tx.affiliations.set("gone", W1, Affiliation.MEMBER)
        await tx.subscriptions.add(sub("jobs", W1, "s1", queue_requests=2))
        await tx.subscriptions.add(sub("jobs", W2, "s2", queue_requests=2))
        await tx.subscriptions.add(sub("mail", W1, "s3"))
        await tx.subscriptions.add(sub("gone", W2, "s4"))
        for n in range(1, 7):
            await tx.items.put(item("jobs", f"i{n}", published_at=at(n), updated_at=at(n)))
        await tx.items.put(
            item("jobs", "h", published_at=at(7), headers={"origin-node": "x", "reason": "r"})
        )
        for n in range(1, 3):
            await tx.items.put(item("mail", f"m{n}"))
        await tx.items.put(item("gone", "g1"))
        assert await tx.items.lock("jobs", "i1", "s1", W1, at(1), at(30))
        assert await tx.items.lock("jobs", "i2", "s2", W2, at(1), at(40))
        assert await tx.items.lock("jobs", "i3", "s1", W1, at(1), at(50))
        assert await tx.items.unlock("jobs", "i3", "s1", at(20))  # delayed retry
        tx.ledger.append(LedgerEvent(at(1), EventKind.PUBLISHED, "jobs", "i1", None, 0, 6))
        await tx.commit()


async def churn(store: Store) -> None:
    """Change every kind of key, node-level changes included (no commit)."""
    async with store.transaction() as tx:
        await touch_everything(tx)


def later(node_id: str, item_id: str) -> Item:
    """An item published after the seeded ones (publish order is publish-time order)."""
    return item(node_id, item_id, published_at=at(100), updated_at=at(100))


async def touch_everything(tx: Any) -> None:
    await tx.items.put(later("jobs", "i7"))
    assert await tx.items.lock("jobs", "i4", "s1", W1, at(2), at(60))
    assert await tx.items.unlock("jobs", "i1", "s1", at(5))
    assert await tx.items.extend("jobs", "i2", "s2", at(90))
    assert await tx.items.remove("jobs", "i5")
    await tx.items.replace_payload("jobs", "i6", "<new/>", 6, W2, at(7))
    assert await tx.items.remove("jobs", "i3")
    await tx.items.put(later("jobs", "i3"))  # the same id again: a new seq
    await tx.items.put(later("jobs", "i8"))
    assert await tx.items.remove("jobs", "i8")  # born and gone in one transaction
    assert len(await tx.items.remove_all("mail")) == 2
    await tx.items.put(later("mail", "m3"))
    await tx.nodes.remove("gone")
    await tx.nodes.add(node("gone", title="again"))
    await tx.items.put(later("gone", "g2"))
    await tx.nodes.update_config("jobs", NodeConfig(title="t", queue=True))
    await tx.subscriptions.add(sub("jobs", "w9@example.org", "s9", queue_requests=1))
    s1 = await tx.subscriptions.get("jobs", "s1")
    await tx.subscriptions.update(dataclasses.replace(s1, queue_requests=5))
    await tx.subscriptions.remove("jobs", "s2")
    await tx.subscriptions.remove("mail", "s3")
    await tx.subscriptions.add(sub("mail", W1, "s3", queue_requests=None))  # new id
    await tx.affiliations.set("jobs", "owner@example.org", Affiliation.NONE)
    await tx.affiliations.set("jobs", W1, Affiliation.PUBLISHER)
    await tx.affiliations.set("mail", W1, Affiliation.OUTCAST)
    await tx.nodes.add(node("new"))
    await tx.affiliations.set("new", W2, Affiliation.OWNER)
    tx.ledger.append(LedgerEvent(at(2), EventKind.ACKED, "jobs", "i5", W1, 1, 6))


# --- rollback --------------------------------------------------------------------------


async def test_leaving_without_commit_restores_memory_and_its_indexes(
    wb: StateStore, url: str
) -> None:
    await seed(wb)
    before = await view(wb)
    check_indexes(wb.state)
    await churn(wb)
    check_indexes(wb.state)
    assert await view(wb) == before
    # ... and memory still equals the database.
    again = await StateStore.open(url)
    try:
        assert await view(again) == before
    finally:
        await again.close()


async def test_a_committed_churn_reads_back_the_same_after_a_restart(
    wb: StateStore, url: str
) -> None:
    await seed(wb)
    async with wb.transaction() as tx:
        await touch_everything(tx)
        await tx.commit()
    after = await view(wb)
    check_indexes(wb.state)
    # i1 waits for its retry delay, i4 and i2 are locked; i3 came back with a new seq.
    assert after["jobs"]["ready"] == ["i6", "h", "i7", "i3"]
    assert after["gone"]["items"][0].item_id == "g2" and len(after["gone"]["items"]) == 1
    again = await StateStore.open(url)
    try:
        assert await view(again) == after
        check_indexes(again.state)
    finally:
        await again.close()


async def test_an_exception_in_the_block_rolls_back_and_propagates(wb: StateStore) -> None:
    await seed(wb)
    before = await view(wb)
    with pytest.raises(KeyError):
        async with wb.transaction() as tx:
            await touch_everything(tx)
            raise KeyError("boom")
    assert await view(wb) == before


async def test_writes_after_a_commit_in_the_same_block_roll_back(wb: StateStore) -> None:
    async with wb.transaction() as tx:
        await tx.nodes.add(node("jobs"))
        await tx.commit()
        await tx.items.put(item("jobs", "late"))
    async with wb.transaction() as tx:
        assert await tx.items.count("jobs") == 0
        assert [n.node_id for n in await tx.nodes.all()] == ["jobs"]


async def test_a_rollback_that_restores_removed_items_keeps_publish_order(
    wb: StateStore,
) -> None:
    async with wb.transaction() as tx:
        await tx.nodes.add(node("jobs", queue=True))
        for n in range(5):
            await tx.items.put(item("jobs", f"i{n}"))
        await tx.commit()
    async with wb.transaction() as tx:
        assert await tx.items.remove("jobs", "i1")
        assert await tx.items.remove("jobs", "i3")
    async with wb.transaction() as tx:
        assert await tx.items.oldest_ids("jobs", 9) == [f"i{n}" for n in range(5)]
        assert [i.item_id for i in await tx.items.latest("jobs", 2)] == ["i3", "i4"]
        ready = await tx.items.next_ready("jobs", T0, 9)
        assert [i.item_id for i in ready] == [f"i{n}" for n in range(5)]


# --- failed commits -------------------------------------------------------------------


async def _committed_node(store: StateStore) -> None:
    async with store.transaction() as tx:
        await tx.nodes.add(node("jobs", queue=True))
        await tx.items.put(item("jobs", "i1"))
        await tx.commit()


async def test_a_failed_write_rolls_memory_back_and_reports_an_outage(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await StateStore.open(sqlite_url)
    store.health.retry_for = 0.0  # a disk that stays broken: no repeat
    try:
        await _committed_node(store)
        before = await view(store)

        def broken(self: SqliteBackend, plan: object) -> None:
            raise FlushFailed(sqlite3.OperationalError("disk I/O error"), maybe_committed=False)

        monkeypatch.setattr(SqliteBackend, "_write", broken)
        with pytest.raises(StorageUnavailable):
            async with store.transaction() as tx:
                await tx.items.put(item("jobs", "i2"))
                assert await tx.items.lock("jobs", "i1", "s1", W1, T0, at(30))
                await tx.commit()
        monkeypatch.undo()
        assert await view(store) == before
        check_indexes(store.state)
        async with store.transaction() as tx:  # the store works on
            await tx.items.put(item("jobs", "i2"))
            await tx.commit()
        assert await view(store) != before
    finally:
        await store.close()


async def test_a_write_refused_by_a_constraint_raises_the_driver_error(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A constraint the core should have guarded is a bug: it propagates as is."""
    store = await StateStore.open(sqlite_url)
    try:
        await _committed_node(store)
        # Make the database disagree with memory behind the store's back.
        with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as conn:
            conn.execute(
                "INSERT INTO items (seq, node_id, item_id, publisher, payload_size, "
                "published_at, updated_at, deliveries) VALUES (999, 'jobs', 'x', '', 0, "
                "'2026-01-01 00:00:00.000000', '2026-01-01 00:00:00.000000', 0)"
            )
        with pytest.raises(sqlite3.IntegrityError):
            async with store.transaction() as tx:
                store.state.next_seq = 999  # collide with the foreign row's seq
                await tx.items.put(item("jobs", "z"))
                await tx.commit()
        async with store.transaction() as tx:
            assert await tx.items.get("jobs", "z") is None
    finally:
        await store.close()


async def test_an_uncertain_commit_makes_the_next_transaction_reload(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """COMMIT failed but the database kept the batch: memory must follow the database."""
    store = await StateStore.open(sqlite_url)
    try:
        await _committed_node(store)
        real = SqliteBackend._write

        def committed_then_failed(self: SqliteBackend, plan: Any) -> None:
            real(self, plan)
            raise FlushFailed(sqlite3.OperationalError("disk I/O error"), maybe_committed=True)

        monkeypatch.setattr(SqliteBackend, "_write", committed_then_failed)
        with pytest.raises(StorageUnavailable):
            async with store.transaction() as tx:
                await tx.items.put(item("jobs", "i2"))
                await tx.commit()
        monkeypatch.undo()
        async with store.transaction() as tx:
            assert await tx.items.get("jobs", "i2") is not None  # reloaded
            assert await tx.items.count("jobs") == 2
        check_indexes(store.state)
    finally:
        await store.close()


async def test_a_failed_commit_fails_every_operation_of_its_batch(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await StateStore.open(sqlite_url)
    service = PubSubService(
        store,
        lambda: T0,
        lambda: uuid.uuid4().hex,
        ServiceSettings(access=ServiceAccess.for_domain("example.org")),
    )
    await service.start()
    try:
        owner = Actor("owner@example.org/x")
        await service.create_node(owner, "q", {"pubsub#queue": ["1"]})
        store.health.retry_for = 0.0  # a failure that lasts: the batch is not repeated
        real = SqliteBackend._write
        failures = [1]

        def flaky(self: SqliteBackend, plan: Any) -> None:
            if failures:
                failures.pop()
                raise FlushFailed(sqlite3.OperationalError("database is locked"), False)
            real(self, plan)

        monkeypatch.setattr(SqliteBackend, "_write", flaky)
        results = await asyncio.gather(
            *(service.publish(owner, "q", f"i{n}", "<x/>", 4) for n in range(5)),
            return_exceptions=True,
        )
        # No answer claims success, and memory is back at the last commit.
        assert all(isinstance(r, StorageUnavailable) for r in results), results
        async with store.transaction() as tx:
            assert await tx.items.oldest_ids("q", 9) == []
            assert await tx.ledger.events("q") == []
        # The next batch commits normally, each item once.
        again = await service.publish(owner, "q", "i0", "<x/>", 4)
        assert again.value == "i0"
        async with store.transaction() as tx:
            assert await tx.items.oldest_ids("q", 9) == ["i0"]
            assert [e.item_id for e in await tx.ledger.events("q")] == ["i0"]
    finally:
        await service.stop()
        await store.close()


# --- what reaches the database ---------------------------------------------------------


async def test_only_the_net_change_is_written(wb: StateStore) -> None:
    await seed(wb)
    async with wb.transaction() as tx:
        await tx.items.put(item("jobs", "brief"))
        assert await tx.items.lock("jobs", "brief", "s1", W1, T0, at(30))
        assert await tx.items.remove("jobs", "brief")  # published, delivered, acked
        assert await tx.items.lock("jobs", "i4", "s1", W1, T0, at(30))
        assert await tx.items.unlock("jobs", "i4", "s1", None)  # unlocked, one delivery more
        s1 = await tx.subscriptions.get("jobs", "s1")
        assert s1 is not None
        await tx.subscriptions.update(s1)  # the same value
        flush = tx.changes.plan()  # type: ignore[attr-defined]
        await tx.commit()
    assert flush.item_deletes == [] and flush.node_upserts == []
    # i4 counts a delivery, so it is written; "brief" never existed for the database.
    assert [i.item_id for i in flush.item_upserts] == ["i4"]
    assert flush.sub_upserts == [] and flush.aff_upserts == []


async def test_a_read_only_transaction_never_reaches_the_database(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await StateStore.open(sqlite_url)
    try:
        await _committed_node(store)

        def no_writes(self: SqliteBackend, plan: Any) -> None:
            raise AssertionError("a read wrote")

        monkeypatch.setattr(SqliteBackend, "_write", no_writes)
        async with store.transaction() as tx:
            await tx.items.next_ready("jobs", T0, 5)
            await tx.items.next_deadline(T0)
            await tx.commit()
    finally:
        await store.close()


async def test_seq_is_never_handed_out_twice_across_restarts(url: str) -> None:
    store = await StateStore.open(url)
    async with store.transaction() as tx:
        await tx.nodes.add(node("jobs"))
        seqs = [(await tx.items.put(item("jobs", f"i{n}"))).seq for n in range(3)]
        await tx.subscriptions.add(sub("jobs", W1, "s1"))
        await tx.commit()
    async with store.transaction() as tx:
        assert await tx.items.remove("jobs", "i2")  # the newest
        await tx.commit()
    await store.close()
    store = await StateStore.open(url)
    async with store.transaction() as tx:
        again = await tx.items.put(item("jobs", "i3"))
        await tx.subscriptions.add(sub("jobs", W2, "s2"))
        await tx.commit()
    await store.close()
    assert again.seq > seqs[-1]


# --- memory indexes (no database) ---------------------------------------------------------


def _state_with(count: int) -> tuple[MemoryState, NodeState]:
    state = MemoryState()
    ns = state.nodes["q"] = NodeState(node("q", queue=True))
    for n in range(count):
        state.set_item(ns, f"i{n}", stored_item(item("q", f"i{n}"), n + 1))
    return state, ns


def test_heaps_stay_bounded_through_lock_unlock_cycles() -> None:
    state, ns = _state_with(50)
    for round_ in range(3000):
        item_id = f"i{round_ % 50}"
        current = ns.items[item_id]
        locked = dataclasses.replace(
            current, locked_by="s1", lock_jid=W1, locked_at=T0, lock_expires_at=at(round_)
        )
        state.set_item(ns, item_id, locked)
        delay = at(round_ % 7) if round_ % 3 else None
        state.set_item(
            ns,
            item_id,
            dataclasses.replace(
                locked,
                locked_by=None,
                lock_jid=None,
                locked_at=None,
                lock_expires_at=None,
                available_at=delay,
            ),
        )
        if round_ % 100 == 0:
            state.ready_items(ns, at(3), 5)
    check_indexes(state)
    assert len(state.lock_heap) <= 2 * state.locked_total + 257
    assert ns.queue.ready.heap_size() <= 2 * len(ns.queue.ready) + 257
    assert len(ns.queue.delayed) <= 2 * ns.queue.delayed_live + 257


def test_next_ready_skips_items_promoted_before_the_clock_went_back() -> None:
    state, ns = _state_with(3)
    item0 = ns.items["i0"]
    state.set_item(ns, "i0", dataclasses.replace(item0, deliveries=1, available_at=at(10)))
    assert [i.item_id for i in state.ready_items(ns, at(20), 9)] == ["i0", "i1", "i2"]
    assert [i.item_id for i in state.ready_items(ns, at(5), 9)] == ["i1", "i2"]


def test_a_deep_backlog_is_served_from_its_head_with_exact_bookkeeping() -> None:
    """Dispatch from a deep backlog: lock the head, ack it, repeat; indexes stay
    exact (timing is the benchmark's business, this checks the bookkeeping)."""
    state, ns = _state_with(20000)
    for n in range(500):
        head = state.ready_items(ns, T0, 1)[0]
        assert head.item_id == f"i{n}"
        state.set_item(
            ns,
            head.item_id,
            dataclasses.replace(head, locked_by="s1", lock_jid=W1, lock_expires_at=at(n)),
        )
        assert state.expired(at(n), 1)[0].item_id == head.item_id
        state.set_item(ns, head.item_id, None)
    assert state.locked_total == 0 and len(ns.queue.ready) == 19500
    assert state.next_lock_deadline() is None
    assert ns.items["i600"].headers is EMPTY_HEADERS


# --- SIGKILL in the middle of a busy run ------------------------------------------------


async def _prepare_queue(url: str) -> None:
    store = await StateStore.open(url)
    service = PubSubService(
        store,
        lambda: datetime.now(UTC),
        lambda: uuid.uuid4().hex,
        ServiceSettings(access=ServiceAccess.for_domain("example.org")),
    )
    await service.start()
    try:
        owner = Actor("owner@example.org/test")
        await service.create_node(owner, "q", {"pubsub#queue": ["1"]})
        workers = [Actor(f"w{n}@example.org/r") for n in range(4)]
        # A new queue is whitelisted: the owner makes its workers members.
        await service.set_node_affiliations(
            owner, "q", [(w.bare, Affiliation.MEMBER) for w in workers]
        )
        for worker in workers:
            await service.subscribe(worker, "q", worker.jid, {"pubsub#queue_requests": ["8"]})
    finally:
        await service.stop()
        await store.close()


async def _run_and_kill(url: str, answers: int) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.storage.store_workload",
        url,
        cwd=REPO,
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(120):
            while sum(1 for line in lines if line.startswith("A ")) < answers:
                line = (await proc.stdout.readline()).decode()
                assert line, "the workload ended before it was killed"
                lines.append(line.strip())
    finally:
        proc.send_signal(signal.SIGKILL)
        rest = await proc.stdout.read()
        await proc.wait()
    lines += rest.decode().splitlines()  # answers given before the kill landed
    return lines


async def test_sigkill_mid_run_loses_no_acknowledged_write(url: str) -> None:
    await _prepare_queue(url)
    lines = await _run_and_kill(url, answers=400)
    published = {line[2:] for line in lines if line.startswith("P ")}
    acked = {line[2:] for line in lines if line.startswith("A ")}
    assert len(acked) >= 400

    store = await StateStore.open(url)
    service = PubSubService(
        store,
        lambda: datetime.now(UTC),
        lambda: uuid.uuid4().hex,
        ServiceSettings(access=ServiceAccess.for_domain("example.org")),
    )
    try:
        check_indexes(store.state)
        async with store.transaction() as tx:
            items = {i.item_id: i for i in (await tx.items.page("q", PageRequest())).items}
            subs = {s.subid: s for s in await tx.subscriptions.for_node("q")}
            events = await tx.ledger.events("q")
            loads = await tx.items.in_flight("q")
        kinds: dict[str, collections.Counter[EventKind]] = collections.defaultdict(
            collections.Counter
        )
        for e in events:
            kinds[e.item_id][e.kind] += 1
        # Every answered publish is stored or was acked; every answered ack is gone.
        for item_id in published:
            assert item_id in items or kinds[item_id][EventKind.ACKED] == 1, item_id
        for item_id in acked:
            assert item_id not in items and kinds[item_id][EventKind.ACKED] == 1, item_id
        # The state is the one the ledger describes, transaction by transaction.
        for item_id, stored in items.items():
            assert kinds[item_id][EventKind.PUBLISHED] == 1
            assert kinds[item_id][EventKind.ACKED] == 0
            assert stored.deliveries == kinds[item_id][EventKind.DELIVERED]
            if stored.locked_by is not None:
                holder = subs[stored.locked_by]
                assert stored.lock_jid == holder.jid
                assert stored.locked_at is not None and stored.lock_expires_at is not None
                assert stored.lock_expires_at > stored.locked_at
        assert all(0 < n <= 8 for n in loads.values())
        assert sum(loads.values()) == sum(1 for i in items.values() if i.locked_by)
        reread = await StateStore.open(url)  # the database says the same when read again
        try:
            async with reread.transaction() as tx:
                reread_items = (await tx.items.page("q", PageRequest())).items
        finally:
            await reread.close()
        assert {i.item_id: i for i in reread_items} == items

        # Restart the service on it: every stored item is acked exactly once.
        await service.start()
        workers = {s.jid: Actor(s.jid) for s in subs.values()}
        pending: list[tuple[str, str]] = [
            (i.lock_jid, i.item_id) for i in items.values() if i.lock_jid is not None
        ]
        outcome = await service.tick()  # catch-up dispatch of the unlocked backlog
        pending += [
            (e.to, e.items[0].item_id) for e in outcome.effects if isinstance(e, ItemNotice)
        ]
        while pending:
            jid, item_id = pending.pop()
            done = await service.retract(workers[jid], "q", item_id)
            pending += [
                (e.to, e.items[0].item_id) for e in done.effects if isinstance(e, ItemNotice)
            ]
        async with store.transaction() as tx:
            assert await tx.items.count("q") == 0
            events = await tx.ledger.events("q")
        acks = collections.Counter(e.item_id for e in events if e.kind is EventKind.ACKED)
        stored_ever = {e.item_id for e in events if e.kind is EventKind.PUBLISHED}
        assert published | acked | set(items) <= set(acks) == stored_ever
        assert set(acks.values()) == {1}
    finally:
        await service.stop()
        await store.close()


# --- values ----------------------------------------------------------------------------


async def test_items_are_stored_once_and_shared_not_copied(wb: StateStore) -> None:
    async with wb.transaction() as tx:
        await tx.nodes.add(node("jobs", queue=True))
        put = await tx.items.put(item("jobs", "i1", headers={}))
        got = await tx.items.get("jobs", "i1")
        assert got is put and put.headers is EMPTY_HEADERS
        with pytest.raises(TypeError):
            put.headers["x"] = "y"  # type: ignore[index]
        await tx.commit()


async def test_writes_to_a_missing_node_are_refused_before_any_change(
    wb: StateStore,
) -> None:
    async with wb.transaction() as tx:
        with pytest.raises(ValueError):
            await tx.items.put(item("nowhere", "i1"))
        with pytest.raises(ValueError):
            await tx.subscriptions.add(sub("nowhere", W1, "s1"))
        with pytest.raises(ValueError):
            await tx.affiliations.set("nowhere", W1, Affiliation.OWNER)
        await tx.affiliations.set("nowhere", W1, Affiliation.NONE)  # nothing to remove
        await tx.commit()
    assert wb.state.nodes == {}


def test_stored_items_refuse_naive_times() -> None:
    naive = item("q", "i1", published_at=datetime(2026, 1, 1))
    with pytest.raises(ValueError):
        stored_item(naive, 1)
    shifted = stored_item(item("q", "i2", published_at=T0 + timedelta(hours=1)), 1)
    assert shifted.published_at.tzinfo is UTC


async def test_subscription_state_survives_a_restart(wb: StateStore, url: str) -> None:
    pending = dataclasses.replace(
        sub("mail", W1, "s1"),
        state=SubscriptionState.PENDING,
        options={"pubsub#deliver": ("0",)},
    )
    async with wb.transaction() as tx:
        await tx.nodes.add(node("mail"))
        await tx.subscriptions.add(pending)
        await tx.commit()
    again = await StateStore.open(url)
    try:
        async with again.transaction() as tx:
            assert await tx.subscriptions.get("mail", "s1") == pending
    finally:
        await again.close()


# --- payloads kept in the database -------------------------------------------------------


def _cold_ids(store: StateStore, node_id: str) -> set[str]:
    return {i.item_id for i in store.state.nodes[node_id].items.values() if i.payload is COLD}


async def test_the_tail_of_a_long_queue_keeps_its_payloads_in_the_database(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state, "HOT_WINDOW", 4)
    monkeypatch.setattr(items_queue, "PREFETCH", 3)
    store = await StateStore.open(url)
    try:
        async with store.transaction() as tx:
            await tx.nodes.add(node("jobs", queue=True))
            for n in range(12):
                await tx.items.put(item("jobs", f"i{n}", f"<job n='{n}'/>"))
            await tx.commit()
        cold = _cold_ids(store, "jobs")
        assert cold and cold <= {f"i{n}" for n in range(12)}  # written, then let go
        async with store.transaction() as tx:
            # A read hands out real payloads, fetching the cold ones (and some ahead).
            got = await tx.items.get("jobs", "i11")
            assert got is not None and got.payload == "<job n='11'/>"
            page = await tx.items.page("jobs", PageRequest())
            assert [i.payload for i in page.items] == [f"<job n='{n}'/>" for n in range(12)]
            head = await tx.items.next_ready("jobs", T0, 2)
            assert [i.payload for i in head] == ["<job n='0'/>", "<job n='1'/>"]
            # Writes to items whose payload is not in memory keep it in the database.
            store.state.cool([i for i in store.state.nodes["jobs"].items.values()])
            assert await tx.items.lock("jobs", "i5", "s1", W1, T0, at(30))
            assert await tx.items.extend("jobs", "i5", "s1", at(60))
            await tx.items.replace_payload("jobs", "i6", "<new/>", 6, W2, at(1))
            await tx.commit()
        async with store.transaction() as tx:
            due = await tx.items.expired_locks(at(60), 5)
            assert [(i.item_id, i.payload) for i in due] == [("i5", "<job n='5'/>")]
            removed = await tx.items.remove_all("jobs")
            # A purge may hand items back without payloads; never with the marker.
            assert all(i.payload is None or i.payload.startswith("<") for i in removed)
            # (rolled back: left without commit)
        again = await StateStore.open(url)  # loads every payload cold
        try:
            # The locked one whole (its payload cold), the waiting ones as seqs alone.
            assert _cold_ids(again, "jobs") == {"i5"}
            tail = again.state.nodes["jobs"].queue.tail
            assert tail is not None and len(tail) == 11
            assert await view(again) == await view(store)
        finally:
            await again.close()
        reread = await StateStore.open(url)
        try:
            async with reread.transaction() as tx:
                i5, i6 = await tx.items.get("jobs", "i5"), await tx.items.get("jobs", "i6")
        finally:
            await reread.close()
        assert i5 is not None and (i5.payload, i5.locked_by, i5.lock_expires_at) == (
            "<job n='5'/>",
            "s1",
            at(60),
        )
        assert i6 is not None and i6.payload == "<new/>"
    finally:
        await store.close()


async def test_a_cold_item_that_is_never_read_is_never_fetched(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await StateStore.open(sqlite_url)
    try:
        await _committed_node(store)
    finally:
        await store.close()
    store = await StateStore.open(sqlite_url)
    fetched: list[list[str]] = []
    real = SqliteBackend.payloads

    async def spy(self: SqliteBackend, node_id: str, ids: list[str]) -> dict[str, str | None]:
        fetched.append(ids)
        return await real(self, node_id, ids)

    monkeypatch.setattr(SqliteBackend, "payloads", spy)
    try:
        async with store.transaction() as tx:
            assert await tx.items.count("jobs") == 1
            # Loaded as a seq alone: the lock reads its row once (not its payload alone).
            assert await tx.items.lock("jobs", "i1", "s1", W1, T0, at(30))
            assert await tx.items.remove("jobs", "i1")  # an ack needs no payload
            await tx.commit()
        assert fetched == []
    finally:
        await store.close()


async def test_a_commit_cancelled_mid_write_is_not_abandoned(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caller is cancelled while the write runs: the write still finishes,
    and the next transaction trusts the database, not the rolled-back memory."""
    store = await StateStore.open(sqlite_url)
    try:
        await _committed_node(store)
        assert isinstance(store.backend, SqliteBackend)
        store.backend.place = CommitPlace(loop_allowed=False)  # a write on the thread
        real = SqliteBackend._write
        entered, release = asyncio.Event(), threading.Event()
        loop = asyncio.get_running_loop()

        def slow(self: SqliteBackend, plan: Any) -> None:
            loop.call_soon_threadsafe(entered.set)
            release.wait(timeout=30)
            real(self, plan)

        monkeypatch.setattr(SqliteBackend, "_write", slow)

        async def publish() -> None:
            async with store.transaction() as tx:
                await tx.items.put(item("jobs", "i2"))
                await tx.commit()

        task = asyncio.create_task(publish())
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        async with store.transaction() as tx:
            assert await tx.items.get("jobs", "i2") is not None  # it was committed
        check_indexes(store.state)
    finally:
        await store.close()


async def test_a_lost_connection_is_an_outage_the_batch_is_written_again_one_log_line(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 27 point 3: an outage whose write surely did not commit is repeated (on
    a new connection), so no operation of the batch fails; the log says it once."""
    store = await StateStore.open(sqlite_url)
    service = PubSubService(
        store,
        lambda: T0,
        lambda: uuid.uuid4().hex,
        ServiceSettings(access=ServiceAccess.for_domain("example.org")),
    )
    await service.start()
    try:
        owner = Actor("owner@example.org/x")
        await service.create_node(owner, "q", {"pubsub#queue": ["1"]})
        real = SqliteBackend._write
        failures = [1, 2, 3]

        def flaky(self: SqliteBackend, plan: Any) -> None:
            if failures:
                failures.pop()
                raise FlushFailed(sqlite3.OperationalError("disk I/O error"), False)
            real(self, plan)

        monkeypatch.setattr(SqliteBackend, "_write", flaky)
        with caplog.at_level("INFO", "xmpp_queue"):
            results = await asyncio.gather(
                *(service.publish(owner, "q", f"i{n}", "<x/>", 4) for n in range(5))
            )
        assert [r.value for r in results] == [f"i{n}" for n in range(5)]
        lines = [r.getMessage() for r in caplog.records]
        assert sum("event=database_unavailable" in m for m in lines) == 1, lines
        assert sum("event=database_back" in m for m in lines) == 1, lines
        assert not any("commit_failed" in m for m in lines), lines
        assert store.health.ok
        async with store.transaction() as tx:
            assert sorted(await tx.items.oldest_ids("q", 9)) == [f"i{n}" for n in range(5)]
    finally:
        await service.stop()
        await store.close()


def test_asyncpg_and_wrapped_connection_errors_are_outages() -> None:
    """Issue 27 point 5: what asyncpg raises after pg_terminate_backend, bare or
    wrapped by SQLAlchemy, is a lost connection; a refused statement is not."""
    import asyncpg
    from sqlalchemy.exc import DBAPIError, IntegrityError

    from xmpp_queue.storage.sql_outages import postgres_outage

    lost = [
        asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator"),
        asyncpg.exceptions.ConnectionDoesNotExistError(
            "connection was closed in the middle of operation"
        ),
        asyncpg.exceptions.InterfaceError("connection is closed"),
        asyncpg.exceptions.InternalClientError("cannot switch to state 15"),
        ConnectionResetError(),
    ]
    for exc in lost:
        assert postgres_outage(exc), exc
        wrapped = DBAPIError("COMMIT", None, exc, connection_invalidated=False)
        assert postgres_outage(wrapped), wrapped
        chained = RuntimeError("while committing")
        chained.__cause__ = exc
        assert postgres_outage(chained)
    assert postgres_outage(
        DBAPIError("SELECT 1", None, Exception("x"), connection_invalidated=True)
    )
    refused = asyncpg.exceptions.UniqueViolationError("duplicate key")
    assert not postgres_outage(refused)
    assert not postgres_outage(IntegrityError("INSERT", None, refused))
