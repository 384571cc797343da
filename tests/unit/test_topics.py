"""Topics with subscriptions over the in-memory store: a queue bound to a topic
(``pubsub#queue_topic``) gets a copy of every item published there, filtered by
``pubsub#queue_filter`` (docs/queueing.md, "Topics and subscriptions")."""

from __future__ import annotations

import pytest

from tests.kit import ADMIN, ALICE, BOB, CAROL, EVE, OWNER, PUB, FakeClock
from tests.unit.test_message_model import ids
from xmpp_queue.core.effects import ConfigNotice, ItemNotice
from xmpp_queue.core.errors import Forbidden, InvalidNodeConfig, NodeFull, PubSubError
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import Affiliation, Urgency
from xmpp_queue.core.service import PubSubService
from xmpp_queue.core.topic_filter import FilterSyntaxError, compile_filter, matches

# --- the filter language -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "attributes", "expected"),
    [
        ('attributes.region = "eu"', {"region": "eu"}, True),
        ('attributes.region = "eu"', {"region": "us"}, False),
        ('attributes.region = "eu"', {}, False),
        ('attributes.region != "eu"', {"region": "us"}, True),
        ('attributes.region != "eu"', {}, True),
        ('attributes.region != "eu"', {"region": "eu"}, False),
        ('hasPrefix(attributes.sku, "bk-")', {"sku": "bk-12"}, True),
        ('hasPrefix(attributes.sku, "bk-")', {"sku": "cd-12"}, False),
        ('hasPrefix(attributes.sku, "bk-")', {}, False),
        ("attributes:vip", {"vip": ""}, True),
        ("attributes:vip", {}, False),
        ("NOT attributes:vip", {}, True),
        ('attributes:a AND attributes.b = "1"', {"a": "x", "b": "1"}, True),
        ('attributes:a AND attributes.b = "1"', {"a": "x", "b": "2"}, False),
        ("attributes:a OR attributes:b OR attributes:c", {"c": "x"}, True),
        ('(attributes:a OR attributes:b) AND NOT attributes.r = "x"', {"b": "1"}, True),
        ('(attributes:a OR attributes:b) AND NOT attributes.r = "x"', {"b": "1", "r": "x"}, False),
        ("attributes.`odd name` = 'v'", {"odd name": "v"}, True),
        ('attributes.q = "say \\"hi\\""', {"q": 'say "hi"'}, True),
        ("", {}, True),
    ],
)
def test_filters_follow_pubsub_syntax(
    text: str, attributes: dict[str, str], expected: bool
) -> None:
    assert matches(text, attributes) is expected


@pytest.mark.parametrize(
    ("text", "position", "reason"),
    [
        ('attributes.region = "eu" AND attributes:a OR attributes:b', 43, "mixed"),
        ("attributes.region = ", 21, "incomplete"),
        ('attributes.a = "x" AND', 20, "must follow AND"),
        ("region = 'eu'", 1, "unexpected"),
        ("not attributes:a", 1, "unexpected"),
        ('attributes.a == "x"', 15, "unexpected"),
        ("(attributes:a", 14, "incomplete"),
    ],
)
def test_a_bad_filter_names_its_position(text: str, position: int, reason: str) -> None:
    with pytest.raises(FilterSyntaxError) as caught:
        compile_filter(text)
    assert caught.value.position == position, str(caught.value)
    wanted = "cannot be mixed" if reason == "mixed" else reason
    assert wanted in str(caught.value)


def test_a_filter_past_pubsubs_length_limit_is_refused() -> None:
    with pytest.raises(FilterSyntaxError, match="256 bytes"):
        compile_filter(" OR ".join(f"attributes:k{n}" for n in range(40)))


# --- binding ---------------------------------------------------------------------------


async def topic(service: PubSubService, node: str = "billing", **config: str) -> str:
    values = {f"pubsub#{k}": [v] for k, v in config.items()}
    await service.create_node(OWNER, node, values)
    await service.set_node_affiliations(OWNER, node, [(PUB.bare, Affiliation.PUBLISHER)])
    return node


async def bound(
    service: PubSubService, node: str, to: str = "billing", owner=OWNER, **config: str
) -> str:  # type: ignore[no-untyped-def]
    values = {"pubsub#queue": ["1"], "pubsub#queue_topic": [to]}
    values |= {f"pubsub#{k}": [v] for k, v in config.items()}
    await service.create_node(owner, node, values)
    await service.set_node_affiliations(
        owner, node, [(a.bare, Affiliation.MEMBER) for a in (ALICE, BOB)]
    )
    return node


