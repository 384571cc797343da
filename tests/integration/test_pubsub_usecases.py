"""XEP-0060 use cases end to end (issue 2 item 6): real Prosody, the component as
users run it, ordinary slixmpp clients.

Test names carry the section numbers of XEP-0060. Each
test makes its own nodes (unique ids), so one component serves the module.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.integration.queue_helpers import (
    DATA_FORMS,
    DISCO_INFO,
    DISCO_ITEMS,
    EXAMPLE_NS,
    META_DATA,
    NODE_CONFIG,
    PUBLISH_OPTIONS,
    PUBSUB,
    PUBSUB_OWNER,
    QUEUEING,
    RSM,
    SERVICE,
    SUBSCRIBE_OPTIONS,
    TIMEOUT,
    Inbox,
    config_form,
    create_node,
    create_queue,
    expect_error,
    find_form,
    form,
    form_value,
    form_values,
    iq,
    item_ids,
    items,
    items_of,
    match,
    payload,
    publish,
    send,
    subscribe_queue,
    unique,
    xml_of,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

PS = "pubsub#"  # node_config / subscribe_options field prefix
FEATURE = "http://jabber.org/protocol/pubsub#"  # disco feature prefix
AUTHORIZATION_FORM = FEATURE + "subscribe_authorization"


def _subscription(reply) -> ET.Element:
    sub = reply.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}subscription")
    assert sub is not None, xml_of(reply)
    return sub


async def _subscribe(client, node: str, jid: str | None = None) -> ET.Element:
    reply = await client.plugin["xep_0060"].subscribe(
        SERVICE, node, subscribee=jid or client.boundjid.bare, timeout=TIMEOUT
    )
    return _subscription(reply)


async def _disco_info(client, node: str | None = None):
    return await client.plugin["xep_0030"].get_info(jid=SERVICE, node=node, timeout=TIMEOUT)


async def _disco_items(client, node: str | None = None):
    return await client.plugin["xep_0030"].get_items(jid=SERVICE, node=node, timeout=TIMEOUT)


def _features(reply) -> set[str]:
    return {f.get("var", "") for f in reply.xml.iter(f"{{{DISCO_INFO}}}feature")}


def _identities(reply) -> set[tuple[str, str]]:
    return {
        (i.get("category", ""), i.get("type", ""))
        for i in reply.xml.iter(f"{{{DISCO_INFO}}}identity")
    }


def _config_of(reply) -> dict[str, list[str]]:
    x = find_form(reply.xml, NODE_CONFIG)
    assert x is not None, xml_of(reply)
    return form_values(x)


# --- §5 entity use cases: discovery --------------------------------------------------------


async def test_5_1_service_info_identity_and_features(connect):
    alice = await connect("alice")
    info = await _disco_info(alice)
    assert ("pubsub", "service") in _identities(info)
    features = _features(info)
    required = {
        PUBSUB,
        QUEUEING,  # XEP-0254 §3
        "urn:xmpp-queue:0",  # our lock extension, "advertised in disco" (issue 3 item 6)
        *(
            FEATURE + f
            for f in (
                "create-nodes",
                "instant-nodes",
                "create-and-configure",
                "config-node",
                "retrieve-default",
                "delete-nodes",
                "purge-nodes",
                "publish",
                "publish-options",
                "retract-items",
                "retrieve-items",
                "persistent-items",
                "subscribe",
                "subscription-options",
                "retrieve-subscriptions",
                "retrieve-affiliations",
                "manage-subscriptions",
                "modify-affiliations",
                "access-open",
                "access-whitelist",
                "access-authorize",
                "meta-data",
            )
        ),
    }
    assert required <= features, f"missing features: {sorted(required - features)}"


async def test_5_2_disco_items_lists_nodes(connect):
    alice = await connect("alice")
    a, b = unique("disco-a"), unique("disco-b")
    await create_node(alice, a)
    await create_node(alice, b, title="Bee")
    reply = await _disco_items(alice)
    listed = {i.get("node"): i for i in reply.xml.iter(f"{{{DISCO_ITEMS}}}item") if i.get("node")}
    assert {a, b} <= set(listed)
    assert listed[a].get("jid") == SERVICE


async def test_5_3_5_4_node_info_is_leaf_with_meta_data(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("meta"), title="Jobs of the night", max_items=7)
    info = await _disco_info(alice, node)
    assert ("pubsub", "leaf") in _identities(info)
    assert PUBSUB in _features(info)
    meta = find_form(info.xml, META_DATA)
    assert meta is not None, f"no §5.4 meta-data form: {xml_of(info)}"
    assert meta.get("type") == "result"
    assert form_value(meta, PS + "title") == "Jobs of the night", xml_of(info)
    assert form_value(meta, PS + "max_items") == "7", xml_of(info)
    assert QUEUEING not in _features(info), "an ordinary node is not a queue"

    queue = await create_queue(alice)
    qinfo = await _disco_info(alice, queue)
    assert ("pubsub", "leaf") in _identities(qinfo)
    assert QUEUEING in _features(qinfo), "XEP-0254 §3: a queue node advertises queueing"


async def test_5_5_disco_items_of_a_node_name_the_items(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("ditems"))
    await publish(alice, node, "first")
    await publish(alice, node, "second")
    reply = await _disco_items(alice, node)
    names = {i.get("name") for i in reply.xml.iter(f"{{{DISCO_ITEMS}}}item")}
    assert names == {"first", "second"}
    for i in reply.xml.iter(f"{{{DISCO_ITEMS}}}item"):
        assert i.get("jid") == SERVICE


async def test_5_6_retrieve_own_subscriptions(connect):
    alice, bob = await connect("alice"), await connect("bob")
    n1 = await create_node(alice, unique("subs"))
    n2 = await create_node(alice, unique("subs"))
    s1 = await _subscribe(bob, n1)
    s2 = await _subscribe(bob, n2)
    reply = await bob.plugin["xep_0060"].get_subscriptions(SERVICE, timeout=TIMEOUT)
    subs = {
        (s.get("node"), s.get("subid"), s.get("subscription"))
        for s in reply.xml.iter(f"{{{PUBSUB}}}subscription")
    }
    assert (n1, s1.get("subid"), "subscribed") in subs
    assert (n2, s2.get("subid"), "subscribed") in subs
    # §5.6 with a node: only that node's subscriptions
    one = await bob.plugin["xep_0060"].get_subscriptions(SERVICE, node=n1, timeout=TIMEOUT)
    nodes = {s.get("node") for s in one.xml.iter(f"{{{PUBSUB}}}subscription")}
    assert nodes <= {n1, None} and len(list(one.xml.iter(f"{{{PUBSUB}}}subscription"))) == 1


async def test_5_7_retrieve_own_affiliations(connect):
    alice, bob = await connect("alice"), await connect("bob")
    mine = await create_node(alice, unique("affs"))
    theirs = await create_node(bob, unique("affs"))
    await bob.plugin["xep_0060"].modify_affiliations(
        SERVICE, theirs, [(alice.boundjid.bare, "publisher")], timeout=TIMEOUT
    )
    reply = await alice.plugin["xep_0060"].get_affiliations(SERVICE, timeout=TIMEOUT)
    affs = {
        (a.get("node"), a.get("affiliation")) for a in reply.xml.iter(f"{{{PUBSUB}}}affiliation")
    }
    assert (mine, "owner") in affs
    assert (theirs, "publisher") in affs


# --- §6 subscriber use cases ---------------------------------------------------------------


async def test_6_1_subscribe_to_open_node_and_receive(connect):
    alice, bob = await connect("alice"), await connect("bob")
    inbox = Inbox(bob)
    node = await create_node(alice, unique("open"))
    sub = await _subscribe(bob, node)
    assert sub.get("subscription") == "subscribed"
    assert sub.get("jid") == bob.boundjid.bare
    assert sub.get("node") == node
    assert sub.get("subid"), "§6.1.2: the service gives a subid"
    await publish(alice, node, "hello", "hi there")
    event = await inbox.next(match("item", node, "hello"))
    assert event.payload is not None and event.payload.text == "hi there"


async def test_6_1_subscribe_full_and_bare_jid_get_distinct_subids(connect):
    """Two subscriptions of one account (bare and full JID) are told apart by subid."""
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("two"))
    bare_sub = await _subscribe(bob, node, bob.boundjid.bare)
    full_sub = await _subscribe(bob, node, str(bob.boundjid))
    assert bare_sub.get("subid") != full_sub.get("subid")
    owner_view = await alice.plugin["xep_0060"].get_node_subscriptions(
        SERVICE, node, timeout=TIMEOUT
    )
    jids = {s.get("jid") for s in owner_view.xml.iter(f"{{{PUBSUB_OWNER}}}subscription")}
    assert {bob.boundjid.bare, str(bob.boundjid)} <= jids


async def test_6_2_unsubscribe_with_subid(connect):
    alice, bob = await connect("alice"), await connect("bob")
    inbox = Inbox(bob)
    node = await create_node(alice, unique("unsub"))
    sub = await _subscribe(bob, node)
    await bob.plugin["xep_0060"].unsubscribe(SERVICE, node, subid=sub.get("subid"), timeout=TIMEOUT)
    reply = await bob.plugin["xep_0060"].get_subscriptions(SERVICE, node=node, timeout=TIMEOUT)
    assert not [s for s in reply.xml.iter(f"{{{PUBSUB}}}subscription") if s.get("node") == node]
    await publish(alice, node, "after")
    await inbox.assert_none(match(node=node))


async def test_6_3_subscription_options_get_and_set(connect):
    alice, bob = await connect("alice"), await connect("bob")
    inbox = Inbox(bob)
    node = await create_node(alice, unique("opts"))
    sub = await _subscribe(bob, node)
    subid = sub.get("subid", "")
    # §6.3.2 request the options form
    got = await send(
        iq(
            bob,
            f"<pubsub xmlns='{PUBSUB}'><options node='{node}' jid='{bob.boundjid.bare}' "
            f"subid='{subid}'/></pubsub>",
            "get",
        )
    )
    x = find_form(got.xml, SUBSCRIBE_OPTIONS)
    assert x is not None and x.get("type") == "form", xml_of(got)
    assert PS + "deliver" in form_values(x)
    # §6.3.5 submit: turn delivery off (type set, as §6.3.5's example)
    opts = iq(
        bob,
        f"<pubsub xmlns='{PUBSUB}'><options node='{node}' jid='{bob.boundjid.bare}' "
        f"subid='{subid}'/></pubsub>",
    )
    opts.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}options").append(
        form(SUBSCRIBE_OPTIONS, {PS + "deliver": False}).xml
    )
    await send(opts)
    again = await send(
        iq(
            bob,
            f"<pubsub xmlns='{PUBSUB}'><options node='{node}' jid='{bob.boundjid.bare}'/></pubsub>",
            "get",
        )
    )
    assert form_value(find_form(again.xml, SUBSCRIBE_OPTIONS), PS + "deliver") in ("0", "false")
    await publish(alice, node, "muted")
    await inbox.assert_none(match(node=node))


async def test_6_5_retrieve_all_items_in_publish_order(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("items"))
    for i in range(4):
        await publish(alice, node, f"i{i}", f"text {i}")
    reply = await items(bob, node)
    assert item_ids(reply) == ["i0", "i1", "i2", "i3"]
    body = items_of(reply)["i2"].find(f"{{{EXAMPLE_NS}}}example")
    assert body is not None and body.text == "text 2"


async def test_6_5_7_retrieve_most_recent_items_max_items(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("recent"))
    for i in range(5):
        await publish(alice, node, f"r{i}")
    reply = await items(alice, node, max_items=2)
    assert sorted(item_ids(reply)) == ["r3", "r4"]


async def test_6_5_8_retrieve_items_by_id(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("byid"))
    for i in range(3):
        await publish(alice, node, f"b{i}", f"body {i}")
    reply = await items(alice, node, item_ids=["b2", "b0"])
    got = items_of(reply)
    assert set(got) == {"b0", "b2"}
    assert got["b0"].find(f"{{{EXAMPLE_NS}}}example").text == "body 0"


async def test_6_5_4_retrieve_items_with_rsm_paging(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("rsm"))
    ids = [f"p{i}" for i in range(7)]
    for i in ids:
        await publish(alice, node, i)

    async def page(extra: str):
        return await send(
            iq(
                alice,
                f"<pubsub xmlns='{PUBSUB}'><items node='{node}'/>"
                f"<set xmlns='{RSM}'><max>3</max>{extra}</set></pubsub>",
                "get",
            )
        )

    seen: list[str] = []
    after = ""
    for _ in range(4):
        reply = await page(f"<after>{after}</after>" if after else "")
        got = item_ids(reply)
        rsm = reply.xml.find(f"{{{PUBSUB}}}pubsub/{{{RSM}}}set")
        assert rsm is not None, f"XEP-0059: a paged reply carries <set/>: {xml_of(reply)}"
        assert rsm.findtext(f"{{{RSM}}}count") == "7"
        if not got:
            break
        assert len(got) <= 3
        assert rsm.findtext(f"{{{RSM}}}first") == got[0]
        assert rsm.findtext(f"{{{RSM}}}last") == got[-1]
        seen.extend(got)
        after = got[-1]
    assert seen == ids


async def test_7_1_publish_with_and_without_item_id(connect):
    alice, bob = await connect("alice"), await connect("bob")
    inbox = Inbox(bob)
    node = await create_node(alice, unique("pub"))
    await _subscribe(bob, node)
    named = await publish(alice, node, "named-1", "one")
    assert named == "named-1"
    generated = await publish(alice, node, None, "two")
    assert generated, "§7.1.2: the service returns the id it generated"
    first = await inbox.next(match("item", node, "named-1"))
    second = await inbox.next(match("item", node, generated))
    assert first.payload.text == "one" and second.payload.text == "two"
    assert first.payload.tag == f"{{{EXAMPLE_NS}}}example"
    assert sorted(item_ids(await items(alice, node))) == sorted(["named-1", generated])


async def test_7_1_republishing_an_id_replaces_the_item(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("replace"))
    await publish(alice, node, "same", "old")
    await publish(alice, node, "same", "new")
    got = items_of(await items(alice, node))
    assert list(got) == ["same"]
    assert got["same"].find(f"{{{EXAMPLE_NS}}}example").text == "new"


async def test_7_1_5_publish_options_preconditions_met(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("precond"), access_model="open")
    reply = await alice.plugin["xep_0060"].publish(
        SERVICE,
        node,
        id="ok",
        payload=payload(),
        options=form(PUBLISH_OPTIONS, {PS + "access_model": "open"}),
        timeout=TIMEOUT,
    )
    assert reply["type"] == "result"
    assert item_ids(await items(alice, node)) == ["ok"]


async def test_7_2_retract_with_notify(connect):
    alice, bob = await connect("alice"), await connect("bob")
    inbox = Inbox(bob)
    node = await create_node(alice, unique("retract"))
    await _subscribe(bob, node)
    await publish(alice, node, "gone")
    await publish(alice, node, "quiet")
    await inbox.collect(2, match("item", node))
    await alice.plugin["xep_0060"].retract(SERVICE, node, "gone", notify=True, timeout=TIMEOUT)
    await inbox.next(match("retract", node, "gone"))
    # notify='false' with notify_retract on: §7.2.2.1 lets the publisher ask for silence
    await alice.plugin["xep_0060"].retract(SERVICE, node, "quiet", notify=False, timeout=TIMEOUT)
    await inbox.assert_none(match("retract", node, "quiet"))
    assert item_ids(await items(alice, node)) == []


# --- §8 owner use cases --------------------------------------------------------------------


async def test_8_1_2_create_named_node(connect):
    alice = await connect("alice")
    node = unique("named")
    reply = await alice.plugin["xep_0060"].create_node(SERVICE, node, timeout=TIMEOUT)
    assert reply["type"] == "result"
    assert node in {
        i.get("node") for i in (await _disco_items(alice)).xml.iter(f"{{{DISCO_ITEMS}}}item")
    }
    affs = await alice.plugin["xep_0060"].get_node_affiliations(SERVICE, node, timeout=TIMEOUT)
    owners = {
        (a.get("jid"), a.get("affiliation"))
        for a in affs.xml.iter(f"{{{PUBSUB_OWNER}}}affiliation")
    }
    assert (alice.boundjid.bare, "owner") in owners


async def test_8_1_1_create_instant_node(connect):
    alice = await connect("alice")
    reply = await alice.plugin["xep_0060"].create_node(SERVICE, None, timeout=TIMEOUT)
    create = reply.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}create")
    assert create is not None and create.get("node"), f"§8.1.3: instant node id: {xml_of(reply)}"
    await publish(alice, create.get("node"), "x")


async def test_8_1_3_create_and_configure(connect):
    alice = await connect("alice")
    node = await create_node(
        alice,
        unique("cfg"),
        title="Configured",
        max_items=3,
        notify_retract=False,
        access_model="whitelist",
    )
    config = _config_of(
        await alice.plugin["xep_0060"].get_node_config(SERVICE, node, timeout=TIMEOUT)
    )
    assert config[PS + "title"] == ["Configured"]
    assert config[PS + "max_items"] == ["3"]
    assert config[PS + "notify_retract"][0] in ("0", "false")
    assert config[PS + "access_model"] == ["whitelist"]


async def test_8_2_configure_get_and_set(connect):
    alice, bob = await connect("alice"), await connect("bob")
    inbox = Inbox(bob)
    node = await create_node(alice, unique("conf"), notify_config=True)
    await _subscribe(bob, node)
    got = await alice.plugin["xep_0060"].get_node_config(SERVICE, node, timeout=TIMEOUT)
    x = find_form(got.xml, NODE_CONFIG)
    assert x is not None and x.get("type") == "form"
    fields = form_values(x)
    for var in (
        "title",
        "max_items",
        "persist_items",
        "deliver_payloads",
        "notify_retract",
        "notify_delete",
        "notify_config",
        "access_model",
        "publish_model",
        "max_payload_size",
        "send_last_published_item",
        "queue",
    ):
        assert PS + var in fields, f"{PS + var} missing from the §8.2 form"
    await alice.plugin["xep_0060"].set_node_config(
        SERVICE, node, config_form(title="Renamed"), timeout=TIMEOUT
    )
    config = _config_of(
        await alice.plugin["xep_0060"].get_node_config(SERVICE, node, timeout=TIMEOUT)
    )
    assert config[PS + "title"] == ["Renamed"]
    # §8.2.5.3 notify_config: subscribers hear of the change
    await inbox.next(match("configuration", node))


async def test_8_3_default_node_configuration(connect):
    alice = await connect("alice")
    reply = await alice.plugin["xep_0060"].get_node_config(SERVICE, None, timeout=TIMEOUT)
    default = reply.xml.find(f"{{{PUBSUB_OWNER}}}pubsub/{{{PUBSUB_OWNER}}}default")
    assert default is not None, xml_of(reply)
    x = default.find(f"{{{DATA_FORMS}}}x")
    assert x is not None and form_value(x, "FORM_TYPE") == NODE_CONFIG
    values = form_values(x)
    assert values[PS + "access_model"] == ["open"]
    assert values[PS + "queue"][0] in ("0", "false")


async def test_8_4_delete_node_notifies_subscribers(connect):
    alice, bob = await connect("alice"), await connect("bob")
    inbox = Inbox(bob)
    node = await create_node(alice, unique("del"))
    await publish(alice, node, "x")
    await _subscribe(bob, node)
    await alice.plugin["xep_0060"].delete_node(SERVICE, node, timeout=TIMEOUT)
    await inbox.next(match("delete", node))
    listed = {i.get("node") for i in (await _disco_items(alice)).xml.iter(f"{{{DISCO_ITEMS}}}item")}
    assert node not in listed


async def test_8_5_purge_node_notifies_subscribers(connect):
    alice, bob = await connect("alice"), await connect("bob")
    inbox = Inbox(bob)
    node = await create_node(alice, unique("purge"))
    for i in range(3):
        await publish(alice, node, f"x{i}")
    await _subscribe(bob, node)
    await alice.plugin["xep_0060"].purge(SERVICE, node, timeout=TIMEOUT)
    await inbox.next(match("purge", node))
    assert item_ids(await items(alice, node)) == []


async def test_8_8_owner_manages_subscriptions(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("manage-subs"))
    sub = await _subscribe(bob, node)
    got = await alice.plugin["xep_0060"].get_node_subscriptions(SERVICE, node, timeout=TIMEOUT)
    entries = {
        (s.get("jid"), s.get("subscription"), s.get("subid"))
        for s in got.xml.iter(f"{{{PUBSUB_OWNER}}}subscription")
    }
    assert (bob.boundjid.bare, "subscribed", sub.get("subid")) in entries
    # §8.8.2 remove bob's subscription (subscription='none')
    await alice.plugin["xep_0060"].modify_subscriptions(
        SERVICE, node, [(bob.boundjid.bare, "none")], timeout=TIMEOUT
    )
    mine = await bob.plugin["xep_0060"].get_subscriptions(SERVICE, node=node, timeout=TIMEOUT)
    assert not [s for s in mine.xml.iter(f"{{{PUBSUB}}}subscription") if s.get("node") == node]


async def test_8_9_owner_manages_affiliations_each_kind(connect):
    """§8.9 with every affiliation, each checked by what it lets the entity do (§4.1)."""
    owner, alice, bob = await connect("w5"), await connect("alice"), await connect("bob")
    pub = await connect("pub")
    node = await create_node(owner, unique("affs"), access_model="whitelist")
    await owner.plugin["xep_0060"].modify_affiliations(
        SERVICE,
        node,
        [
            (alice.boundjid.bare, "publisher"),
            (pub.boundjid.bare, "publish-only"),
            (bob.boundjid.bare, "member"),
        ],
        timeout=TIMEOUT,
    )
    got = await owner.plugin["xep_0060"].get_node_affiliations(SERVICE, node, timeout=TIMEOUT)
    affs = {
        a.get("jid"): a.get("affiliation") for a in got.xml.iter(f"{{{PUBSUB_OWNER}}}affiliation")
    }
    assert affs[alice.boundjid.bare] == "publisher"
    assert affs[pub.boundjid.bare] == "publish-only"
    assert affs[bob.boundjid.bare] == "member"
    assert affs[owner.boundjid.bare] == "owner"

    await publish(alice, node, "by-publisher")  # publisher publishes
    await publish(pub, node, "by-publish-only")  # publish-only publishes
    await _subscribe(bob, node)  # member of a whitelist node subscribes
    assert "by-publisher" in item_ids(await items(bob, node))  # and retrieves

    # member -> none: a whitelist node is now closed to bob
    await owner.plugin["xep_0060"].modify_affiliations(
        SERVICE, node, [(bob.boundjid.bare, "none")], timeout=TIMEOUT
    )
    await expect_error(items(bob, node), "not-allowed", "cancel", "closed-node")

    # publisher -> outcast: banned entirely (§4.1), its subscription goes
    await owner.plugin["xep_0060"].modify_affiliations(
        SERVICE, node, [(alice.boundjid.bare, "outcast")], timeout=TIMEOUT
    )
    await expect_error(publish(alice, node, "nope"), "forbidden", "auth")

    # a second owner may configure
    await owner.plugin["xep_0060"].modify_affiliations(
        SERVICE, node, [(bob.boundjid.bare, "owner")], timeout=TIMEOUT
    )
    await bob.plugin["xep_0060"].set_node_config(
        SERVICE, node, config_form(title="co-owned"), timeout=TIMEOUT
    )
    final = await owner.plugin["xep_0060"].get_node_affiliations(SERVICE, node, timeout=TIMEOUT)
    affs = {
        a.get("jid"): a.get("affiliation") for a in final.xml.iter(f"{{{PUBSUB_OWNER}}}affiliation")
    }
    assert affs[bob.boundjid.bare] == "owner"
    assert affs[alice.boundjid.bare] == "outcast"


async def test_4_5_whitelist_admits_members_only(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("white"), access_model="whitelist")
    await expect_error(_subscribe(bob, node), "not-allowed", "cancel", "closed-node")
    await alice.plugin["xep_0060"].modify_affiliations(
        SERVICE, node, [(bob.boundjid.bare, "member")], timeout=TIMEOUT
    )
    assert (await _subscribe(bob, node)).get("subscription") == "subscribed"


async def test_6_1_4_authorize_pending_until_owner_approves(connect):
    """access_model authorize: the subscription is pending (§6.1.2), the owner gets the
    §8.6 authorization form and approves through §8.8.2; then items flow."""
    alice, bob = await connect("alice"), await connect("bob")
    owner_inbox, bob_inbox = Inbox(alice), Inbox(bob)
    node = await create_node(alice, unique("authz"), access_model="authorize")
    sub = await _subscribe(bob, node)
    assert sub.get("subscription") == "pending"
    request = await owner_inbox.next(
        lambda e: e.message is not None and find_form(e.message, AUTHORIZATION_FORM) is not None
    )
    x = find_form(request.message, AUTHORIZATION_FORM)
    assert form_value(x, PS + "node") == node
    assert form_value(x, PS + "subscriber_jid") == bob.boundjid.bare
    await alice.plugin["xep_0060"].modify_subscriptions(
        SERVICE, node, [(bob.boundjid.bare, "subscribed")], timeout=TIMEOUT
    )
    note = await bob_inbox.next(match("subscription", node))
    assert note.attrs.get("subscription") == "subscribed"
    await publish(alice, node, "approved")
    await bob_inbox.next(match("item", node, "approved"))


# --- node configuration fields (pubsub#node_config, XEP-0060 §16.4.4 registry) --------------------


async def test_node_config_max_items_keeps_the_newest(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("maxitems"), max_items=2)
    for i in range(4):
        await publish(alice, node, f"m{i}")
    assert sorted(item_ids(await items(alice, node))) == ["m2", "m3"]


async def test_node_config_persist_items_off_notifies_without_storing(connect):
    alice, bob = await connect("alice"), await connect("bob")
    inbox = Inbox(bob)
    node = await create_node(alice, unique("transient"), persist_items=False)
    await _subscribe(bob, node)
    await publish(alice, node, "fleeting")
    await inbox.next(match("item", node, "fleeting"))
    assert item_ids(await items(alice, node)) == []


async def test_node_config_deliver_payloads_off_sends_ids_only(connect):
    alice, bob = await connect("alice"), await connect("bob")
    inbox = Inbox(bob)
    node = await create_node(alice, unique("nopayload"), deliver_payloads=False)
    await _subscribe(bob, node)
    await publish(alice, node, "idonly")
    event = await inbox.next(match("item", node, "idonly"))
    assert event.payload is None, "§7.1.2.2: notification without payload"
    assert item_ids(await items(alice, node)) == ["idonly"]


async def test_node_config_notify_retract_off_is_silent(connect):
    alice, bob = await connect("alice"), await connect("bob")
    inbox = Inbox(bob)
    node = await create_node(alice, unique("noretract"), notify_retract=False)
    await _subscribe(bob, node)
    await publish(alice, node, "r")
    await inbox.next(match("item", node, "r"))
    await alice.plugin["xep_0060"].retract(SERVICE, node, "r", timeout=TIMEOUT)
    await inbox.assert_none(match("retract", node))


async def test_node_config_notify_delete_off_is_silent(connect):
    alice, bob = await connect("alice"), await connect("bob")
    inbox = Inbox(bob)
    node = await create_node(alice, unique("nodelete"), notify_delete=False)
    await _subscribe(bob, node)
    await alice.plugin["xep_0060"].delete_node(SERVICE, node, timeout=TIMEOUT)
    await inbox.assert_none(match("delete", node))


async def test_node_config_publish_model_open_and_subscribers(connect):
    alice, bob, pub = await connect("alice"), await connect("bob"), await connect("pub")
    open_node = await create_node(alice, unique("pubopen"), publish_model="open")
    await publish(bob, open_node, "anyone")
    subs_node = await create_node(alice, unique("pubsubs"), publish_model="subscribers")
    await expect_error(publish(pub, subs_node, "no"), "forbidden", "auth")
    await _subscribe(pub, subs_node)
    await publish(pub, subs_node, "yes")
    assert item_ids(await items(alice, subs_node)) == ["yes"]


async def test_node_config_max_payload_size_admits_payload_at_the_limit(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("size"), max_payload_size=1000)
    await publish(alice, node, "small", "x" * 100)
    assert item_ids(await items(alice, node)) == ["small"]


async def test_node_config_send_last_published_item_on_sub(connect):
    alice, bob = await connect("alice"), await connect("bob")
    inbox = Inbox(bob)
    node = await create_node(alice, unique("last"), send_last_published_item="on_sub")
    await publish(alice, node, "older")
    await publish(alice, node, "latest", "newest")
    await _subscribe(bob, node)
    event = await inbox.next(match("item", node))
    assert event.item_id == "latest" and event.payload.text == "newest"
    await inbox.assert_none(match("item", node, "older"))


# --- state survives a restart (issue 2 "Done when") ------------------------------------------


async def test_restart_keeps_nodes_items_subscriptions_affiliations(service, connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("durable"), title="Survivor", max_items=10)
    queue = await create_queue(alice)
    await alice.plugin["xep_0060"].modify_affiliations(
        SERVICE, node, [(bob.boundjid.bare, "publisher")], timeout=TIMEOUT
    )
    sub = await _subscribe(bob, node)
    qsub = await subscribe_queue(bob, queue, 3)
    await publish(alice, node, "kept-1", "one")
    await publish(bob, node, "kept-2", "two")

    await service.restart()

    config = _config_of(
        await alice.plugin["xep_0060"].get_node_config(SERVICE, node, timeout=TIMEOUT)
    )
    assert config[PS + "title"] == ["Survivor"] and config[PS + "max_items"] == ["10"]
    got = items_of(await items(alice, node))
    assert list(got) == ["kept-1", "kept-2"]
    assert got["kept-2"].find(f"{{{EXAMPLE_NS}}}example").text == "two"
    subs = await bob.plugin["xep_0060"].get_subscriptions(SERVICE, timeout=TIMEOUT)
    found = {(s.get("node"), s.get("subid")) for s in subs.xml.iter(f"{{{PUBSUB}}}subscription")}
    assert (node, sub.get("subid")) in found
    assert (queue, qsub) in found
    affs = await alice.plugin["xep_0060"].get_node_affiliations(SERVICE, node, timeout=TIMEOUT)
    table = {
        a.get("jid"): a.get("affiliation") for a in affs.xml.iter(f"{{{PUBSUB_OWNER}}}affiliation")
    }
    assert table == {alice.boundjid.bare: "owner", bob.boundjid.bare: "publisher"}
    qinfo = await _disco_info(alice, queue)
    assert QUEUEING in _features(qinfo)
