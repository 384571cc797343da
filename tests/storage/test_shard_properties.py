"""Shards on one PostgreSQL, driven at random: a node is always on exactly one shard.

A Hypothesis state machine runs the real service on three shard stores sharing one
database (as three processes would), with the directory's claims in between:
creates (on the right shard, on a wrong one, on a name the directory placed
elsewhere, instant nodes placed by their commit alone), publishes, deletes,
moves of a node's family to another shard (which adopts it) and restarts of a
shard (a new term: its store is loaded again and takes a new id block). After every step:

- no node is in two shards' memories, and each node a shard holds is placed on it
  in ``node_placement``;
- the database's nodes are exactly the union of the shards' memories, and their
  items exactly the items the shards hold (nothing written by the wrong shard,
  nothing lost by a refused create);
- a restarted shard loads exactly the nodes and items it held.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from sqlalchemy import text

from tests.kit import FakeClock
from tests.kit.stores import empty_pg
from xmpp_queue.core.attributes import format_datetime
from xmpp_queue.core.errors import NodeExists, NodeNotFound
from xmpp_queue.core.model import Actor
from xmpp_queue.core.placement import pick_shard
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.sharding_moves import MoveRefused, ShardMover
from xmpp_queue.storage.engine import make_engine
from xmpp_queue.storage.placement import PlacementTable
from xmpp_queue.storage.shard_backend import open_shard_store
from xmpp_queue.storage.store import StateStore

pytestmark = pytest.mark.postgres

SHARDS = ("p0.q.example.org", "p1.q.example.org", "p2.q.example.org")
NAMES = ("jobs", "mail", "news", "jobs/retry", "logs")
OWNER = Actor("owner@example.org/desk")
SETTINGS = settings(
    max_examples=25,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def held_items(ns: Any) -> int:
    """How many items a shard holds of a node: by id in memory, and cold (seq only; a
    load may keep an item cold that was in memory before)."""
    tail = ns.queue.tail
    return len(ns.items) + (0 if tail is None else len(tail))


class ShardMachine(RuleBasedStateMachine):
    url: str

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.ids = itertools.count(1)
        self.run(empty_pg(self.url))  # placements too
        self.table = PlacementTable(self.url, cache_seconds=0)
        self.stores: list[StateStore] = [
            self.run(open_shard_store(self.url, None, s)) for s in SHARDS
        ]
        self.services = [self._service(store) for store in self.stores]

    def run(self, coroutine: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(coroutine)

    def _service(self, store: StateStore) -> PubSubService:
        service = PubSubService(
            store,
            self.clock,
            lambda: f"id{next(self.ids)}",
            ServiceSettings(access=ServiceAccess.for_domain("example.org")),
        )
        self.run(service.start())
        return service

    def holds(self, shard: int) -> set[str]:
        return set(self.stores[shard].state.nodes)

    def teardown(self) -> None:
        for service, store in zip(self.services, self.stores, strict=True):
            self.run(service.stop())
            self.run(store.close())
        self.run(self.table.close())
        self.loop.close()

    # --- rules ------------------------------------------------------------------------

    @rule(name=st.sampled_from(NAMES), shard=st.integers(0, 2), queue=st.booleans())
    def create(self, name: str, shard: int, queue: bool) -> None:
        """A create on a shard, as its guard runs it: claim first, create if ours."""
        owner = self.run(self.table.claim(name, SHARDS[shard]))
        if owner != SHARDS[shard]:
            return  # redirected: nothing changes here
        config = {"pubsub#queue": ["1"]} if queue else {"pubsub#persist_items": ["1"]}
        try:
            self.run(self.services[shard].create_node(OWNER, name, config))
        except NodeExists:
            assert name in self.holds(shard)

    @rule(shard=st.integers(0, 2))
    def create_instant(self, shard: int) -> None:
        """An instant node (its id made by the service): no claim before, placed by
        the commit that creates it (as a dead-letter node is)."""
        self.run(self.services[shard].create_node(OWNER, None, {"pubsub#queue": ["1"]}))

    @rule(name=st.sampled_from(NAMES))
    def directory_places(self, name: str) -> None:
        """The directory places a name by hash (the node is created later, if ever)."""
        self.run(self.table.claim(name, pick_shard(name, SHARDS)))

    @rule(name=st.sampled_from(NAMES), shard=st.integers(0, 2))
    def publish(self, name: str, shard: int) -> None:
        item = f"i{next(self.ids)}"
        try:
            self.run(self.services[shard].publish(OWNER, name, item, "<x/>", 4))
        except NodeNotFound:
            assert name not in self.holds(shard)

    @rule(name=st.sampled_from(NAMES), shard=st.integers(0, 2), delay=st.sampled_from([5, 600]))
    def publish_for_later(self, name: str, shard: int, delay: int) -> None:
        """A delayed item on a queue the shard holds: a load (restart, adoption) keeps
        it as (due, seq) only, and it must travel and count like any other."""
        ns = self.stores[shard].state.nodes.get(name)
        if ns is None or not ns.node.config.queue:
            return
        start = format_datetime(self.clock.now + timedelta(seconds=delay))
        item = f"i{next(self.ids)}"
        self.run(
            self.services[shard].publish(OWNER, name, item, "<x/>", 4, attributes={"Start": start})
        )

    @rule(name=st.sampled_from(NAMES), shard=st.integers(0, 2))
    def delete(self, name: str, shard: int) -> None:
        try:
            self.run(self.services[shard].delete_node(OWNER, name))
        except NodeNotFound:
            assert name not in self.holds(shard)

    @rule(shard=st.integers(0, 2))
    def restart(self, shard: int) -> None:
        """A new term of the shard: its store is loaded again from the database."""
        before = {n: held_items(ns) for n, ns in self.stores[shard].state.nodes.items()}
        self.run(self.services[shard].stop())
        self.run(self.stores[shard].close())
        self.stores[shard] = self.run(open_shard_store(self.url, None, SHARDS[shard]))
        self.services[shard] = self._service(self.stores[shard])
        after = {n: held_items(ns) for n, ns in self.stores[shard].state.nodes.items()}
        assert after == before  # (which ones: the invariant below checks them by id)

    @rule(name=st.sampled_from(NAMES), shard=st.integers(0, 2), to=st.integers(0, 2))
    def move(self, name: str, shard: int, to: int) -> None:
        """An admin moves a node's family to another shard, which adopts it (its
        poll): the family's nodes and items go over whole; a move of a node the
        shard does not hold, or to itself, is refused and changes nothing."""
        family = {n for n in self.holds(shard) if n == name or n.startswith(name + "/")}
        before = {n: held_items(self.stores[shard].state.nodes[n]) for n in family}
        try:
            moved = self.run(self.mover(shard).move(name, SHARDS[to]))
        except MoveRefused:
            assert shard == to or name not in self.holds(shard)
            return
        assert family <= set(moved)
        assert not family & self.holds(shard)
        self.run(self.mover(to).adopt())
        after = {n: held_items(self.stores[to].state.nodes[n]) for n in family}
        assert after == before

    def mover(self, shard: int) -> ShardMover:
        return ShardMover(
            SHARDS[shard],
            SHARDS,
            self.stores[shard],
            self.table,
            self.services[shard],
            lambda effects: None,
        )

    # --- invariants -----------------------------------------------------------------

    @invariant()
    def one_shard_per_node(self) -> None:
        held = [self.holds(k) for k in range(len(SHARDS))]
        for a, b in itertools.combinations(held, 2):
            assert not a & b, (a, b)
        for k, nodes in enumerate(held):
            for node in nodes:
                assert self.run(self.table.owner(node)) == SHARDS[k], node

    @invariant()
    def the_database_holds_what_the_shards_hold(self) -> None:
        async def rows() -> tuple[set[str], set[tuple[str, str]]]:
            engine = make_engine(self.url)
            try:
                async with engine.connect() as conn:
                    nodes = {r[0] for r in await conn.execute(text("SELECT node_id FROM nodes"))}
                    items = {
                        (r[0], r[1])
                        for r in await conn.execute(text("SELECT node_id, item_id FROM items"))
                    }
            finally:
                await engine.dispose()
            return nodes, items

        nodes, items = self.run(rows())
        held = {n: ns for store in self.stores for n, ns in store.state.nodes.items()}
        assert nodes == set(held)
        # A shard keeps some waiting items cold (their seq only, payload and id on disk:
        # the disk-bounded backlog); the rest are in memory by id.
        for node_id, ns in held.items():
            stored = {i for n, i in items if n == node_id}
            tail = ns.queue.tail
            cold = len(tail) if tail is not None else 0
            assert set(ns.items) <= stored, node_id
            assert len(stored) == len(ns.items) + cold, (node_id, stored, set(ns.items), cold)
        assert {n for n, _ in items} <= nodes


def test_a_node_is_on_exactly_one_shard(request: pytest.FixtureRequest) -> None:
    url: str = request.getfixturevalue("pg_migrated")
    machine = type("ShardMachineOnPostgres", (ShardMachine,), {"url": url})
    run_state_machine_as_test(machine, settings=SETTINGS)