async def work(service: PubSubService, node: str, actor=ALICE, window: int = 5) -> None:  # type: ignore[no-untyped-def]
    await service.subscribe(actor, node, actor.jid, {"pubsub#queue_requests": [str(window)]})


async def items_of(service: PubSubService, node: str) -> list[str]:
    page = await service.get_items(ADMIN, node)
    return [i.item_id for i in page.items]


async def test_a_publish_to_a_topic_reaches_every_bound_queue_and_its_subscribers(
    service: PubSubService,
) -> None:
    await topic(service)
    await bound(service, "invoicing")
    await bound(service, "analytics")
    await work(service, "invoicing", ALICE)
    await work(service, "analytics", BOB)
    await service.subscribe(CAROL, "billing", CAROL.jid)
    out = await service.publish(PUB, "billing", "ev1", "<e/>", 4, attributes={"region": "eu"})
    by_node = {
        (e.to, e.node): [i.item_id for i in e.items]
        for e in out.effects
        if isinstance(e, ItemNotice)
    }
    assert by_node == {
        (CAROL.jid, "billing"): ["ev1"],
        (ALICE.jid, "invoicing"): ["ev1"],
        (BOB.jid, "analytics"): ["ev1"],
    }
    notices = [e for e in out.effects if isinstance(e, ItemNotice) and e.node == "invoicing"]
    assert dict(notices[0].items[0].headers)["region"] == "eu"
    # each queue's copy is its own: an ack in one leaves the other's
    await service.retract(ALICE, "invoicing", "ev1")
    assert await items_of(service, "invoicing") == []
    assert await items_of(service, "analytics") == ["ev1"]
    assert await items_of(service, "billing") == ["ev1"]


async def test_each_copy_gets_its_queues_schedule_and_dedup_window(
    service: PubSubService, clock: FakeClock
) -> None:
    await topic(service)
    await bound(service, "slow", queue_delay="30", queue_dedup_window="600")
    await bound(service, "fast")
    await service.publish(PUB, "billing", "ev1", "<e/>", 4, attributes={"Urgency": "high"})
    details = await service.queue_details(ADMIN, "slow")
    assert details.delayed == 1
    fast = await service.get_items(ADMIN, "fast")
    assert fast.items[0].priority == Urgency.HIGH
    await work(service, "slow", ALICE)
    clock.advance(31)
    assert ids((await service.tick()).effects) == ["ev1"]
    await service.retract(ALICE, "slow", "ev1")
    # the topic's id is the copy's id: a re-publish inside the window adds nothing there
    await service.publish(PUB, "billing", "ev1", "<e/>", 4)
    assert await items_of(service, "slow") == []
    assert await items_of(service, "fast") == ["ev1"]


async def test_a_filter_keeps_items_out_and_counts_them(service: PubSubService) -> None:
    await topic(service)
    await bound(service, "eu-only", queue_filter='attributes.region = "eu"')
    await bound(service, "all")
    for n, region in enumerate(["eu", "us", "us", "eu"]):
        await service.publish(PUB, "billing", f"e{n}", "<e/>", 4, attributes={"region": region})
    assert await items_of(service, "eu-only") == ["e0", "e3"]
    assert await items_of(service, "all") == ["e0", "e1", "e2", "e3"]
    async with service.store.transaction() as tx:
        rows = await tx.ledger.events("eu-only")
    # a counter, not a row per item: each publish here is its own batch, so two rows
    # of one; a copy's published row names its topic
    counted = [(e.item_id, e.deliveries, e.reason) for e in rows if e.kind is EventKind.FILTERED]
    assert counted == [("", 1, "billing"), ("", 1, "billing")]
    assert {e.reason for e in rows if e.kind is EventKind.PUBLISHED} == {"billing"}


async def test_a_bad_filter_is_refused_at_configuration_with_its_position(
    service: PubSubService,
) -> None:
    await topic(service)
    with pytest.raises(InvalidNodeConfig, match="position 21"):
        await bound(service, "q", queue_filter="attributes.region = ")
    await bound(service, "q")
    with pytest.raises(InvalidNodeConfig, match="pubsub#queue_filter"):
        await service.configure_node(OWNER, "q", {"pubsub#queue_filter": ["attributes.a ="]})
    ok = await service.configure_node(OWNER, "q", {"pubsub#queue_filter": ["attributes:a"]})
    assert ok.value.queue_filter == "attributes:a"


