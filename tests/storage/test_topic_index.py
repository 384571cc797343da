"""The store's topic index (``storage/topic_index.py``) follows every change of a binding.

The index caches each topic's bound queues with their compiled filters between
changes, so a publish neither looks the queues up nor parses a filter. A cache
may never disagree with the store: after every step below, the index is compared
with a recomputation from the nodes' configs (``tests/kit/bindings.py``), and the
publishes that follow show fan-out using what the index holds. The steps: binding
and unbinding through ``pubsub#queue_topic``/``pubsub#queue_filter``, a change of
another field, a queue's deletion and expiry, a topic's deletion, undo (a
savepoint rolled back, a failing operation, a failed commit, a transaction left
without commit) and a restart that loads the index from the database.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.kit import ADMIN, ALICE, OWNER, PUB, FakeClock, build_service
from tests.kit.bindings import assert_index_exact, recomputed
from tests.kit.stores import SQL_BACKENDS, empty_database
from xmpp_queue.core.errors import StorageUnavailable
from xmpp_queue.core.model import Affiliation, Node, NodeConfig
from xmpp_queue.core.service import PubSubService
from xmpp_queue.core.topic_bindings import Unparsable, binding_of
from xmpp_queue.core.topic_filter import FilterSyntaxError
from xmpp_queue.storage.backend_memory import MemoryBackend
from xmpp_queue.storage.store import StateStore

EU = 'attributes.region = "eu"'
US = 'attributes.region = "us"'


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def service(clock: FakeClock) -> AsyncIterator[PubSubService]:
    svc = build_service(StateStore.in_memory(), clock)
    await svc.start()
    yield svc
    await svc.stop()


def state_of(service: PubSubService) -> StateStore:
    store = service.store
    assert isinstance(store, StateStore)
    return store


def bound(service: PubSubService, topic: str = "billing") -> list[tuple[str, str]]:
    """(queue, filter text) per binding of *topic*, as fan-out will read them; checks
    first that the whole index equals its recomputation from the nodes."""
    state = state_of(service).state
    assert_index_exact(state)
    return [(b.queue.node_id, b.queue.config.queue_filter) for b in state.bindings(topic)]


async def topic(service: PubSubService, node: str = "billing") -> None:
    await service.create_node(OWNER, node, {})
    await service.set_node_affiliations(OWNER, node, [(PUB.bare, Affiliation.PUBLISHER)])


async def queue(service: PubSubService, node: str, to: str = "billing", filt: str = "") -> None:
    values = {"pubsub#queue": ["1"], "pubsub#queue_topic": [to], "pubsub#queue_filter": [filt]}
    await service.create_node(OWNER, node, values)


async def configure(service: PubSubService, node: str, **fields: str) -> None:
    await service.configure_node(OWNER, node, {f"pubsub#{k}": [v] for k, v in fields.items()})


async def items_of(service: PubSubService, node: str) -> list[str]:
    return [i.item_id for i in (await service.get_items(ADMIN, node)).items]


async def publish(service: PubSubService, item_id: str, region: str) -> None:
    await service.publish(PUB, "billing", item_id, "<e/>", 4, attributes={"region": region})


async def test_binding_changes_through_configuration_are_followed(
    service: PubSubService,
) -> None:
    await topic(service)
    await topic(service, "audit")
    assert bound(service) == []
    await queue(service, "q", filt=EU)
    assert bound(service) == [("q", EU)]
    await configure(service, "q", queue_filter=US)  # a new filter
    assert bound(service) == [("q", US)]
    await publish(service, "e1", "eu")
    await publish(service, "u1", "us")
    assert await items_of(service, "q") == ["u1"]
    await configure(service, "q", max_items="7")  # another field: the node value changes
    assert bound(service) == [("q", US)]
    assert state_of(service).state.bindings("billing")[0].queue.config.max_items == 7
    await queue(service, "a-first")  # no filter; bindings are ordered by queue id
    assert bound(service) == [("a-first", ""), ("q", US)]
    await configure(service, "q", queue_topic="audit")  # moved to another topic
    assert bound(service) == [("a-first", "")]
    assert bound(service, "audit") == [("q", US)]
    await configure(service, "a-first", queue_topic="")  # unbound
    assert bound(service) == []
    await publish(service, "u2", "us")
    assert await items_of(service, "a-first") == []
    await configure(service, "a-first", queue_topic="billing", queue_filter=EU)  # bound again
    assert bound(service) == [("a-first", EU)]


async def test_deleting_a_queue_or_its_topic_leaves_no_binding(service: PubSubService) -> None:
    await topic(service)
    for node in ("q1", "q2", "q3"):
        await queue(service, node, filt=EU if node == "q2" else "")
    await service.delete_node(OWNER, "q1")
    assert bound(service) == [("q2", EU), ("q3", "")]
    await service.delete_node(OWNER, "billing")
    assert bound(service) == []
    await topic(service)  # a new topic of the same name does not feed the old queues
    await publish(service, "e1", "eu")
    assert bound(service) == []
    assert await items_of(service, "q2") == []


async def test_an_expired_queue_leaves_no_binding(service: PubSubService, clock: FakeClock) -> None:
    await topic(service)
    values = {
        "pubsub#queue": ["1"],
        "pubsub#queue_topic": ["billing"],
        "pubsub#queue_expire_after": ["60"],
    }
    await service.create_node(OWNER, "idle", values)
    await queue(service, "kept")
    await service.set_node_affiliations(OWNER, "idle", [(ALICE.bare, Affiliation.MEMBER)])
    await service.subscribe(ALICE, "idle", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    subid = (await service.own_subscriptions(ALICE, "idle"))[0].subid
    await service.unsubscribe(ALICE, "idle", ALICE.jid, subid)
    assert bound(service) == [("idle", ""), ("kept", "")]
    clock.advance(61)
    await service.sweep()
    assert bound(service) == [("kept", "")]


async def test_a_rolled_back_savepoint_puts_the_bindings_back() -> None:
    store = StateStore.in_memory()
    topic_node = Node("billing", NodeConfig(), FakeClock()(), OWNER.bare)
    eu = dataclasses.replace(
        topic_node, node_id="eu", config=NodeConfig(queue=True, queue_topic="billing")
    )
    async with store.transaction() as tx:
        await tx.nodes.add(topic_node)
        await tx.nodes.add(eu)
        await tx.commit()
    assert [b.queue for b in store.state.bindings("billing")] == [eu]
    async with store.transaction() as tx:
        mark = tx.savepoint()  # one operation rebinds, adds, removes, then is undone
        await tx.nodes.update_config("eu", dataclasses.replace(eu.config, queue_filter=EU))
        await tx.nodes.add(dataclasses.replace(eu, node_id="us"))
        await tx.nodes.remove("billing")
        await tx.nodes.update_config("us", dataclasses.replace(eu.config, queue_topic="audit"))
        assert [b.queue.node_id for b in store.state.bindings("audit")] == ["us"]
        assert_index_exact(store.state)
        mark.rollback()
        assert_index_exact(store.state)
        assert [b.queue for b in store.state.bindings("billing")] == [eu]
        assert store.state.bindings("audit") == ()
        mark = tx.savepoint()  # kept this time, then the whole transaction is left
        await tx.nodes.remove("eu")
        mark.release()
        assert store.state.bindings("billing") == ()
    assert_index_exact(store.state)  # left without commit: rolled back
    assert [b.queue for b in store.state.bindings("billing")] == [eu]


async def test_a_failing_operation_leaves_the_bindings_as_they_were(
    service: PubSubService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A topic's deletion unbinds its queues, then fails: its savepoint is undone."""
    await topic(service)
    await queue(service, "q", filt=EU)
    policy = service._types.of(await service._ctx.read(lambda w: w.tx.nodes.get("billing")))

    async def broken(*args: object) -> None:
        raise RuntimeError("a bug after the unbinding")

    monkeypatch.setattr(policy, "delete", broken)
    with pytest.raises(RuntimeError):
        await service.delete_node(OWNER, "billing")
    assert bound(service) == [("q", EU)]
    monkeypatch.undo()
    await publish(service, "e1", "eu")
    assert await items_of(service, "q") == ["e1"]


