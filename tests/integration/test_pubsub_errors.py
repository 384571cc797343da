"""XEP-0060 error cases and hostile input, end to end (issue 2 items 6 and 7).

Every assertion names the (condition, type, pubsub#errors child) of the spec's
error table; the section number is in the test name. Hostile requests are
followed by a check that the component still answers and that stored data did
not change.
"""

from __future__ import annotations

import pytest
from slixmpp.exceptions import IqError

from tests.integration.queue_helpers import (
    EXAMPLE_NS,
    NODE_CONFIG,
    PUBLISH_OPTIONS,
    PUBSUB,
    PUBSUB_OWNER,
    SERVICE,
    SUBSCRIBE_OPTIONS,
    TIMEOUT,
    config_form,
    create_node,
    error_info,
    expect_error,
    find_form,
    form,
    form_value,
    form_xml,
    iq,
    item_ids,
    items,
    items_of,
    payload,
    publish,
    send,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

PS = "pubsub#"  # node_config / subscribe_options field prefix


async def _subscribe(client, node: str, jid: str | None = None):
    return await client.plugin["xep_0060"].subscribe(
        SERVICE, node, subscribee=jid or client.boundjid.bare, timeout=TIMEOUT
    )


def _options_iq(
    client, node: str, jid: str | None, subid: str | None = None, itype: str = "get", values=None
):
    attrs = f" node='{node}'"
    if jid is not None:
        attrs += f" jid='{jid}'"
    if subid is not None:
        attrs += f" subid='{subid}'"
    stanza = iq(client, f"<pubsub xmlns='{PUBSUB}'><options{attrs}/></pubsub>", itype)
    if values is not None:
        stanza.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}options").append(
            form_xml(SUBSCRIBE_OPTIONS, values)
        )
    return stanza


async def _alive_and_unchanged(client, node: str, expected: list[str]) -> None:
    """The component answers and the node holds exactly the items it held before."""
    await send(iq(client, "<query xmlns='http://jabber.org/protocol/disco#info'/>", "get"))
    assert item_ids(await items(client, node)) == expected


# --- §6.1.3 subscribe -------------------------------------------------------------------------