async def test_a_refusing_queue_refuses_the_whole_publish(service: PubSubService) -> None:
    """One bound queue full: the topic, the other queue and the ledger stay as they were."""
    await topic(service)
    await bound(service, "small", max_items="1")
    await bound(service, "big")
    await service.publish(PUB, "billing", "e1", "<e/>", 4)
    async with service.store.transaction() as tx:
        before = len(await tx.ledger.events())
    with pytest.raises(NodeFull):
        await service.publish(PUB, "billing", "e2", "<e/>", 4)
    assert await items_of(service, "billing") == ["e1"]
    assert await items_of(service, "big") == ["e1"]
    assert await items_of(service, "small") == ["e1"]
    async with service.store.transaction() as tx:
        assert len(await tx.ledger.events()) == before
    # a tighter attribute limit on one queue refuses too
    await bound(service, "strict", attributes_max="1")
    with pytest.raises(PubSubError):
        await service.publish(PUB, "billing", "e3", "<e/>", 4, attributes={"a": "1", "b": "2"})
    assert await items_of(service, "billing") == ["e1"]


async def test_binding_needs_the_right_to_subscribe_to_the_topic(service: PubSubService) -> None:
    await topic(service, "private", access_model="whitelist")
    await service.create_node(EVE, "evesq", {"pubsub#queue": ["1"]})
    with pytest.raises(InvalidNodeConfig, match="no node"):  # hidden from non-members
        await service.configure_node(EVE, "evesq", {"pubsub#queue_topic": ["private"]})
    await service.set_node_affiliations(OWNER, "private", [(EVE.bare, Affiliation.MEMBER)])
    out = await service.configure_node(EVE, "evesq", {"pubsub#queue_topic": ["private"]})
    assert out.value.queue_topic == "private"
    await topic(service, "asked", access_model="authorize")
    await service.create_node(EVE, "evesq2", {"pubsub#queue": ["1"]})
    with pytest.raises(Forbidden, match="approved"):
        await service.configure_node(EVE, "evesq2", {"pubsub#queue_topic": ["asked"]})


@pytest.mark.parametrize(
    ("target", "reason"),
    [("nowhere", "no node"), ("q", "itself"), ("other", "is a queue")],
)
async def test_a_queue_binds_only_to_another_ordinary_node(
    service: PubSubService, target: str, reason: str
) -> None:
    await service.create_node(OWNER, "other", {"pubsub#queue": ["1"]})
    await service.create_node(OWNER, "q", {"pubsub#queue": ["1"]})
    with pytest.raises(InvalidNodeConfig, match=reason):
        await service.configure_node(OWNER, "q", {"pubsub#queue_topic": [target]})


async def test_unbinding_stops_the_copies_and_a_topic_with_queues_stays_a_topic(
    service: PubSubService,
) -> None:
    await topic(service)
    await bound(service, "q")
    with pytest.raises(InvalidNodeConfig, match="bound"):
        await service.configure_node(OWNER, "billing", {"pubsub#queue": ["1"]})
    await service.configure_node(OWNER, "q", {"pubsub#queue_topic": [""]})
    await service.publish(PUB, "billing", "e1", "<e/>", 4)
    assert await items_of(service, "q") == []
    await service.configure_node(OWNER, "q", {"pubsub#queue_topic": ["billing"]})
    await service.publish(PUB, "billing", "e2", "<e/>", 4)
    assert await items_of(service, "q") == ["e2"]


async def test_deleting_a_topic_unbinds_its_queues_keeps_their_backlog_and_tells_them(
    service: PubSubService,
) -> None:
    await topic(service)
    await bound(service, "q")
    await work(service, "q", ALICE, window=1)
    await service.publish(PUB, "billing", "e1", "<e/>", 4)
    await service.publish(PUB, "billing", "e2", "<e/>", 4)
    out = await service.delete_node(OWNER, "billing")
    told = {e.to for e in out.effects if isinstance(e, ConfigNotice) and e.node == "q"}
    assert told == {ALICE.jid, OWNER.bare}
    assert await items_of(service, "q") == ["e1", "e2"]
    assert (await service.get_config(OWNER, "q")).queue_topic == ""
    # a new node of the same name is not silently fed to the old subscription
    await topic(service)
    await service.publish(PUB, "billing", "e3", "<e/>", 4)
    assert await items_of(service, "q") == ["e1", "e2"]
