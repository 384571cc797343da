"""Shard stores on one PostgreSQL: each loads and writes only its own nodes.

Real PostgreSQL; two shards' stores share one database as two processes would.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit.stores import empty_database
from xmpp_queue.storage.placement import PlacementTable
from xmpp_queue.storage.shard_backend import SEQ_BLOCK, NodeOnAnotherShard, open_shard_store

from .samples import at, item, node, sub

P0, P1 = "p0.queue.example.org", "p1.queue.example.org"


@pytest.fixture
async def pg(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await empty_database("postgresql", request, tmp_path)


async def test_each_shard_loads_only_the_nodes_placed_on_it(pg: str) -> None:
    a = await open_shard_store(pg, None, P0)
    b = await open_shard_store(pg, None, P1)
    table = PlacementTable(pg)
    try:
        async with a.transaction() as tx:
            await tx.nodes.add(node("jobs"))
            await tx.items.put(item("jobs", "one"))
            await tx.commit()
        async with b.transaction() as tx:
            await tx.nodes.add(node("mail"))
            await tx.items.put(item("mail", "two"))
            await tx.commit()
        assert await table.owner("jobs") == P0  # written in the commit that made it
        assert await table.owner("mail") == P1
        again = await open_shard_store(pg, None, P0)
        try:
            async with again.transaction() as tx:
                assert [n.node_id for n in await tx.nodes.all()] == ["jobs"]
                assert await tx.items.count("jobs") == 1
        finally:
            await again.close()
        # The two shards' item seqs come from disjoint blocks.
        seqs = [a.state.nodes["jobs"].items["one"].seq, b.state.nodes["mail"].items["two"].seq]
        assert abs(seqs[0] - seqs[1]) >= SEQ_BLOCK - 1
    finally:
        await a.close()
        await b.close()
        await table.close()


async def test_a_shard_cannot_commit_a_node_placed_on_another(pg: str) -> None:
    table = PlacementTable(pg)
    b = await open_shard_store(pg, None, P1)
    try:
        assert await table.claim("jobs", P0) == P0  # the directory placed it on p0
        assert await table.claim("jobs", P1) == P0  # a second claim finds the first
        with pytest.raises(NodeOnAnotherShard):
            async with b.transaction() as tx:
                await tx.nodes.add(node("jobs"))
                await tx.commit()
        assert await table.owner("jobs") == P0
        async with b.transaction() as tx:
            assert await tx.nodes.all() == []
    finally:
        await b.close()
        await table.close()


async def test_deleting_a_node_removes_its_placement(pg: str) -> None:
    a = await open_shard_store(pg, None, P0)
    table = PlacementTable(pg, cache_seconds=0)
    try:
        async with a.transaction() as tx:
            await tx.nodes.add(node("jobs"))
            await tx.commit()
        assert [n.node_id for n in await table.listing("w@example.org")] == ["jobs"]
        async with a.transaction() as tx:
            await tx.nodes.remove("jobs")
            await tx.commit()
        assert await table.owner("jobs") is None
        assert await table.listing("w@example.org") == []
    finally:
        await a.close()
        await table.close()


async def test_one_accounts_subscriptions_and_affiliations_are_read_over_every_shard(
    pg: str,
) -> None:
    """What the directory answers "all my subscriptions / affiliations" from: the
    rows both shards committed, for the account's bare and full JIDs only."""
    from xmpp_queue.core.account_lists import AccountLists
    from xmpp_queue.core.model import Actor, Affiliation, SubscriptionState

    a = await open_shard_store(pg, None, P0)
    b = await open_shard_store(pg, None, P1)
    table = PlacementTable(pg)
    w = "w@example.org"
    try:
        async with a.transaction() as tx:
            await tx.nodes.add(node("jobs", queue=True))
            await tx.affiliations.set("jobs", w, Affiliation.PUBLISHER)
            await tx.subscriptions.add(sub("jobs", f"{w}/one", "s1", queue_requests=4))
            await tx.subscriptions.add(sub("jobs", "w@example.org.evil/x", "s2"))
            await tx.commit()
        async with b.transaction() as tx:
            await tx.nodes.add(node("mail"))
            await tx.affiliations.set("mail", w, Affiliation.OUTCAST)
            await tx.affiliations.set("mail", "other@example.org", Affiliation.OWNER)
            await tx.subscriptions.add(sub("mail", w, "s3", created_at=at(5)))
            await tx.commit()
        lists = AccountLists(table)
        subs = await lists.subscriptions(Actor(f"{w}/anything"))
        assert [(s.node, s.jid, s.subid) for s in subs] == [
            ("jobs", f"{w}/one", "s1"),
            ("mail", w, "s3"),
        ]
        assert subs[0].queue_requests == 4 and subs[0].state is SubscriptionState.SUBSCRIBED
        assert subs[1].created_at == at(5)
        affs = await lists.affiliations(Actor(w))
        assert [(e.node, e.affiliation) for e in affs] == [
            ("jobs", Affiliation.PUBLISHER),
            ("mail", Affiliation.OUTCAST),
        ]
        assert await lists.subscriptions(Actor("nobody@example.org")) == []
        assert await lists.affiliations(Actor("nobody@example.org")) == []
    finally:
        await a.close()
        await b.close()
        await table.close()


