"""Stateful property test of topics: one topic, two bound queues (one filtered).

The same harness as ``test_properties`` (the real service over the one store on
memory, SQLite and PostgreSQL, a fake clock, restarts that reload from the
database), with a topic ``billing`` and two queues bound to it: ``all`` (no
filter, small ``max_items`` with the refuse rule, so some topic publishes are
refused) and ``eu`` (``attributes.region = "eu" OR attributes:vip``). Rules:
publishes to the topic by its publisher and by a stranger (refused), with
random attributes (sometimes a forged reserved one: refused), workers
subscribing to either queue, acks and nacks of held items, lock timeouts that
dead-letter, and restarts. ``all`` keeps acked items for 45 s
(``pubsub#queue_retain_acked``): its owner seeks to a time, takes snapshots and
seeks to them (one that does not exist: refused), and time ends retention.

After every step it checks:

- **fan-out**: every item the topic accepted is in every matching bound queue
  exactly once: waiting or locked there, in its dead-letter node, or acked
  (the queue's ledger's last word); it never reached a queue whose filter it
  does not match (no ``published`` row there); each copy's ``published`` row names
  the topic, and the queue's ``filtered`` rows (a count per committed batch) add
  up to exactly the accepted items its filter kept out;
- **refusals change nothing**: a refused publish to the topic left the topic,
  both queues and the ledger exactly as they were;
- **a seek never loses an unacked item**: every item waiting or locked before a
  seek is waiting or locked after it, a locked one by the same holder;
- **retained items are not delivered** unless a seek brought them back: after
  an item's ack, its next delivery comes only after a ``replayed`` row;
- **reload**: after a restart the store equals the one that was running
  (retained items and snapshots included);
- **the topic index** (each topic's bindings with compiled filters, a cache in
  the store) equals a recomputation from the nodes' configs, also after ``eu``'s
  owner writes its filter another way or sets one that is refused.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from tests.kit import FakeClock
from tests.kit.bindings import assert_index_exact
from tests.kit.stores import PROPERTY_BACKENDS, example_openers
from xmpp_queue.core.errors import PubSubError
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import Actor, Affiliation, PageRequest
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.core.topic_filter import matches
from xmpp_queue.storage.store import StateStore

from .test_properties import EXAMPLES, SETTINGS
from .test_properties import snapshot as queue_snapshot


async def snapshot(store: StateStore) -> tuple[Any, ...]:
    """The queue machine's snapshot plus every node's retained items and snapshots."""
    nodes, items, subs, affs, ledger = await queue_snapshot(store)
    async with store.transaction() as tx:
        retained = {n.node_id: await tx.items.retained(n.node_id) for n in nodes}
        taken = {n.node_id: await tx.nodes.snapshots(n.node_id) for n in nodes}
    return nodes, items, subs, affs, ledger, retained, taken


TOPIC = "billing"
FILTER = 'attributes.region = "eu" OR attributes:vip'
QUEUES = {"all": "", "eu": FILTER}
FILTER_FORMS = (FILTER, 'attributes:vip OR attributes.region = "eu"', 'attributes.region == "eu"')
"""``eu``'s filter as it is, the same filter reordered, and one that does not parse."""
OWNER = Actor("owner@example.org/desk")
PUB = Actor("pub@example.org/engine")
ADMIN = Actor("admin@example.org/console")
STRANGER = Actor("eve@elsewhere.example/x")
WORKERS = tuple(Actor(f"w{n}@example.org/r{n}") for n in range(1, 3))
IN_QUEUE = {
    EventKind.PUBLISHED,
    EventKind.DELIVERED,
    EventKind.UNLOCKED,
    EventKind.EXPIRED,
    EventKind.REPLAYED,
}
GONE = {
    EventKind.ACKED,
    EventKind.RETRACTED,
    EventKind.PURGED,
    EventKind.DROPPED,
    EventKind.RETENTION_ENDED,
}
NOT_A_MOVE = {
    EventKind.DEDUPLICATED,
    EventKind.FILTERED,
    EventKind.EXTENDED,
    EventKind.SNAPSHOT,
}
RETAINING = "all"  # the queue that keeps acked items for RETAIN seconds
RETAIN = "45"

Opener = Callable[[], Awaitable[StateStore]]
Reopener = Callable[[], Awaitable[StateStore]] | None


