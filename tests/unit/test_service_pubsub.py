"""PubSubService XEP-0060 use cases over the in-memory store (section numbers of XEP-0060)."""

from __future__ import annotations

import pytest

from tests.kit import ADMIN, ALICE, BOB, EVE, OWNER, PUB
from xmpp_queue.core.effects import (
    ConfigNotice,
    DeleteNotice,
    ItemNotice,
    PurgeNotice,
    RetractNotice,
)
from xmpp_queue.core.errors import (
    ClosedNode,
    Forbidden,
    InvalidJid,
    InvalidNodeConfig,
    InvalidSubId,
    ItemNotFound,
    NodeExists,
    NodeNotFound,
    NotSubscribed,
    Outcast,
    PayloadRequired,
    PayloadTooBig,
    PreconditionNotMet,
)
from xmpp_queue.core.model import (
    SYSTEM,
    Affiliation,
    PageRequest,
    SubscriptionState,
)
from xmpp_queue.core.service import PubSubService


async def make(service: PubSubService, node: str = "news", **config: str) -> str:
    values = {f"pubsub#{k}": [v] for k, v in config.items()}
    out = await service.create_node(OWNER, node, values)
    await service.set_node_affiliations(OWNER, node, [(PUB.bare, Affiliation.PUBLISHER)])
    return out.value


async def test_8_1_create_named_and_instant_nodes(service: PubSubService) -> None:
    assert (await service.create_node(OWNER, "news")).value == "news"
    instant = (await service.create_node(OWNER, None)).value
    assert instant and instant != "news"
    with pytest.raises(NodeExists):
        await service.create_node(ALICE, "news")
    owners = await service.get_node_affiliations(OWNER, "news")
    assert [(e.jid, e.affiliation) for e in owners] == [(OWNER.bare, Affiliation.OWNER)]


async def test_8_1_3_create_and_configure_rejects_bad_values(service: PubSubService) -> None:
    with pytest.raises(InvalidNodeConfig):
        await service.create_node(OWNER, "bad", {"pubsub#max_items": ["lots"]})
    with pytest.raises(NodeNotFound):
        await service.get_node(OWNER, "bad")


async def test_8_2_configure_is_for_owners_and_notifies_when_asked(
    service: PubSubService,
) -> None:
    await make(service, notify_config="1")
    await service.subscribe(ALICE, "news", ALICE.bare)
    with pytest.raises(Forbidden):
        await service.configure_node(PUB, "news", {"pubsub#title": ["x"]})
    out = await service.configure_node(OWNER, "news", {"pubsub#title": ["Headlines"]})
    assert out.value.title == "Headlines"
    assert [type(e) for e in out.effects] == [ConfigNotice]
    assert (await service.get_config(OWNER, "news")).title == "Headlines"


async def test_7_1_publish_notifies_subscribers_and_replaces_same_id(
    service: PubSubService,
) -> None:
    await make(service)
    await service.subscribe(ALICE, "news", ALICE.bare)
    out = await service.publish(PUB, "news", "a", "<p>1</p>", 8)
    assert out.value == "a"
    (notice,) = out.effects
    assert isinstance(notice, ItemNotice) and notice.to == ALICE.bare
    assert notice.items[0].payload == "<p>1</p>"
    await service.publish(PUB, "news", "a", "<p>2</p>", 8)
    page = await service.get_items(ALICE, "news")
    assert [(i.item_id, i.payload) for i in page.items] == [("a", "<p>2</p>")]
    generated = (await service.publish(PUB, "news", None, "<p/>", 4)).value
    assert generated and generated != "a"


async def test_7_1_3_publish_errors(service: PubSubService) -> None:
    await make(service, max_payload_size="10")
    with pytest.raises(Forbidden):
        await service.publish(EVE, "news", "x", "<p/>", 4)
    with pytest.raises(PayloadTooBig):
        await service.publish(PUB, "news", "x", "<p>" + "a" * 20 + "</p>", 27)
    with pytest.raises(PayloadRequired):
        await service.publish(PUB, "news", "x", None, 0)
    with pytest.raises(NodeNotFound):
        await service.publish(PUB, "nope", "x", "<p/>", 4)
    assert (await service.get_items(OWNER, "news")).items == ()


async def test_7_1_5_publish_options_preconditions(service: PubSubService) -> None:
    await make(service, access_model="whitelist")
    await service.publish(PUB, "news", "x", "<p/>", 4, {"pubsub#access_model": ["whitelist"]})
    with pytest.raises(PreconditionNotMet):
        await service.publish(PUB, "news", "y", "<p/>", 4, {"pubsub#access_model": ["open"]})


async def test_max_items_trims_the_oldest(service: PubSubService) -> None:
    await make(service, max_items="2")
    for i in range(4):
        await service.publish(PUB, "news", f"i{i}", "<p/>", 4)
    assert [i.item_id for i in (await service.get_items(OWNER, "news")).items] == ["i2", "i3"]


async def test_7_2_retract_notifies_when_asked_and_checks_rights(
    service: PubSubService,
) -> None:
    await make(service)
    await service.subscribe(ALICE, "news", ALICE.bare)
    await service.publish(PUB, "news", "a", "<p/>", 4)
    with pytest.raises(Forbidden):
        await service.retract(ALICE, "news", "a")
    out = await service.retract(PUB, "news", "a", notify=True)
    assert [type(e) for e in out.effects] == [RetractNotice]
    with pytest.raises(ItemNotFound):
        await service.retract(PUB, "news", "a")