async def test_every_shards_queues_are_read_with_their_committed_counts(pg: str) -> None:
    """What every shard's dashboard lists (``/api/deployment``): each queue placed on
    any shard, its shard, and the counts its shard committed."""
    a = await open_shard_store(pg, None, P0)
    b = await open_shard_store(pg, None, P1)
    table = PlacementTable(pg)
    try:
        async with a.transaction() as tx:
            await tx.nodes.add(node("jobs", queue=True))
            await tx.nodes.add(node("news"))  # not a queue: not listed
            await tx.items.put(item("jobs", "w1", published_at=at(1)))
            await tx.items.put(item("jobs", "w2", published_at=at(2), available_at=at(100)))
            await tx.items.put(
                item(
                    "jobs",
                    "f1",
                    locked_by="s1",
                    lock_jid="w@example.org/one",
                    locked_at=at(3),
                    lock_expires_at=at(300),
                )
            )
            await tx.subscriptions.add(sub("jobs", "w@example.org/one", "s1", queue_requests=2))
            await tx.commit()
        async with b.transaction() as tx:
            await tx.nodes.add(node("mail", queue=True))
            await tx.commit()
        rows = await table.placed_queues(at(10))
        assert [(r.node, r.shard) for r in rows] == [("jobs", P0), ("mail", P1)]
        jobs, mail = rows
        assert (jobs.waiting, jobs.delayed, jobs.in_flight, jobs.subscribers) == (2, 1, 1, 1)
        assert jobs.oldest_waiting == at(1)
        assert (mail.waiting, mail.in_flight, mail.subscribers, mail.oldest_waiting) == (
            0,
            0,
            0,
            None,
        )
        assert (await table.placed_queues(at(200)))[0].delayed == 0  # its time came
    finally:
        await a.close()
        await b.close()
        await table.close()


async def test_a_shard_that_lost_its_lease_cannot_commit(pg: str) -> None:
    """Fencing as for one component: each shard's commits check its own lease's token,
    and another shard's lease changes nothing for it."""
    from xmpp_queue.core.errors import NotActive
    from xmpp_queue.storage.lease import PostgresLease

    old, new = PostgresLease(pg, P0, holder="a:1"), PostgresLease(pg, P0, holder="b:2")
    other = PostgresLease(pg, P1, holder="a:1")
    stores = []
    try:
        await old.try_acquire()
        await other.try_acquire()
        a = await open_shard_store(pg, old.fence, P0)
        b = await open_shard_store(pg, other.fence, P1)
        stores += [a, b]
        async with a.transaction() as tx:
            await tx.nodes.add(node("jobs"))
            await tx.commit()
        await old.release()  # as if its term ran out while it was paused
        assert await new.try_acquire() == 2
        with pytest.raises(NotActive):
            async with a.transaction() as tx:
                await tx.items.put(item("jobs", "late"))
                await tx.commit()
        async with b.transaction() as tx:  # p1's term goes on
            await tx.nodes.add(node("mail"))
            await tx.commit()
        fresh = await open_shard_store(pg, new.fence, P0)
        stores.append(fresh)
        async with fresh.transaction() as tx:
            assert [n.node_id for n in await tx.nodes.all()] == ["jobs"]
            assert await tx.items.count("jobs") == 0
    finally:
        for store in stores:
            await store.close()
        for lease in (old, new, other):
            await lease.close()


async def test_a_shard_store_keeps_the_backlog_budget_it_is_given(pg: str) -> None:
    """``[database] backlog_memory_mb`` reaches a shard's store as it reaches an
    unsharded one (the memory for whole waiting items)."""
    given = await open_shard_store(pg, None, P0, backlog_bytes=3 * 1024 * 1024)
    default = await open_shard_store(pg, None, P1)
    try:
        assert given.budget.limit == 3 * 1024 * 1024
        assert default.budget.limit is not None and default.budget.limit > given.budget.limit
    finally:
        await given.close()
        await default.close()
