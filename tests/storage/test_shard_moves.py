"""Moving a node's family between two shard stores on one real PostgreSQL.

Two shards' stores and services share one database as two processes would;
the old shard's mover lets the family go under its fence, the new shard's
adopts it: items keep their locks, holders, attempts and deadlines, the
subscription keeps its subid, dead letters come along, and the new shard hands
out the waiting items. A move under a lost lease changes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.kit import FakeClock, build_service
from tests.kit.stores import empty_database
from xmpp_queue.core.effects import Effect, ItemNotice
from xmpp_queue.core.errors import NodeNotFound, NotActive
from xmpp_queue.core.model import AccessModel, Actor, NodeConfig
from xmpp_queue.sharding_moves import MoveRefused, ShardMover
from xmpp_queue.storage.lease import Fence, PostgresLease
from xmpp_queue.storage.placement import PlacementTable
from xmpp_queue.storage.shard_backend import open_shard_store

P0, P1, P2 = "p0.queue.example.org", "p1.queue.example.org", "p2.queue.example.org"
OWNER = Actor("owner@example.org/desk")
WORKER = Actor("w1@example.org/proc")
QUEUE = {
    "pubsub#queue": ["1"],
    "pubsub#access_model": [AccessModel.OPEN.value],
    "pubsub#queue_retry_delay": ["0"],
}


@pytest.fixture
async def pg(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await empty_database("postgresql", request, tmp_path)


def notified(effects: Any) -> list[str]:
    """Item ids the effects hand to a subscriber."""
    return [i.item_id for e in effects if isinstance(e, ItemNotice) for i in e.items]


class Shard:
    """One shard's store, service and mover (what a shard's term composes)."""

    def __init__(self, name: str, store: Any, table: PlacementTable, clock: FakeClock) -> None:
        self.store = store
        self.service = build_service(store, clock)
        self.sent: list[Effect] = []
        self.mover = ShardMover(
            name, (P0, P1, P2), store, table, self.service, self.sent.extend, poll=0.01
        )

    @classmethod
    async def open(cls, pg: str, name: str, clock: FakeClock, fence: Fence | None = None) -> Shard:
        shard = cls(name, await open_shard_store(pg, fence, name), PlacementTable(pg), clock)
        await shard.service.start()
        return shard

    async def close(self) -> None:
        await self.service.stop()
        await self.store.close()
        await self.mover.placements.close()


async def test_a_family_moves_with_locks_attempts_subscriptions_and_dead_letters(
    pg: str,
) -> None:
    clock = FakeClock()
    old = await Shard.open(pg, P0, clock)
    new = await Shard.open(pg, P1, clock)
    try:
        svc = old.service
        await svc.create_node(OWNER, "jobs", {**QUEUE, "pubsub#queue_max_deliveries": ["1"]})
        await svc.create_node(OWNER, "jobs/dead-letter", QUEUE)
        await svc.create_node(OWNER, "other", QUEUE)  # another family: stays
        sub = await svc.subscribe(WORKER, "jobs", WORKER.jid, {"pubsub#queue_requests": ["2"]})
        for n in range(5):
            await svc.publish(OWNER, "jobs", f"i{n}", f"<p xmlns='x'>{n}</p>")
        await svc.unlock(WORKER, "jobs", "i0")  # max 1 delivery: i0 is dead-lettered
        held = {i.item_id: i for i in old.store.state.locked_items(old.store.state.nodes["jobs"])}
        assert sorted(held) == ["i1", "i2"]

        assert await old.mover.move("jobs", P1) == ["jobs", "jobs/dead-letter"]
        assert set(old.store.state.nodes) == {"other"}
        assert await new.mover.adopt() == ["jobs", "jobs/dead-letter"]
        assert await new.mover.adopt() == []  # once only

        state = new.store.state
        ns = state.nodes["jobs"]
        moved = {i.item_id: i for i in state.locked_items(ns)}
        assert sorted(moved) == ["i1", "i2"]
        for item_id, before in held.items():  # same lock, holder, attempt, deadline
            after = moved[item_id]
            assert (after.locked_by, after.lock_jid, after.deliveries, after.lock_expires_at) == (
                before.locked_by,
                before.lock_jid,
                before.deliveries,
                before.lock_expires_at,
            )
        assert [s.subid for s in ns.subs.values()] == [sub.value.subid]
        async with new.store.transaction() as tx:  # a waiting item may be kept cold
            assert await tx.items.get("jobs/dead-letter", "i0") is not None
        # The holder acks on the new shard; its window has room: the next item comes.
        out = await new.service.retract(WORKER, "jobs", "i1")
        assert "i3" in notified(out.effects), out.effects
        async with new.store.transaction() as tx:
            kinds = [(e.kind, e.item_id) for e in await tx.ledger.events("jobs")]
        assert kinds.count(("published", "i1")) == 1 and ("acked", "i1") in kinds
        # The old shard refuses to write the node now (its memory lacks it).
        with pytest.raises(NodeNotFound):
            await svc.publish(OWNER, "jobs", "late", "<p xmlns='x'/>")
    finally:
        await old.close()
        await new.close()


async def test_a_move_is_refused_for_a_wrong_target_or_a_node_not_held(pg: str) -> None:
    clock = FakeClock()
    old = await Shard.open(pg, P0, clock)
    try:
        await old.service.create_node(OWNER, "jobs", QUEUE)
        for target in (P0, "elsewhere.example.org"):
            with pytest.raises(MoveRefused):
                await old.mover.move("jobs", target)
        with pytest.raises(MoveRefused):
            await old.mover.move("missing", P1)
        assert await old.mover.placements.owner("jobs") == P0
    finally:
        await old.close()


async def test_a_move_under_a_lost_lease_changes_nothing(pg: str) -> None:
    clock = FakeClock()
    # A lease of its own name (the session database keeps lease rows between tests).
    lease = PostgresLease(pg, "moves-test", ttl=5)
    assert await lease.try_acquire() is not None
    old = await Shard.open(pg, P0, clock, lease.fence)
    try:
        await old.service.create_node(OWNER, "jobs", QUEUE)
        await old.service.publish(OWNER, "jobs", "i0", "<p xmlns='x'/>")
        await lease.release()  # another process may take the shard now
        rival = PostgresLease(pg, "moves-test", ttl=5)
        assert await rival.try_acquire() is not None
        with pytest.raises(NotActive):
            await old.mover.move("jobs", P1)
        table = PlacementTable(pg, cache_seconds=0)
        assert await table.owner("jobs") == P0
        await table.close()
        await rival.release()
        await rival.close()
    finally:
        await old.close()
        await lease.close()


async def test_partitions_made_by_the_directory_are_loaded_by_their_shards(pg: str) -> None:
    clock = FakeClock()
    a = await Shard.open(pg, P0, clock)
    b = await Shard.open(pg, P1, clock)
    table = PlacementTable(pg, cache_seconds=0)
    try:
        placed = [("orders#0", P0), ("orders#1", P1)]
        config = NodeConfig(queue=True, queue_lock_timeout=9)
        assert await table.create_partitions(
            "orders", placed, config, OWNER.jid, "owner@example.org"
        )
        assert not await table.create_partitions("orders", placed, config, OWNER.jid, None)
        assert await table.partitions("orders") == placed
        assert await a.mover.adopt() == ["orders#0"]
        assert await b.mover.adopt() == ["orders#1"]
        assert await a.mover.adopt() == []  # loaded once
        node = a.store.state.nodes["orders#0"].node
        assert node.config.queue_lock_timeout == 9
        # The creator owns each partition; a worker subscribes and gets what is published.
        await a.service.subscribe(WORKER, "orders#0", WORKER.jid, {"pubsub#queue_requests": ["1"]})
        out = await a.service.publish(OWNER, "orders#0", "i0", "<p xmlns='x'/>")
        assert notified(out.effects) == ["i0"]
        await a.service.delete_node(OWNER, "orders#0")  # owned by the creator
        assert await table.owner("orders#0") is None
    finally:
        await a.close()
        await b.close()
        await table.close()