async def test_6_1_3_1_subscribe_jids_do_not_match(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await expect_error(
        _subscribe(bob, node, alice.boundjid.bare), "bad-request", "modify", "invalid-jid"
    )


async def test_6_1_3_4_subscribe_not_on_whitelist(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"), access_model="whitelist")
    await expect_error(_subscribe(bob, node), "not-allowed", "cancel", "closed-node")


async def test_6_1_3_8_subscribe_blocked_outcast(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await alice.plugin["xep_0060"].modify_affiliations(
        SERVICE, node, [(bob.boundjid.bare, "outcast")], timeout=TIMEOUT
    )
    await expect_error(_subscribe(bob, node), "forbidden", "auth")


async def test_6_1_3_12_subscribe_node_does_not_exist(connect):
    bob = await connect("bob")
    await expect_error(_subscribe(bob, unique("missing")), "item-not-found", "cancel")


# --- §6.2.3 unsubscribe -----------------------------------------------------------------------


async def test_6_2_3_2_unsubscribe_not_subscribed(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await expect_error(
        bob.plugin["xep_0060"].unsubscribe(SERVICE, node, timeout=TIMEOUT),
        "unexpected-request",
        "cancel",
        "not-subscribed",
    )


async def test_6_2_3_3_unsubscribe_someone_else(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await _subscribe(alice, node)
    await expect_error(
        bob.plugin["xep_0060"].unsubscribe(
            SERVICE, node, subscribee=alice.boundjid.bare, timeout=TIMEOUT
        ),
        "forbidden",
        "auth",
    )


async def test_6_2_3_4_unsubscribe_node_does_not_exist(connect):
    bob = await connect("bob")
    await expect_error(
        bob.plugin["xep_0060"].unsubscribe(SERVICE, unique("missing"), timeout=TIMEOUT),
        "item-not-found",
        "cancel",
    )


async def test_6_2_3_5_unsubscribe_bad_subid(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await _subscribe(bob, node)
    await expect_error(
        bob.plugin["xep_0060"].unsubscribe(SERVICE, node, subid="no-such-subid", timeout=TIMEOUT),
        "not-acceptable",
        "modify",
        "invalid-subid",
    )


# --- §6.3.4 / §6.3.6 subscription options ------------------------------------------------------


async def test_6_3_4_1_options_of_someone_else(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await _subscribe(alice, node)
    await expect_error(send(_options_iq(bob, node, alice.boundjid.bare)), "forbidden", "auth")


async def test_6_3_4_2_options_not_subscribed(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await expect_error(
        send(_options_iq(bob, node, bob.boundjid.bare)),
        "unexpected-request",
        "modify",
        "not-subscribed",
    )


async def test_6_3_4_3_options_jid_required(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await _subscribe(bob, node)
    await expect_error(send(_options_iq(bob, node, None)), "bad-request", "modify", "jid-required")


async def test_6_3_4_5_options_invalid_subid(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await _subscribe(bob, node)
    await expect_error(
        send(_options_iq(bob, node, bob.boundjid.bare, subid="bogus")),
        "not-acceptable",
        "modify",
        "invalid-subid",
    )


async def test_6_3_4_7_options_node_does_not_exist(connect):
    bob = await connect("bob")
    await expect_error(
        send(_options_iq(bob, unique("missing"), bob.boundjid.bare)), "item-not-found", "cancel"
    )


async def test_6_3_6_2_set_options_invalid_value(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await _subscribe(bob, node)
    for values in ({PS + "deliver": "perhaps"}, {PS + "no_such_option": "1"}):
        await expect_error(
            send(_options_iq(bob, node, bob.boundjid.bare, itype="set", values=values)),
            "bad-request",
            "modify",
            "invalid-options",
        )
    # the subscription is unchanged: still delivering
    got = await send(_options_iq(bob, node, bob.boundjid.bare))
    assert form_value(find_form(got.xml, SUBSCRIBE_OPTIONS), PS + "deliver") in ("1", "true")


# --- §6.5.9 retrieve items ----------------------------------------------------------------------


async def test_6_5_9_3_items_of_authorize_node_not_subscribed(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"), access_model="authorize")
    await publish(alice, node, "secret")
    await expect_error(items(bob, node), "not-authorized", "auth", "not-subscribed")
    # "which includes having a pending subscription"
    await _subscribe(bob, node)
    await expect_error(items(bob, node), "not-authorized", "auth", "not-subscribed")


async def test_6_5_9_8_items_not_on_whitelist(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"), access_model="whitelist")
    await expect_error(items(bob, node), "not-allowed", "cancel", "closed-node")


async def test_6_5_9_10_items_blocked_outcast(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await alice.plugin["xep_0060"].modify_affiliations(
        SERVICE, node, [(bob.boundjid.bare, "outcast")], timeout=TIMEOUT
    )
    await expect_error(items(bob, node), "forbidden", "auth")


async def test_6_5_9_11_items_node_does_not_exist(connect):
    bob = await connect("bob")
    await expect_error(items(bob, unique("missing")), "item-not-found", "cancel")


async def test_6_5_9_12_no_such_items_is_an_empty_result(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("e"))
    assert item_ids(await items(alice, node, item_ids=["nope"])) == []


async def test_6_5_9_1_items_invalid_subid(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await _subscribe(bob, node)
    await expect_error(
        send(
            iq(
                bob,
                f"<pubsub xmlns='{PUBSUB}'><items node='{node}' subid='bogus'/></pubsub>",
                "get",
            )
        ),
        "not-acceptable",
        "modify",
        "invalid-subid",
    )


# --- §7.1.3 publish -------------------------------------------------------------------------------


async def test_7_1_3_1_publish_insufficient_privileges(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await expect_error(publish(bob, node, "x"), "forbidden", "auth")
    await _alive_and_unchanged(alice, node, [])


async def test_7_1_3_3_publish_node_does_not_exist(connect):
    alice = await connect("alice")
    await expect_error(publish(alice, unique("missing"), "x"), "item-not-found", "cancel")


async def test_7_1_3_5_payload_too_big(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("e"), max_payload_size=200)
    await publish(alice, node, "ok", "x" * 10)
    await expect_error(
        publish(alice, node, "big", "x" * 1000), "not-acceptable", "modify", "payload-too-big"
    )
    await _alive_and_unchanged(alice, node, ["ok"])


async def test_7_1_3_5_oversize_payload_over_the_default_limit(connect):
    """The default pubsub#max_payload_size (256 KiB) holds for a node that never set it."""
    alice = await connect("alice")
    node = await create_node(alice, unique("e"))
    await expect_error(
        publish(alice, node, "huge", "y" * (300 * 1024)),
        "not-acceptable",
        "modify",
        "payload-too-big",
    )
    await _alive_and_unchanged(alice, node, [])


async def test_7_1_3_6_two_payload_children_are_invalid(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("e"))
    stanza = iq(
        alice,
        f"<pubsub xmlns='{PUBSUB}'><publish node='{node}'><item id='two'>"
        f"<a xmlns='urn:example:a'/><b xmlns='urn:example:b'/></item></publish></pubsub>",
    )
    await expect_error(send(stanza), "bad-request", "modify", "invalid-payload")
    await _alive_and_unchanged(alice, node, [])


async def test_7_1_3_6_item_required(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("e"))
    stanza = iq(alice, f"<pubsub xmlns='{PUBSUB}'><publish node='{node}'/></pubsub>")
    await expect_error(send(stanza), "bad-request", "modify", "item-required")
    await _alive_and_unchanged(alice, node, [])


async def test_7_1_3_6_payload_required(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("e"))  # deliver_payloads defaults to true
    stanza = iq(
        alice,
        f"<pubsub xmlns='{PUBSUB}'><publish node='{node}'><item id='empty'/></publish></pubsub>",
    )
    await expect_error(send(stanza), "bad-request", "modify", "payload-required")
    await _alive_and_unchanged(alice, node, [])


async def test_7_1_3_6_item_forbidden_on_transient_notification_node(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("e"), persist_items=False, deliver_payloads=False)
    await expect_error(publish(alice, node, "x"), "bad-request", "modify", "item-forbidden")


async def test_7_1_5_publish_options_precondition_not_met(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("e"), access_model="open")
    await expect_error(
        alice.plugin["xep_0060"].publish(
            SERVICE,
            node,
            id="p",
            payload=payload(),
            options=form(PUBLISH_OPTIONS, {PS + "access_model": "whitelist"}),
            timeout=TIMEOUT,
        ),
        "conflict",
        "cancel",
        "precondition-not-met",
    )
    await _alive_and_unchanged(alice, node, [])


# --- §7.2.3 retract -------------------------------------------------------------------------------


async def test_7_2_3_1_retract_insufficient_privileges(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await publish(alice, node, "mine")
    await expect_error(
        bob.plugin["xep_0060"].retract(SERVICE, node, "mine", timeout=TIMEOUT), "forbidden", "auth"
    )
    await _alive_and_unchanged(alice, node, ["mine"])


async def test_7_2_3_2_retract_node_or_item_does_not_exist(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("e"))
    await expect_error(
        alice.plugin["xep_0060"].retract(SERVICE, unique("missing"), "x", timeout=TIMEOUT),
        "item-not-found",
        "cancel",
    )
    await expect_error(
        alice.plugin["xep_0060"].retract(SERVICE, node, "nope", timeout=TIMEOUT),
        "item-not-found",
        "cancel",
    )


async def test_7_2_3_3_retract_nodeid_required(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("e"))
    await publish(alice, node, "keep")
    stanza = iq(alice, f"<pubsub xmlns='{PUBSUB}'><retract><item id='keep'/></retract></pubsub>")
    await expect_error(send(stanza), "bad-request", "modify", "nodeid-required")
    await _alive_and_unchanged(alice, node, ["keep"])


async def test_7_2_3_4_retract_item_required(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("e"))
    await publish(alice, node, "keep")
    for body in (f"<retract node='{node}'/>", f"<retract node='{node}'><item/></retract>"):
        await expect_error(
            send(iq(alice, f"<pubsub xmlns='{PUBSUB}'>{body}</pubsub>")),
            "bad-request",
            "modify",
            "item-required",
        )
    await _alive_and_unchanged(alice, node, ["keep"])


# --- §8.1 create ----------------------------------------------------------------------------------


async def test_8_1_1_create_existing_node_conflicts(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await expect_error(create_node(bob, node), "conflict", "cancel")
    owners = await alice.plugin["xep_0060"].get_node_affiliations(SERVICE, node, timeout=TIMEOUT)
    table = {
        a.get("jid"): a.get("affiliation")
        for a in owners.xml.iter(f"{{{PUBSUB_OWNER}}}affiliation")
    }
    assert table == {alice.boundjid.bare: "owner"}


async def test_8_1_3_create_with_unsupported_access_model(connect):
    alice = await connect("alice")
    node = unique("e")
    await expect_error(
        create_node(alice, node, access_model="roster"),
        "not-acceptable",
        "modify",
        "unsupported-access-model",
    )
    await expect_error(items(alice, node), "item-not-found", "cancel")


async def test_8_1_3_create_and_configure_with_bad_values(connect):
    alice = await connect("alice")
    for bad in ({"max_items": "many"}, {"persist_items": "perhaps"}, {"no_such_field": "1"}):
        node = unique("e")
        await expect_error(create_node(alice, node, **bad), "not-acceptable", "modify")
        await expect_error(items(alice, node), "item-not-found", "cancel")  # nothing was created


# --- §8.2 configure -------------------------------------------------------------------------------


async def test_8_2_3_2_configure_insufficient_privileges(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"), title="before")
    await expect_error(
        bob.plugin["xep_0060"].get_node_config(SERVICE, node, timeout=TIMEOUT), "forbidden", "auth"
    )
    await expect_error(
        bob.plugin["xep_0060"].set_node_config(
            SERVICE, node, config_form(title="hijack"), timeout=TIMEOUT
        ),
        "forbidden",
        "auth",
    )
    await _title_is(alice, node, "before")


async def test_8_2_3_3_configure_nodeid_required(connect):
    alice = await connect("alice")
    stanza = iq(alice, f"<pubsub xmlns='{PUBSUB_OWNER}'><configure/></pubsub>", "get")
    await expect_error(send(stanza), "bad-request", "modify", "nodeid-required")


async def test_8_2_3_5_configure_node_does_not_exist(connect):
    alice = await connect("alice")
    await expect_error(
        alice.plugin["xep_0060"].get_node_config(SERVICE, unique("missing"), timeout=TIMEOUT),
        "item-not-found",
        "cancel",
    )


async def test_8_2_5_2_configure_with_bad_form_values(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("e"), title="before")
    for bad in (
        {"max_items": "-3"},
        {"access_model": "everyone"},
        {"max_payload_size": "0"},
        {"title": ["two", "values"]},
        {"queue_lock_timeout": "0", "queue": True},
    ):
        # an access model we do not offer also says so (§8.1.3's child, same schema)
        child = "unsupported-access-model" if "access_model" in bad else None
        await expect_error(
            alice.plugin["xep_0060"].set_node_config(
                SERVICE, node, config_form(**{"title": "changed", **bad}), timeout=TIMEOUT
            ),
            "not-acceptable",
            "modify",
            child,
        )
    await _title_is(alice, node, "before")


async def _title_is(client, node: str, title: str) -> None:
    reply = await client.plugin["xep_0060"].get_node_config(SERVICE, node, timeout=TIMEOUT)
    assert form_value(find_form(reply.xml, NODE_CONFIG), PS + "title") == title


# --- §8.4 / §8.5 delete and purge -----------------------------------------------------------------


async def test_8_4_3_delete_insufficient_privileges_and_missing_node(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await publish(alice, node, "stays")
    await expect_error(
        bob.plugin["xep_0060"].delete_node(SERVICE, node, timeout=TIMEOUT), "forbidden", "auth"
    )
    await expect_error(
        alice.plugin["xep_0060"].delete_node(SERVICE, unique("missing"), timeout=TIMEOUT),
        "item-not-found",
        "cancel",
    )
    await _alive_and_unchanged(alice, node, ["stays"])


async def test_8_5_3_purge_insufficient_privileges_and_missing_node(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await publish(alice, node, "stays")
    await expect_error(
        bob.plugin["xep_0060"].purge(SERVICE, node, timeout=TIMEOUT), "forbidden", "auth"
    )
    await expect_error(
        alice.plugin["xep_0060"].purge(SERVICE, unique("missing"), timeout=TIMEOUT),
        "item-not-found",
        "cancel",
    )
    await _alive_and_unchanged(alice, node, ["stays"])


# --- §8.8 / §8.9 manage subscriptions and affiliations --------------------------------------------


async def test_8_8_1_3_manage_subscriptions_not_owner_or_missing(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await _subscribe(alice, node)
    await expect_error(
        bob.plugin["xep_0060"].get_node_subscriptions(SERVICE, node, timeout=TIMEOUT),
        "forbidden",
        "auth",
    )
    await expect_error(
        bob.plugin["xep_0060"].modify_subscriptions(
            SERVICE, node, [(alice.boundjid.bare, "none")], timeout=TIMEOUT
        ),
        "forbidden",
        "auth",
    )
    await expect_error(
        alice.plugin["xep_0060"].get_node_subscriptions(
            SERVICE, unique("missing"), timeout=TIMEOUT
        ),
        "item-not-found",
        "cancel",
    )
    subs = await alice.plugin["xep_0060"].get_node_subscriptions(SERVICE, node, timeout=TIMEOUT)
    assert [s.get("jid") for s in subs.xml.iter(f"{{{PUBSUB_OWNER}}}subscription")] == [
        alice.boundjid.bare
    ]


async def test_8_9_1_3_manage_affiliations_not_owner_or_missing(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    await expect_error(
        bob.plugin["xep_0060"].get_node_affiliations(SERVICE, node, timeout=TIMEOUT),
        "forbidden",
        "auth",
    )
    await expect_error(
        bob.plugin["xep_0060"].modify_affiliations(
            SERVICE, node, [(bob.boundjid.bare, "owner")], timeout=TIMEOUT
        ),
        "forbidden",
        "auth",
    )
    await expect_error(
        alice.plugin["xep_0060"].get_node_affiliations(SERVICE, unique("missing"), timeout=TIMEOUT),
        "item-not-found",
        "cancel",
    )
    table = await alice.plugin["xep_0060"].get_node_affiliations(SERVICE, node, timeout=TIMEOUT)
    assert {
        a.get("jid"): a.get("affiliation") for a in table.xml.iter(f"{{{PUBSUB_OWNER}}}affiliation")
    } == {alice.boundjid.bare: "owner"}


# --- hostile and malformed input (issue 2 item 7) -------------------------------------------------


async def test_missing_node_attribute_on_publish_and_items(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("e"))
    await publish(alice, node, "keep")
    item = "<item id='x'><p xmlns='urn:p'/></item>"
    publish_no_node = iq(alice, f"<pubsub xmlns='{PUBSUB}'><publish>{item}</publish></pubsub>")
    await expect_error(send(publish_no_node), "bad-request", "modify", "nodeid-required")
    items_no_node = iq(alice, f"<pubsub xmlns='{PUBSUB}'><items/></pubsub>", "get")
    await expect_error(send(items_no_node), "bad-request", "modify", "nodeid-required")
    empty_node = iq(alice, f"<pubsub xmlns='{PUBSUB}'><publish node=''>{item}</publish></pubsub>")
    await expect_error(send(empty_node), "bad-request", "modify", "nodeid-required")
    await _alive_and_unchanged(alice, node, ["keep"])


async def test_unknown_namespaces_and_elements(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("e"))
    await publish(alice, node, "keep")
    # RFC 6120 §8.4: a payload namespace nobody serves -> service-unavailable
    await expect_error(
        send(iq(alice, "<query xmlns='urn:example:nobody-knows'/>", "get")),
        "service-unavailable",
        "cancel",
    )
    # a pubsub request the service does not know -> feature-not-implemented
    unknown = iq(
        alice, f"<pubsub xmlns='{PUBSUB}'><frobnicate xmlns='{PUBSUB}' node='{node}'/></pubsub>"
    )
    info = await expect_error_condition(send(unknown), "feature-not-implemented", "cancel")
    assert info
    unknown_owner = iq(
        alice, f"<pubsub xmlns='{PUBSUB_OWNER}'><frobnicate node='{node}'/></pubsub>"
    )
    await expect_error_condition(send(unknown_owner), "feature-not-implemented", "cancel")
    await _alive_and_unchanged(alice, node, ["keep"])


async def expect_error_condition(request, condition: str, etype: str):
    """Condition and type only: for requests the spec gives no pubsub#errors child."""
    try:
        await request
    except IqError as exc:
        info = error_info(exc.iq)
        assert (info.condition, info.type) == (condition, etype), info.xml
        return info
    raise AssertionError(f"expected {condition}/{etype}, got a result")


async def test_garbage_and_control_character_ids(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("e"))
    await publish(alice, node, "keep")
    # (ASCII controls other than tab/LF/CR cannot cross an XML stream at all, and the
    # ones that can are normalised to spaces in attributes; C1 controls and DEL can.)
    for bad_id in ("c1\x85control", "del\x7fchar", "x" * 2000):
        await expect_error(publish(alice, node, bad_id), "bad-request", "modify")
        await expect_error(
            alice.plugin["xep_0060"].retract(SERVICE, node, bad_id, timeout=TIMEOUT),
            "bad-request",
            "modify",
        )
    for bad_node in ("c1\x9bnode", "y" * 2000):
        await expect_error(create_node(alice, bad_node), "bad-request", "modify")
    await _alive_and_unchanged(alice, node, ["keep"])


async def test_doctype_and_entities_in_a_payload_stay_inert_text(connect):
    """XMPP streams carry no DTDs (RFC 6120 §11.1), so a hostile payload can only hold
    them as escaped text: it must be stored and returned verbatim, never expanded."""
    alice = await connect("alice")
    node = await create_node(alice, unique("e"))
    hostile = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        '<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
        '<!ENTITY xxe SYSTEM "file:///etc/passwd">]><lolz>&lol2;&xxe;</lolz>'
    )
    await publish(alice, node, "bomb", hostile)
    got = items_of(await items(alice, node))
    text = got["bomb"].find(f"{{{EXAMPLE_NS}}}example").text
    assert text == hostile
    assert "root:" not in text


async def test_bad_subscribe_options_form_values_leave_no_subscription(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_node(alice, unique("e"))
    stanza = iq(
        bob,
        f"<pubsub xmlns='{PUBSUB}'><subscribe node='{node}' jid='{bob.boundjid.bare}'/>"
        f"<options node='{node}' jid='{bob.boundjid.bare}'/></pubsub>",
    )
    stanza.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}options").append(
        form_xml(SUBSCRIBE_OPTIONS, {PS + "deliver": "sometimes"})
    )
    # §6.3.6.2 says bad-request for an options submission; docs/queueing.md answers a subscribe
    # with not-acceptable. Either carries <invalid-options/>.
    with pytest.raises(IqError) as caught:
        await send(stanza)
    info = error_info(caught.value.iq)
    assert info.pubsub == "invalid-options" and info.type == "modify", info.xml
    assert info.condition in ("bad-request", "not-acceptable"), info.xml
    subs = await alice.plugin["xep_0060"].get_node_subscriptions(SERVICE, node, timeout=TIMEOUT)
    assert list(subs.xml.iter(f"{{{PUBSUB_OWNER}}}subscription")) == []


async def test_component_survives_a_burst_of_malformed_requests(connect):
    alice = await connect("alice")
    node = await create_node(alice, unique("e"))
    await publish(alice, node, "keep", "original")
    user = f"<pubsub xmlns='{PUBSUB}'>"
    owner = f"<pubsub xmlns='{PUBSUB_OWNER}'>"
    affiliation = f"{owner}<affiliations node='{node}'><affiliation jid='%s' affiliation='%s'/>"
    bodies = [
        f"{user}",
        f"{user}<publish node='{node}'><item id='keep'>not-xml-just-text</item></publish>",
        f"{user}<retract node='{node}'><item id=''/></retract>",
        f"{user}<subscribe node='{node}'/>",
        f"{user}<items node='{node}' max_items='lots'/>",
        f"{user}<items node='{node}' max_items='-1'/>",
        f"{owner}<configure node='{node}'><x xmlns='jabber:x:data' type='submit'/></configure>",
        affiliation % ("not a jid@@", "owner") + "</affiliations>",
        affiliation % ("x@localhost", "emperor") + "</affiliations>",
        f"{owner}<subscriptions node='{node}'>"
        "<subscription jid='x@localhost' subscription='maybe'/></subscriptions>",
    ]
    bodies = [b + "</pubsub>" for b in bodies]
    for body in bodies:
        itype = "get" if "<items" in body else "set"
        try:
            await send(iq(alice, body, itype))
        except IqError as exc:
            info = error_info(exc.iq)
            assert info.condition != "internal-server-error", f"{body} -> {info.xml}"
            assert info.type in ("modify", "cancel", "auth"), f"{body} -> {info.xml}"
        else:
            # a configure with an empty submit form is a valid no-op (XEP-0004 §3.5)
            assert "<configure" in body, f"malformed request accepted: {body}"
    got = items_of(await items(alice, node))
    assert list(got) == ["keep"]
    assert got["keep"].find(f"{{{EXAMPLE_NS}}}example").text == "original"
    affs = await alice.plugin["xep_0060"].get_node_affiliations(SERVICE, node, timeout=TIMEOUT)
    assert {a.get("jid") for a in affs.xml.iter(f"{{{PUBSUB_OWNER}}}affiliation")} == {
        alice.boundjid.bare
    }