async def test_6_5_items_all_max_by_id_and_paged(service: PubSubService) -> None:
    await make(service)
    for i in range(5):
        await service.publish(PUB, "news", f"i{i}", f"<p>{i}</p>", 8)
    assert [i.item_id for i in (await service.get_items(ALICE, "news", max_items=2)).items] == [
        "i3",
        "i4",
    ]
    by_id = await service.get_items(ALICE, "news", item_ids=["i1", "zz"])
    assert [i.item_id for i in by_id.items] == ["i1"]
    page = await service.get_items(ALICE, "news", page=PageRequest(max=2, after="i1"))
    assert [i.item_id for i in page.items] == ["i2", "i3"] and page.count == 5


async def test_6_1_subscribe_unsubscribe_and_errors(service: PubSubService) -> None:
    await make(service)
    sub = (await service.subscribe(ALICE, "news", ALICE.jid)).value
    assert sub.state is SubscriptionState.SUBSCRIBED and sub.subid
    with pytest.raises(InvalidJid):
        await service.subscribe(ALICE, "news", BOB.bare)
    with pytest.raises(NotSubscribed):
        await service.unsubscribe(BOB, "news", BOB.bare)
    with pytest.raises(InvalidSubId):
        await service.unsubscribe(ALICE, "news", ALICE.jid, "wrong")
    with pytest.raises(Forbidden):
        await service.unsubscribe(BOB, "news", ALICE.jid)
    await service.unsubscribe(ALICE, "news", ALICE.jid, sub.subid)
    assert await service.own_subscriptions(ALICE) == []


async def test_6_3_subscription_options(service: PubSubService) -> None:
    await make(service)
    sub = (await service.subscribe(ALICE, "news", ALICE.bare)).value
    await service.set_subscription_options(
        ALICE, "news", ALICE.bare, sub.subid, {"pubsub#deliver": ["0"]}
    )
    _, opts = await service.get_subscription_options(ALICE, "news", ALICE.bare)
    assert opts.deliver is False
    out = await service.publish(PUB, "news", "x", "<p/>", 4)
    assert out.effects == ()


async def test_4_5_whitelist_and_outcasts(service: PubSubService) -> None:
    await make(service, access_model="whitelist")
    with pytest.raises(ClosedNode):
        await service.subscribe(ALICE, "news", ALICE.bare)
    await service.set_node_affiliations(
        OWNER, "news", [(ALICE.bare, Affiliation.MEMBER), (EVE.bare, Affiliation.OUTCAST)]
    )
    await service.subscribe(ALICE, "news", ALICE.bare)
    with pytest.raises(Outcast):
        await service.subscribe(EVE, "news", EVE.bare)


async def test_4_5_authorize_access_pending_until_owner_approves(
    service: PubSubService,
) -> None:
    await make(service, access_model="authorize")
    out = await service.subscribe(ALICE, "news", ALICE.bare)
    assert out.value.state is SubscriptionState.PENDING
    assert [e.to for e in out.effects] == [OWNER.bare]  # type: ignore[union-attr]
    await service.set_node_subscriptions(
        OWNER, "news", [(ALICE.bare, SubscriptionState.SUBSCRIBED, None)]
    )
    subs = await service.own_subscriptions(ALICE, "news")
    assert subs[0].state is SubscriptionState.SUBSCRIBED


async def test_8_4_delete_and_8_5_purge_notify_subscribers(service: PubSubService) -> None:
    await make(service)
    await service.subscribe(ALICE, "news", ALICE.bare)
    await service.publish(PUB, "news", "a", "<p/>", 4)
    purge = await service.purge_node(OWNER, "news")
    assert purge.value == 1 and [type(e) for e in purge.effects] == [PurgeNotice]
    delete = await service.delete_node(OWNER, "news", redirect="xmpp:x?;node=new")
    assert delete.effects == (DeleteNotice(ALICE.bare, "news", "xmpp:x?;node=new"),)
    with pytest.raises(NodeNotFound):
        await service.get_node(OWNER, "news")


async def test_8_9_affiliations_keep_an_owner_and_admins_own_everything(
    service: PubSubService,
) -> None:
    await make(service)
    with pytest.raises(Forbidden):
        await service.set_node_affiliations(OWNER, "news", [(OWNER.bare, Affiliation.NONE)])
    await service.configure_node(ADMIN, "news", {"pubsub#title": ["by admin"]})
    assert [e.node for e in await service.own_affiliations(OWNER)] == ["news"]


async def test_8_9_2_4_the_last_owner_cannot_be_removed_but_a_service_node_needs_none(
    service: PubSubService,
) -> None:
    await service.create_node(OWNER, "owned")
    with pytest.raises(Forbidden):
        await service.set_node_affiliations(OWNER, "owned", [(OWNER.bare, Affiliation.NONE)])
    assert [e.jid for e in await service.get_node_affiliations(OWNER, "owned")] == [OWNER.bare]
    # A node the service created (admin command, dead letters) has no owner to keep:
    # an admin still manages its members.
    await service.create_node(SYSTEM, "service-made")
    await service.set_node_affiliations(ADMIN, "service-made", [(ALICE.bare, Affiliation.MEMBER)])
    entries = await service.get_node_affiliations(ADMIN, "service-made")
    assert [(e.jid, e.affiliation) for e in entries] == [(ALICE.bare, Affiliation.MEMBER)]