async def test_a_failed_commit_leaves_the_bindings_as_they_were(
    service: PubSubService,
) -> None:
    await topic(service)
    await queue(service, "q", filt=EU)
    backend = state_of(service).backend
    assert isinstance(backend, MemoryBackend)
    backend.fail_next = 1
    state_of(service).health.retry_for = 0.0  # the failure lasts: the commit fails
    with pytest.raises(StorageUnavailable):
        await configure(service, "q", queue_topic="")
    assert bound(service) == [("q", EU)]
    await publish(service, "e1", "eu")
    assert await items_of(service, "q") == ["e1"]


def test_a_filter_that_no_longer_parses_fails_the_publish_loudly() -> None:
    """Filters are checked when set; one edited into the database by hand is kept as
    an error to raise at publish, not as a filter keeping every item or none."""
    node = Node(
        "q",
        NodeConfig(queue=True, queue_topic="t", queue_filter="region = eu"),
        FakeClock()(),
        OWNER.bare,
    )
    binding = binding_of(node)
    assert isinstance(binding.accepts, Unparsable)
    with pytest.raises(FilterSyntaxError):
        binding.accepts({"region": "eu"})


@pytest.fixture(params=SQL_BACKENDS)
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await empty_database(request.param, request, tmp_path)


async def test_a_restart_loads_the_same_bindings(url: str) -> None:
    clock = FakeClock()
    service = build_service(await StateStore.open(url), clock)
    await service.start()
    await topic(service)
    await queue(service, "q1", filt=EU)
    await queue(service, "q2")
    await configure(service, "q2", queue_topic="")
    await queue(service, "q3", filt=US)
    before = recomputed(state_of(service).state)
    await service.stop()
    await state_of(service).close()
    service = build_service(await StateStore.open(url), clock)
    await service.start()
    try:
        assert bound(service) == [("q1", EU), ("q3", US)]
        assert recomputed(state_of(service).state) == before
        await publish(service, "u1", "us")
        assert await items_of(service, "q3") == ["u1"]
        assert await items_of(service, "q1") == []
    finally:
        await service.stop()
        await state_of(service).close()