class TopicMachine(RuleBasedStateMachine):
    open_store: Opener
    reopen_store: Reopener = None

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.ids = itertools.count(1)
        self.subids = itertools.count(1)
        self.accepted: dict[str, dict[str, str]] = {}  # topic item id -> attributes
        self.store = self.run(type(self).open_store())
        self.service = self._service()
        self.last: tuple[Any, ...] | None = None

    def run(self, coroutine: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(coroutine)

    def _service(self) -> PubSubService:
        service = PubSubService(
            self.store,
            self.clock,
            lambda: f"sub{next(self.subids)}",
            ServiceSettings(
                admins=frozenset({ADMIN.bare}), access=ServiceAccess.for_domain("example.org")
            ),
        )
        self.run(service.start())
        return service

    def attempt(self, call: Callable[[], Awaitable[Any]]) -> Any:
        before = self.last if self.last is not None else self.run(snapshot(self.store))
        try:
            return self.run(call())
        except PubSubError:
            assert self.run(snapshot(self.store)) == before, "a refused operation changed state"
            return None

    def teardown(self) -> None:
        try:
            if type(self).reopen_store is not None:
                self.restart()
            self.run(self.service.stop())
            self.run(self.store.close())
        finally:
            self.loop.close()

    @initialize(max_items=st.sampled_from(["3", "6"]))
    def make_topic(self, max_items: str) -> None:
        self.run(self.service.create_node(OWNER, TOPIC, {"pubsub#max_items": ["4"]}))
        self.run(
            self.service.set_node_affiliations(OWNER, TOPIC, [(PUB.bare, Affiliation.PUBLISHER)])
        )
        for queue, text in QUEUES.items():
            config = {
                "pubsub#queue": ["1"],
                "pubsub#queue_topic": [TOPIC],
                "pubsub#queue_filter": [text],
                "pubsub#max_items": [max_items if queue == "all" else "100"],
                "pubsub#queue_lock_timeout": ["30"],
                "pubsub#queue_max_deliveries": ["2"],
                "pubsub#queue_retry_delay": ["0"],
                "pubsub#queue_retain_acked": [RETAIN if queue == RETAINING else "0"],
            }
            self.run(self.service.create_node(OWNER, queue, config))
            members = [(w.bare, Affiliation.MEMBER) for w in WORKERS]
            self.run(self.service.set_node_affiliations(OWNER, queue, members))

    @rule(
        actor=st.sampled_from((PUB, PUB, PUB, STRANGER)),
        region=st.sampled_from([None, "eu", "us"]),
        vip=st.booleans(),
        forged=st.integers(0, 15),
        count=st.sampled_from([1, 1, 2]),
    )
    def publish(self, actor: Actor, region: str | None, vip: bool, forged: int, count: int) -> None:
        attributes: dict[str, str] = {}
        if region:
            attributes["region"] = region
        if vip:
            attributes["vip"] = "1"
        if forged == 0:
            attributes["delivery-attempt"] = "1"  # reserved: the whole publish is refused
        ids = [f"t{next(self.ids)}" for _ in range(count)]
        if count == 1:
            call = lambda: self.service.publish(  # noqa: E731
                actor, TOPIC, ids[0], "<ev/>", 5, attributes=attributes
            )
        else:
            from xmpp_queue.core.model import NewItem

            news = [NewItem(i, "<ev/>", 5, attributes) for i in ids]
            call = lambda: self.service.publish_items(actor, TOPIC, news)  # noqa: E731
        if self.attempt(call) is not None:
            for item_id in ids:
                self.accepted[item_id] = attributes

    @rule(worker=st.sampled_from(WORKERS), queue=st.sampled_from(sorted(QUEUES)))
    def subscribe(self, worker: Actor, queue: str) -> None:
        self.attempt(
            lambda: self.service.subscribe(
                worker, queue, worker.jid, {"pubsub#queue_requests": ["2"]}
            )
        )

    @rule(
        worker=st.sampled_from(WORKERS), queue=st.sampled_from(sorted(QUEUES)), nack=st.booleans()
    )
    def finish_held(self, worker: Actor, queue: str, nack: bool) -> None:
        async def held() -> list[str]:
            async with self.store.transaction() as tx:
                return [i.item_id for i in await tx.items.locked(queue) if i.lock_jid == worker.jid]

        for item_id in self.run(held())[:1]:
            verb = self.service.unlock if nack else self.service.retract
            self.attempt(lambda: verb(worker, queue, item_id))  # noqa: B023 (run at once)

    def _unacked(self) -> dict[str, str | None]:
        """Item id -> lock holder (None: waiting) of the retaining queue."""

        async def read() -> dict[str, str | None]:
            async with self.store.transaction() as tx:
                page = await tx.items.page(RETAINING, PageRequest())
                return {i.item_id: i.lock_jid for i in page.items}

        return self.run(read())  # type: ignore[no-any-return]

    def _seek_keeps_unacked(self, call: Callable[[], Awaitable[Any]]) -> None:
        before = self._unacked()
        self.attempt(call)
        after = self._unacked()
        for item_id, holder in before.items():
            assert item_id in after, ("a seek lost an unacked item", item_id)
            if holder is not None:
                assert after[item_id] == holder, ("a seek moved a lock", item_id)

    @rule(back=st.sampled_from([0, 15, 40, 1000]))
    def seek_to_a_time(self, back: int) -> None:
        to = self.clock() - timedelta(seconds=back)
        self._seek_keeps_unacked(lambda: self.service.replay.seek_time(OWNER, RETAINING, to))

    @rule(name=st.sampled_from(["s1", "s2"]))
    def take_snapshot(self, name: str) -> None:
        self.attempt(lambda: self.service.replay.take_snapshot(OWNER, RETAINING, name))

    @rule(name=st.sampled_from(["s1", "s2", "missing"]))
    def seek_to_a_snapshot(self, name: str) -> None:
        self._seek_keeps_unacked(lambda: self.service.replay.seek_snapshot(OWNER, RETAINING, name))

    @invariant()
    def retained_items_are_delivered_only_after_a_replay(self) -> None:
        state = self.run(snapshot(self.store))
        acked: set[tuple[str, str]] = set()
        for event in state[4]:
            key = (event.node, event.item_id)
            if event.kind is EventKind.ACKED:
                acked.add(key)
            elif event.kind is EventKind.REPLAYED:
                assert key in acked, ("replayed without an ack", key)
                acked.discard(key)
            elif event.kind is EventKind.DELIVERED:
                assert key not in acked, ("a retained item was delivered", key)
            elif event.kind is EventKind.RETENTION_ENDED:
                assert key in acked and event.node == RETAINING, key
        retained = {i.item_id for i in state[5].get(RETAINING, ())}
        assert retained <= {item for node, item in acked if node == RETAINING}
        assert not any(state[5].get(q) for q in QUEUES if q != RETAINING)

    @rule(text=st.sampled_from(FILTER_FORMS))
    def refilter(self, text: str) -> None:
        """The owner sets ``eu``'s filter again: the same filter written either way
        (the store's topic index must follow), or one that does not parse (refused)."""
        self.attempt(
            lambda: self.service.configure_node(OWNER, "eu", {"pubsub#queue_filter": [text]})
        )

    @invariant()
    def the_topic_index_equals_the_nodes_bindings(self) -> None:
        assert_index_exact(self.store.state)

    @rule(seconds=st.sampled_from([10, 31]))
    def time_passes(self, seconds: int) -> None:
        self.clock.now += timedelta(seconds=seconds)
        self.run(self.service.tick())

    @rule()
    def restart(self) -> None:
        if type(self).reopen_store is None:
            return
        live = self.run(snapshot(self.store))
        self.run(self.service.stop())
        self.run(self.store.close())
        reopen = type(self).reopen_store
        assert reopen is not None
        self.store = self.run(reopen())
        self.service = self._service()
        assert self.run(snapshot(self.store)) == live, "the reloaded store differs"

    @invariant()
    def every_topic_item_is_once_in_every_matching_queue(self) -> None:
        state = self.run(snapshot(self.store))
        self.last = state
        _, items, _, _, ledger, _, _ = state
        topic_ids = {i.item_id for i in items.get(TOPIC, ())}
        for queue, text in QUEUES.items():
            dead = f"{queue}/dead-letter"
            in_queue = {i.item_id for i in items.get(queue, ())}
            in_dead = {i.item_id for i in items.get(dead, ())}
            last: dict[str, EventKind] = {}
            published: set[str] = set()
            filtered = 0
            for event in ledger:
                if event.node != queue:
                    continue
                if event.kind is EventKind.PUBLISHED:
                    published.add(event.item_id)
                    assert event.reason == TOPIC, event  # a copy names its topic
                if event.kind is EventKind.FILTERED:
                    assert (event.item_id, event.reason) == ("", TOPIC), event
                    filtered += event.deliveries
                if event.kind not in NOT_A_MOVE:
                    last[event.item_id] = event.kind
            for item_id, attributes in self.accepted.items():
                if matches(text, attributes):
                    places = (
                        (item_id in in_queue) + (item_id in in_dead) + (last.get(item_id) in GONE)
                    )
                    assert places == 1, (queue, item_id, places, last.get(item_id))
                    if item_id in in_queue:
                        assert last[item_id] in IN_QUEUE, (queue, item_id, last[item_id])
                else:
                    assert item_id not in published | in_queue | in_dead, (queue, item_id)
            kept_out = sum(not matches(text, a) for a in self.accepted.values())
            assert filtered == kept_out, (queue, filtered, kept_out)
            assert in_queue | in_dead | published <= set(self.accepted), queue
        assert topic_ids <= set(self.accepted)


def _machine(open_store: Opener, reopen_store: Reopener) -> type[TopicMachine]:
    return type(
        "TopicMachineOnBackend",
        (TopicMachine,),
        {"open_store": staticmethod(open_store), "reopen_store": staticmethod(reopen_store)},
    )


DATABASE_SETTINGS = settings(SETTINGS, max_examples=max(1, EXAMPLES // 2))
"""On a database each step commits for real (about 0.3 s an example on PostgreSQL): half
the examples keep the suite in its time budget; the memory run keeps them all, and
XMPP_QUEUE_PROPERTY_EXAMPLES raises both."""


def test_topics_keep_their_promises_in_memory() -> None:
    async def open_memory() -> StateStore:
        return StateStore.in_memory()

    run_state_machine_as_test(_machine(open_memory, None), settings=SETTINGS)


@pytest.mark.parametrize("backend", PROPERTY_BACKENDS)
def test_topics_keep_their_promises_on_a_database(
    backend: str, request: pytest.FixtureRequest
) -> None:
    open_db, reopen_db = example_openers(backend, request)
    run_state_machine_as_test(_machine(open_db, reopen_db), settings=DATABASE_SETTINGS)
