"""The ``[access]`` policy in the core: who may use the service, who may create nodes,
the access models new nodes get, and that a refused stranger changes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.kit import ADMIN, ALICE, OWNER, PUB, FakeClock, build_service
from xmpp_queue.core.effects import ItemNotice
from xmpp_queue.core.errors import ClosedNode
from xmpp_queue.core.model import AccessModel, Actor, Affiliation, NodeConfig
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import (
    CreateForbidden,
    JidSet,
    ServiceAccess,
    ServiceAccessDenied,
    parent_domain,
)
from xmpp_queue.storage.store import StateStore

STRANGER = Actor("mallory@elsewhere.example/x")
PARTNER = Actor("bot@partner.example/r")


async def make_service(clock: FakeClock, access: ServiceAccess) -> PubSubService:
    svc = build_service(
        StateStore.in_memory(),
        clock,
        settings=ServiceSettings(
            default_config=NodeConfig(), admins=frozenset({ADMIN.bare}), access=access
        ),
    )
    await svc.start()
    return svc


@pytest.fixture
async def svc(clock: FakeClock) -> AsyncIterator[PubSubService]:
    service = await make_service(clock, ServiceAccess.for_domain("example.org"))
    yield service
    await service.stop()


def test_the_default_users_are_the_parent_domain_of_the_component() -> None:
    assert parent_domain("queue.example.org") == "example.org"
    assert parent_domain("localhost") == "localhost"
    policy = ServiceAccess.for_domain("example.org")
    assert policy.admits(ALICE, frozenset())
    assert not policy.admits(STRANGER, frozenset())
    # a domain matches its users, not its subdomains' users
    assert not policy.admits(Actor("x@sub.example.org/r"), frozenset())
    assert policy.admits(STRANGER, frozenset({STRANGER.bare}))  # admins always


def test_listed_jids_domains_and_the_federation() -> None:
    users = JidSet.of(["example.org", "bot@partner.example"])
    assert users.contains(PARTNER.jid) and users.contains("ALICE@Example.org/r")
    assert not users.contains("other@partner.example/r")
    assert JidSet.of(["*"]).contains(STRANGER.jid)
    assert ServiceAccess().admits(ALICE, frozenset()) is False  # in code: admins only


async def _snapshot(service: PubSubService) -> tuple[object, ...]:
    async with service.store.transaction() as tx:
        nodes = await tx.nodes.all()
        return (
            nodes,
            [await tx.items.latest(n.node_id, 100) for n in nodes],
            [await tx.subscriptions.for_node(n.node_id) for n in nodes],
            [await tx.affiliations.for_node(n.node_id) for n in nodes],
        )


async def test_a_stranger_is_refused_every_operation_and_changes_nothing(
    svc: PubSubService,
) -> None:
    await svc.create_node(OWNER, "news", {})
    await svc.create_node(OWNER, "jobs", {"pubsub#queue": ["1"]})
    await svc.publish(OWNER, "news", "n1", "<a/>", 4)
    await svc.publish(OWNER, "jobs", "j1", "<a/>", 4)
    before = await _snapshot(svc)
    s = STRANGER
    calls = [
        lambda: svc.create_node(s, "mine", {}),
        lambda: svc.configure_node(s, "news", {"pubsub#title": ["x"]}),
        lambda: svc.get_config(s, "news"),
        lambda: svc.delete_node(s, "news"),
        lambda: svc.purge_node(s, "news"),
        lambda: svc.publish(s, "news", "x", "<a/>", 4),
        lambda: svc.retract(s, "news", "n1"),
        lambda: svc.subscribe(s, "news", s.jid),
        lambda: svc.subscribe(s, "jobs", s.jid, {"pubsub#queue_requests": ["1"]}),
        lambda: svc.unsubscribe(s, "news", s.jid),
        lambda: svc.get_items(s, "news"),
        lambda: svc.get_node(s, "news"),
        lambda: svc.list_nodes(s),
        lambda: svc.own_subscriptions(s),
        lambda: svc.own_affiliations(s),
        lambda: svc.get_node_subscriptions(s, "news"),
        lambda: svc.get_node_affiliations(s, "news"),
        lambda: svc.set_node_affiliations(s, "news", [(s.bare, Affiliation.OWNER)]),
        lambda: svc.unlock(s, "jobs", "j1"),
        lambda: svc.extend_lock(s, "jobs", "j1"),
        lambda: svc.get_subscription_options(s, "news", s.jid),
    ]
    for call in calls:
        with pytest.raises(ServiceAccessDenied):
            await call()
    with pytest.raises(ServiceAccessDenied):
        svc.default_config(s)
    with pytest.raises(ServiceAccessDenied):
        svc.default_subscribe_options(s, True)
    assert await _snapshot(svc) == before


async def test_node_creation_defaults_to_the_parent_domain_even_when_open_to_all(
    clock: FakeClock,
) -> None:
    """users = "*" lets a stranger use nodes opened to it, not create nodes."""
    open_users = ServiceAccess(JidSet.of(["*"]), JidSet.of(["example.org"]))
    service = await make_service(clock, open_users)
    try:
        await service.create_node(OWNER, "news", {})
        with pytest.raises(CreateForbidden):
            await service.create_node(STRANGER, "mine", {})
        await service.subscribe(STRANGER, "news", STRANGER.jid)  # an open node: allowed
        await service.create_node(OWNER, "jobs", {"pubsub#queue": ["1"]})
        with pytest.raises(ClosedNode):  # a queue is whitelisted by default
            await service.subscribe(
                STRANGER, "jobs", STRANGER.jid, {"pubsub#queue_requests": ["1"]}
            )
    finally:
        await service.stop()


async def test_creation_by_admins_only_and_by_every_user(clock: FakeClock) -> None:
    admins_only = await make_service(clock, ServiceAccess(JidSet.of(["example.org"]), JidSet()))
    try:
        with pytest.raises(CreateForbidden):
            await admins_only.create_node(OWNER, "n", {})
        await admins_only.create_node(ADMIN, "n", {})
    finally:
        await admins_only.stop()
    everyone = await make_service(clock, ServiceAccess.everyone())
    try:
        await everyone.create_node(STRANGER, "n", {})
    finally:
        await everyone.stop()


async def test_8_1_new_queues_are_whitelisted_and_ordinary_nodes_keep_their_default(
    svc: PubSubService,
) -> None:
    """XEP-0060 §4.5 whitelist: owner, publishers and members only (the owner
    manages members with the §8.9 affiliation commands)."""
    await svc.create_node(OWNER, "news", {})
    await svc.create_node(OWNER, "jobs", {"pubsub#queue": ["1"]})
    assert (await svc.get_config(OWNER, "news")).access_model is AccessModel.OPEN
    assert (await svc.get_config(OWNER, "jobs")).access_model is AccessModel.WHITELIST
    with pytest.raises(ClosedNode):
        await svc.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    with pytest.raises(ClosedNode):
        await svc.get_items(ALICE, "jobs")
    await svc.set_node_affiliations(OWNER, "jobs", [(ALICE.bare, Affiliation.MEMBER)])
    await svc.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    # An owner may open a queue deliberately, at creation or later.
    await svc.create_node(
        OWNER, "open-jobs", {"pubsub#queue": ["1"], "pubsub#access_model": ["open"]}
    )
    await svc.subscribe(PUB, "open-jobs", PUB.jid, {"pubsub#queue_requests": ["1"]})


async def test_8_2_a_node_that_becomes_a_queue_takes_the_queue_access_model(
    svc: PubSubService,
) -> None:
    await svc.create_node(OWNER, "n", {})
    await svc.configure_node(OWNER, "n", {"pubsub#queue": ["1"]})
    assert (await svc.get_config(OWNER, "n")).access_model is AccessModel.WHITELIST
    await svc.create_node(OWNER, "m", {})
    await svc.configure_node(OWNER, "m", {"pubsub#queue": ["1"], "pubsub#access_model": ["open"]})
    assert (await svc.get_config(OWNER, "m")).access_model is AccessModel.OPEN


async def test_a_dead_letter_node_is_as_private_as_its_queue(
    svc: PubSubService, clock: FakeClock
) -> None:
    values = {"pubsub#queue": ["1"], "pubsub#queue_max_deliveries": ["1"]}
    await svc.create_node(OWNER, "jobs", values)
    await svc.set_node_affiliations(OWNER, "jobs", [(ALICE.bare, Affiliation.MEMBER)])
    await svc.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    await svc.publish(OWNER, "jobs", "j1", "<secret/>", 9)
    await svc.unlock(ALICE, "jobs", "j1")  # past the limit: dead-lettered
    dead = await svc.get_config(OWNER, "jobs/dead-letter")
    assert dead.access_model is AccessModel.WHITELIST
    with pytest.raises(ClosedNode):
        await svc.get_items(PUB, "jobs/dead-letter")


async def test_7_1_2_the_service_may_expose_publishers_on_every_node(clock: FakeClock) -> None:
    """[access] expose_publishers: every item carries its publisher's bare JID, in
    notifications and retrieval, whatever the node's pubsub#itemreply."""
    service = build_service(
        StateStore.in_memory(),
        clock,
        settings=ServiceSettings(
            access=ServiceAccess.for_domain("example.org"), expose_publishers=True
        ),
    )
    await service.start()
    try:
        await service.create_node(OWNER, "news", {})
        await service.subscribe(ALICE, "news", ALICE.jid)
        out = await service.publish(OWNER, "news", "i1", "<a/>", 4)
        (notice,) = [e for e in out.effects if isinstance(e, ItemNotice)]
        assert notice.items[0].publisher == OWNER.bare
        page = await service.get_items(ALICE, "news")
        assert page.show_publisher and page.items[0].publisher == OWNER.jid
    finally:
        await service.stop()
