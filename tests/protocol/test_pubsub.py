"""XEP-0060 use cases on the wire: the stanza shapes of each section."""

from __future__ import annotations

from tests.kit.stanzas import (
    ALICE,
    BOB,
    EVE,
    NODE_CONFIG,
    NS,
    OWNER,
    OWNER_NS,
    PUB,
    SERVICE,
    SUB_OPTIONS,
    Stream,
    error_of,
    find,
    make_node,
    messages,
    publish,
    pubsub,
    submit,
)


async def subscribe(stream: Stream, who: str, node: str = "news") -> str:
    reply, _ = await stream.iq("set", who, pubsub(f"<subscribe node='{node}' jid='{who}'/>"))
    sub = find(reply, "ps:pubsub/ps:subscription")
    assert sub.get("subscription") == "subscribed"
    return sub.get("subid", "")


async def test_8_1_1_create_named_node_returns_empty_result(stream: Stream) -> None:
    reply, _ = await stream.iq("set", OWNER, pubsub("<create node='princely_musings'/>"))
    assert reply.get("type") == "result" and list(reply) == []
    reply, _ = await stream.iq("set", OWNER, pubsub("<create node='princely_musings'/>"))
    assert error_of(reply) == ("cancel", "conflict", None)


async def test_8_1_2_instant_node_name_is_returned(stream: Stream) -> None:
    reply, _ = await stream.iq("set", OWNER, pubsub("<create/>"))
    assert find(reply, "ps:pubsub/ps:create").get("node")


async def test_8_1_3_create_and_configure(stream: Stream) -> None:
    await make_node(stream, "cfg", pubsub__title="Configured", pubsub__max_items="3")
    reply, _ = await stream.iq("get", OWNER, pubsub("<configure node='cfg'/>", OWNER_NS))
    form = find(reply, "o:pubsub/o:configure[@node='cfg']/x:x")
    assert form.get("type") == "form"
    assert find(form, "x:field[@var='FORM_TYPE']/x:value").text == NODE_CONFIG
    assert find(form, "x:field[@var='pubsub#title']/x:value").text == "Configured"
    assert find(form, "x:field[@var='pubsub#max_items']/x:value").text == "3"
    access = find(form, "x:field[@var='pubsub#access_model']")
    assert access.get("type") == "list-single"
    assert {v.text for v in access.findall("x:option/x:value", NS)} == {
        "open",
        "whitelist",
        "authorize",
    }


async def test_8_2_5_invalid_configuration_is_not_acceptable(stream: Stream) -> None:
    reply, _ = await stream.iq(
        "set",
        OWNER,
        pubsub(
            f"<create node='bad'/><configure>{submit(NODE_CONFIG, pubsub__max_items='x')}"
            "</configure>"
        ),
    )
    assert error_of(reply) == ("modify", "not-acceptable", None)


async def test_8_2_configure_set_notifies_and_cancel_changes_nothing(stream: Stream) -> None:
    await make_node(stream, "news", pubsub__notify_config="1")
    await subscribe(stream, ALICE)
    form = submit(NODE_CONFIG, pubsub__title="Renamed")
    reply, out = await stream.iq(
        "set", OWNER, pubsub(f"<configure node='news'>{form}</configure>", OWNER_NS)
    )
    assert reply.get("type") == "result"
    [note] = messages(out)
    assert note.get("to") == ALICE and note.get("type") == "headline"
    config = find(note, "ev:event/ev:configuration[@node='news']/x:x")
    assert find(config, "x:field[@var='pubsub#title']/x:value").text == "Renamed"
    cancel = "<x xmlns='jabber:x:data' type='cancel'/>"
    reply, out = await stream.iq(
        "set", OWNER, pubsub(f"<configure node='news'>{cancel}</configure>", OWNER_NS)
    )
    assert reply.get("type") == "result" and out == []


async def test_8_2_configure_needs_owner(stream: Stream) -> None:
    await make_node(stream, "news")
    reply, _ = await stream.iq("get", EVE, pubsub("<configure node='news'/>", OWNER_NS))
    assert error_of(reply) == ("auth", "forbidden", None)


async def test_8_3_default_node_configuration(stream: Stream) -> None:
    reply, _ = await stream.iq("get", OWNER, pubsub("<default/>", OWNER_NS))
    form = find(reply, "o:pubsub/o:default/x:x")
    assert find(form, "x:field[@var='pubsub#persist_items']/x:value").text == "1"
    assert find(form, "x:field[@var='pubsub#queue']").get("type") == "boolean"


async def test_8_4_delete_with_redirect_notifies_subscribers(stream: Stream) -> None:
    await make_node(stream, "news")
    await subscribe(stream, ALICE)
    uri = "xmpp:pubsub.example.org?;node=new"
    reply, out = await stream.iq(
        "set",
        OWNER,
        pubsub(f"<delete node='news'><redirect uri='{uri}'/></delete>", OWNER_NS),
    )
    assert reply.get("type") == "result"
    [note] = messages(out)
    assert find(note, "ev:event/ev:delete[@node='news']/ev:redirect").get("uri") == uri
    reply, _ = await stream.iq("set", OWNER, pubsub("<delete node='news'/>", OWNER_NS))
    assert error_of(reply) == ("cancel", "item-not-found", None)


async def test_8_5_purge_notifies_subscribers(stream: Stream) -> None:
    await make_node(stream, "news")
    await subscribe(stream, ALICE)
    await publish(stream, "news", "i1", who=OWNER)
    reply, out = await stream.iq("set", OWNER, pubsub("<purge node='news'/>", OWNER_NS))
    assert reply.get("type") == "result"
    [note] = messages(out)
    find(note, "ev:event/ev:purge[@node='news']")
    reply, _ = await stream.iq("get", OWNER, pubsub("<items node='news'/>"))
    assert find(reply, "ps:pubsub/ps:items").findall("ps:item", NS) == []


async def test_7_1_publish_result_and_headline_notification(stream: Stream) -> None:
    await make_node(stream, "news")
    subid = await subscribe(stream, ALICE)
    reply, out = await publish(stream, "news", "ae890ac52d0df67ed7cfdf51b644e901", who=OWNER)
    assert find(reply, "ps:pubsub/ps:publish[@node='news']/ps:item").get("id") == (
        "ae890ac52d0df67ed7cfdf51b644e901"
    )
    [note] = messages(out)
    assert note.get("type") == "headline" and note.get("from") == SERVICE
    item = find(note, "ev:event/ev:items[@node='news']/ev:item")
    assert find(item, "{urn:example}job").text == "x"
    assert find(note, "shim:headers/shim:header[@name='SubID']").text == subid


async def test_7_1_publish_without_item_id_gets_one(stream: Stream) -> None:
    await make_node(stream, "news")
    reply, _ = await stream.iq(
        "set", OWNER, pubsub("<publish node='news'><item><e xmlns='urn:e'/></item></publish>")
    )
    assert find(reply, "ps:pubsub/ps:publish/ps:item").get("id")


async def test_7_1_3_1_publish_forbidden(stream: Stream) -> None:
    await make_node(stream, "news")
    reply, _ = await publish(stream, "news", "i1", who=EVE)
    assert error_of(reply) == ("auth", "forbidden", None)


async def test_7_1_3_item_required(stream: Stream) -> None:
    await make_node(stream, "news")
    reply, _ = await stream.iq("set", OWNER, pubsub("<publish node='news'/>"))
    assert error_of(reply) == ("modify", "bad-request", "item-required")


async def test_13_11_batch_publish_is_all_or_none_and_answers_every_id(stream: Stream) -> None:
    """§13.11: several items in one publish (docs/queueing.md: §13.11 wins over §7.1.1's "one
    item" note); one bad item fails the whole batch and stores nothing."""
    await make_node(stream, "news")
    bad = "<item id='a'><e xmlns='urn:e'/></item><item id='b'/>"  # b: payload required
    reply, _ = await stream.iq("set", OWNER, pubsub(f"<publish node='news'>{bad}</publish>"))
    assert error_of(reply) == ("modify", "bad-request", "payload-required")
    items, _ = await stream.iq("get", OWNER, pubsub("<items node='news'/>"), iq_id="g")
    assert find(items, "ps:pubsub/ps:items").findall("ps:item", NS) == []
    good = "<item id='a'><e xmlns='urn:e'/></item><item><e xmlns='urn:e'/></item>"
    reply, _ = await stream.iq("set", OWNER, pubsub(f"<publish node='news'>{good}</publish>"))
    ids = [i.get("id") for i in reply.findall("ps:pubsub/ps:publish/ps:item", NS)]
    assert ids[0] == "a" and ids[1] and len(ids) == 2


async def test_7_1_3_payload_required_on_a_payload_node(stream: Stream) -> None:
    await make_node(stream, "news")
    reply, _ = await stream.iq(
        "set", OWNER, pubsub("<publish node='news'><item id='a'/></publish>")
    )
    assert error_of(reply) == ("modify", "bad-request", "payload-required")


async def test_7_1_5_publish_options_precondition(stream: Stream) -> None:
    await make_node(stream, "news")
    options = (
        "<publish-options>"
        + submit(
            "http://jabber.org/protocol/pubsub#publish-options", pubsub__access_model="whitelist"
        )
        + "</publish-options>"
    )
    item = "<publish node='news'><item id='a'><e xmlns='urn:e'/></item></publish>"
    reply, _ = await stream.iq("set", OWNER, pubsub(item + options))
    assert error_of(reply) == ("cancel", "conflict", "precondition-not-met")
    ok = options.replace("whitelist", "open")
    reply, _ = await stream.iq("set", OWNER, pubsub(item + ok))
    assert reply.get("type") == "result"


async def test_7_2_retract_with_notify(stream: Stream) -> None:
    await make_node(stream, "news")
    await subscribe(stream, ALICE)
    await publish(stream, "news", "i1", who=OWNER)
    reply, out = await stream.iq(
        "set", OWNER, pubsub("<retract node='news' notify='true'><item id='i1'/></retract>")
    )
    assert reply.get("type") == "result"
    [note] = messages(out)
    assert find(note, "ev:event/ev:items[@node='news']/ev:retract").get("id") == "i1"


async def test_7_2_3_retract_errors(stream: Stream) -> None:
    await make_node(stream, "news")
    reply, _ = await stream.iq("set", OWNER, pubsub("<retract><item id='i1'/></retract>"))
    assert error_of(reply) == ("modify", "bad-request", "nodeid-required")
    reply, _ = await stream.iq("set", OWNER, pubsub("<retract node='news'/>"))
    assert error_of(reply) == ("modify", "bad-request", "item-required")
    reply, _ = await stream.iq("set", OWNER, pubsub("<retract node='news'><item/></retract>"))
    assert error_of(reply) == ("modify", "bad-request", "item-required")
    reply, _ = await stream.iq(
        "set", OWNER, pubsub("<retract node='gone'><item id='i'/></retract>")
    )
    assert error_of(reply) == ("cancel", "item-not-found", None)


async def test_6_1_subscribe_shapes_and_errors(stream: Stream) -> None:
    await make_node(stream, "news")
    reply, _ = await stream.iq("set", ALICE, pubsub(f"<subscribe node='news' jid='{ALICE}'/>"))
    sub = find(reply, "ps:pubsub/ps:subscription")
    assert sub.attrib.keys() == {"node", "jid", "subid", "subscription"}
    assert sub.get("jid") == ALICE
    reply, _ = await stream.iq("set", ALICE, pubsub(f"<subscribe node='news' jid='{BOB}'/>"))
    assert error_of(reply) == ("modify", "bad-request", "invalid-jid")
    reply, _ = await stream.iq("set", ALICE, pubsub("<subscribe node='news'/>"))
    assert error_of(reply) == ("modify", "bad-request", "jid-required")
    reply, _ = await stream.iq("set", ALICE, pubsub(f"<subscribe node='nope' jid='{ALICE}'/>"))
    assert error_of(reply) == ("cancel", "item-not-found", None)


async def test_6_1_3_4_whitelist_node_is_closed(stream: Stream) -> None:
    await make_node(stream, "club", pubsub__access_model="whitelist")
    reply, _ = await stream.iq("set", EVE, pubsub(f"<subscribe node='club' jid='{EVE}'/>"))
    assert error_of(reply) == ("cancel", "not-allowed", "closed-node")


async def test_6_2_unsubscribe_and_not_subscribed(stream: Stream) -> None:
    await make_node(stream, "news")
    await subscribe(stream, ALICE)
    reply, _ = await stream.iq("set", ALICE, pubsub(f"<unsubscribe node='news' jid='{ALICE}'/>"))
    assert reply.get("type") == "result"
    reply, _ = await stream.iq("set", ALICE, pubsub(f"<unsubscribe node='news' jid='{ALICE}'/>"))
    assert error_of(reply) == ("cancel", "unexpected-request", "not-subscribed")


async def test_6_3_options_get_set_and_errors(stream: Stream) -> None:
    await make_node(stream, "news")
    subid = await subscribe(stream, ALICE)
    reply, _ = await stream.iq("get", ALICE, pubsub(f"<options node='news' jid='{ALICE}'/>"))
    options = find(reply, "ps:pubsub/ps:options")
    assert options.get("subid") == subid
    form = find(options, "x:x")
    assert find(form, "x:field[@var='FORM_TYPE']/x:value").text == SUB_OPTIONS
    assert find(form, "x:field[@var='pubsub#deliver']").get("type") == "boolean"
    assert form.find("x:field[@var='pubsub#queue_requests']", NS) is None  # not a queue
    good = submit(SUB_OPTIONS, pubsub__deliver="0")
    reply, _ = await stream.iq(
        "set", ALICE, pubsub(f"<options node='news' jid='{ALICE}'>{good}</options>")
    )
    assert reply.get("type") == "result"
    bad = submit(SUB_OPTIONS, pubsub__deliver="perhaps")
    reply, _ = await stream.iq(
        "set", ALICE, pubsub(f"<options node='news' jid='{ALICE}'>{bad}</options>")
    )
    assert error_of(reply) == ("modify", "bad-request", "invalid-options")  # §6.3.6.2
    reply, _ = await stream.iq("get", BOB, pubsub(f"<options node='news' jid='{BOB}'/>"))
    assert error_of(reply) == ("modify", "unexpected-request", "not-subscribed")  # §6.3.4.2
    reply, _ = await stream.iq("get", ALICE, pubsub("<options node='news'/>"))
    assert error_of(reply) == ("modify", "bad-request", "jid-required")  # §6.3.4.3
    reply, _ = await stream.iq("get", BOB, pubsub(f"<options node='news' jid='{ALICE}'/>"))
    assert error_of(reply) == ("auth", "forbidden", None)  # §6.3.4.1


async def test_6_4_default_subscription_options(stream: Stream) -> None:
    reply, _ = await stream.iq("get", ALICE, pubsub("<default/>"))
    form = find(reply, "ps:pubsub/ps:default/x:x")
    assert find(form, "x:field[@var='pubsub#deliver']/x:value").text == "1"


async def test_6_5_items_all_by_id_and_max_items(stream: Stream) -> None:
    await make_node(stream, "news")
    for n in range(4):
        await publish(stream, "news", f"i{n}", who=OWNER)
    reply, _ = await stream.iq("get", ALICE, pubsub("<items node='news'/>"))
    items = find(reply, "ps:pubsub/ps:items[@node='news']")
    assert [i.get("id") for i in items] == ["i0", "i1", "i2", "i3"]
    assert find(items[0], "{urn:example}job").text == "x"
    assert reply.find("ps:pubsub/rsm:set", NS) is None
    reply, _ = await stream.iq("get", ALICE, pubsub("<items node='news' max_items='2'/>"))
    assert [i.get("id") for i in find(reply, "ps:pubsub/ps:items")] == ["i2", "i3"]
    reply, _ = await stream.iq(
        "get", ALICE, pubsub("<items node='news'><item id='i1'/><item id='zz'/></items>")
    )
    assert [i.get("id") for i in find(reply, "ps:pubsub/ps:items")] == ["i1"]
    reply, _ = await stream.iq("get", ALICE, pubsub("<items node='news' max_items='-1'/>"))
    assert error_of(reply) == ("modify", "bad-request", None)
    reply, _ = await stream.iq("get", ALICE, pubsub("<items node='news' max_items='many'/>"))
    assert error_of(reply) == ("modify", "bad-request", None)


async def test_6_5_4_items_paged_with_rsm(stream: Stream) -> None:
    await make_node(stream, "news")
    for n in range(5):
        await publish(stream, "news", f"i{n}", who=OWNER)
    rsm = "<set xmlns='http://jabber.org/protocol/rsm'><max>2</max>{}</set>"
    reply, _ = await stream.iq("get", ALICE, pubsub("<items node='news'/>" + rsm.format("")))
    assert [i.get("id") for i in find(reply, "ps:pubsub/ps:items")] == ["i0", "i1"]
    page = find(reply, "ps:pubsub/rsm:set")
    assert find(page, "rsm:first").text == "i0" and find(page, "rsm:first").get("index") == "0"
    assert find(page, "rsm:last").text == "i1" and find(page, "rsm:count").text == "5"
    reply, _ = await stream.iq(
        "get", ALICE, pubsub("<items node='news'/>" + rsm.format("<after>i1</after>"))
    )
    assert [i.get("id") for i in find(reply, "ps:pubsub/ps:items")] == ["i2", "i3"]
    reply, _ = await stream.iq(
        "get", ALICE, pubsub("<items node='news'/>" + rsm.format("<before/>"))
    )
    assert [i.get("id") for i in find(reply, "ps:pubsub/ps:items")] == ["i3", "i4"]
    reply, _ = await stream.iq(
        "get", ALICE, pubsub("<items node='news'/>" + rsm.format("<after>gone</after>"))
    )
    assert error_of(reply) == ("cancel", "item-not-found", None)
    reply, _ = await stream.iq(
        "get", ALICE, pubsub("<items node='news'/>" + rsm.format("<index>x</index>"))
    )
    assert error_of(reply) == ("modify", "bad-request", None)


async def test_5_6_and_5_7_own_subscriptions_and_affiliations(stream: Stream) -> None:
    await make_node(stream, "news")
    subid = await subscribe(stream, ALICE)
    reply, _ = await stream.iq("get", ALICE, pubsub("<subscriptions/>"))
    [sub] = find(reply, "ps:pubsub/ps:subscriptions")
    assert sub.attrib == {
        "node": "news",
        "jid": ALICE,
        "subscription": "subscribed",
        "subid": subid,
    }
    reply, _ = await stream.iq("get", OWNER, pubsub("<affiliations/>"))
    [aff] = find(reply, "ps:pubsub/ps:affiliations")
    assert aff.attrib == {"node": "news", "affiliation": "owner"}


async def test_8_8_owner_manages_subscriptions(stream: Stream) -> None:
    await make_node(stream, "news")
    subid = await subscribe(stream, ALICE)
    reply, _ = await stream.iq("get", OWNER, pubsub("<subscriptions node='news'/>", OWNER_NS))
    [sub] = find(reply, "o:pubsub/o:subscriptions[@node='news']")
    assert sub.attrib == {"jid": ALICE, "subscription": "subscribed", "subid": subid}
    reply, out = await stream.iq(
        "set",
        OWNER,
        pubsub(
            f"<subscriptions node='news'><subscription jid='{ALICE}' subscription='none'/>"
            "</subscriptions>",
            OWNER_NS,
        ),
    )
    assert reply.get("type") == "result"
    [note] = messages(out)
    assert find(note, "ev:event/ev:subscription").get("subscription") == "none"
    reply, _ = await stream.iq(
        "set",
        OWNER,
        pubsub(
            f"<subscriptions node='news'><subscription jid='{ALICE}' subscription='maybe'/>"
            "</subscriptions>",
            OWNER_NS,
        ),
    )
    assert error_of(reply) == ("modify", "bad-request", None)
    reply, _ = await stream.iq("get", ALICE, pubsub("<subscriptions node='news'/>", OWNER_NS))
    assert error_of(reply) == ("auth", "forbidden", None)


async def test_8_9_owner_manages_affiliations(stream: Stream) -> None:
    await make_node(stream, "news")
    reply, _ = await stream.iq(
        "set",
        OWNER,
        pubsub(
            "<affiliations node='news'><affiliation jid='pub@example.org' affiliation='publisher'/>"
            "</affiliations>",
            OWNER_NS,
        ),
    )
    assert reply.get("type") == "result"
    reply, _ = await stream.iq("get", OWNER, pubsub("<affiliations node='news'/>", OWNER_NS))
    got = {a.get("jid"): a.get("affiliation") for a in find(reply, "o:pubsub/o:affiliations")}
    assert got == {"owner@example.org": "owner", "pub@example.org": "publisher"}
    reply, _ = await publish(stream, "news", "from-publisher", who=PUB)
    assert reply.get("type") == "result"
    reply, _ = await stream.iq(
        "set",
        OWNER,
        pubsub(
            "<affiliations node='news'><affiliation jid='x@example.org' affiliation='king'/>"
            "</affiliations>",
            OWNER_NS,
        ),
    )
    assert error_of(reply) == ("modify", "bad-request", None)


async def test_missing_node_attribute_is_nodeid_required(stream: Stream) -> None:
    for itype, body, ns in (
        ("set", "<publish><item id='a'/></publish>", None),
        ("get", "<items/>", None),
        ("set", f"<subscribe jid='{ALICE}'/>", None),
        ("get", "<configure/>", OWNER_NS),
        ("set", "<purge/>", OWNER_NS),
        ("set", "<unlock xmlns='urn:xmpp:pubsub:queueing:0'><item id='a'/></unlock>", None),
    ):
        reply, _ = await stream.iq(itype, ALICE, pubsub(body, ns) if ns else pubsub(body))
        assert error_of(reply) == ("modify", "bad-request", "nodeid-required"), body


async def test_garbage_ids_are_refused_and_nothing_is_stored(stream: Stream) -> None:
    await make_node(stream, "news")
    long_id = "x" * 1024
    for item_id in (long_id, "tab&#9;id"):
        reply, _ = await publish(stream, "news", item_id, who=OWNER)
        assert error_of(reply) == ("modify", "bad-request", None)
    reply, _ = await stream.iq("set", OWNER, pubsub(f"<create node='{long_id}'/>"))
    assert error_of(reply) == ("modify", "bad-request", None)
    reply, _ = await stream.iq("set", ALICE, pubsub("<subscribe node='news' jid='a@@b'/>"))
    assert error_of(reply) == ("modify", "bad-request", None)
    reply, _ = await stream.iq("get", OWNER, pubsub("<items node='news'/>"))
    assert list(find(reply, "ps:pubsub/ps:items")) == []


async def test_wrong_iq_type_unknown_element_and_unknown_namespace(stream: Stream) -> None:
    reply, _ = await stream.iq("get", ALICE, pubsub("<publish node='n'/>"))
    assert error_of(reply) == ("modify", "bad-request", None)
    reply, _ = await stream.iq("set", ALICE, pubsub("<frobnicate node='n'/>"))
    assert error_of(reply) == ("cancel", "feature-not-implemented", None)
    reply, _ = await stream.iq("set", ALICE, pubsub(""))
    assert error_of(reply) == ("modify", "bad-request", None)
    reply, _ = await stream.iq("get", ALICE, "<query xmlns='urn:example:unknown'/>")
    assert error_of(reply) == ("cancel", "service-unavailable", None)  # RFC 6120 §8.4


async def test_iq_results_and_errors_to_the_service_are_not_answered(stream: Stream) -> None:
    out = await stream.send(
        f"<iq type='result' id='r1' from='{ALICE}' to='{SERVICE}'>{pubsub('<items/>')}</iq>"
        f"<iq type='error' id='r2' from='{ALICE}' to='{SERVICE}'><error type='cancel'>"
        "<item-not-found xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"
    )
    assert out == []


async def test_8_6_authorize_access_model_asks_the_owner_and_applies_the_answer(
    stream: Stream,
) -> None:
    await make_node(stream, "club", pubsub__access_model="authorize")
    reply, out = await stream.iq("set", EVE, pubsub(f"<subscribe node='club' jid='{EVE}'/>"))
    sub = find(reply, "ps:pubsub/ps:subscription")
    assert sub.get("subscription") == "pending"
    [ask] = messages(out)
    assert ask.get("to") == "owner@example.org" and ask.get("type") is None
    form = find(ask, "x:x")
    values = {f.get("var"): find(f, "x:value").text for f in form}
    assert values["FORM_TYPE"] == "http://jabber.org/protocol/pubsub#subscribe_authorization"
    assert values["pubsub#node"] == "club" and values["pubsub#subscriber_jid"] == EVE
    answer = submit(
        "http://jabber.org/protocol/pubsub#subscribe_authorization",
        pubsub__node="club",
        pubsub__subscriber_jid=EVE,
        pubsub__subid=values["pubsub#subid"] or "",
        pubsub__allow="true",
    )
    out = await stream.send(f"<message from='{OWNER}' to='{SERVICE}'>{answer}</message>")
    [note] = messages(out)
    assert note.get("to") == EVE
    assert find(note, "ev:event/ev:subscription").get("subscription") == "subscribed"


async def test_8_6_an_authorization_answer_from_a_non_owner_is_a_counted_refusal(
    stream: Stream,
) -> None:
    """Nothing changes, nothing is sent, and the refusal counts like any other (issue 27
    point 8: refusals counted and logged at most once per JID per interval)."""
    from xmpp_queue.xmpp.refusals import REFUSALS

    await make_node(stream, "club", pubsub__access_model="authorize")
    await stream.iq("set", EVE, pubsub(f"<subscribe node='club' jid='{EVE}'/>"))
    answer = submit(
        "http://jabber.org/protocol/pubsub#subscribe_authorization",
        pubsub__node="club",
        pubsub__subscriber_jid=EVE,
        pubsub__allow="true",
    )
    for _ in range(3):
        assert await stream.send(f"<message from='{EVE}' to='{SERVICE}'>{answer}</message>") == []
    assert REFUSALS.counts.get("forbidden") == 3


async def test_16_4_notification_type_is_headline_by_default_and_normal_on_request(
    stream: Stream,
) -> None:
    """pubsub#notification_type: headline for ordinary and queue nodes alike unless
    the owner asks for normal; the per-item queue notices follow it too."""
    await make_node(stream, "news")
    await subscribe(stream, ALICE)
    _, out = await publish(stream, "news", "i1", who=OWNER)
    assert [m.get("type") for m in messages(out)] == ["headline"]
    # An open queue, with normal messages (XEP-0060 §16.4 notification_type).
    form = submit(
        NODE_CONFIG,
        pubsub__queue="1",
        pubsub__access_model="open",
        pubsub__notification_type="normal",
    )
    reply, _ = await stream.iq(
        "set", OWNER, pubsub(f"<configure node='news'>{form}</configure>", OWNER_NS)
    )
    assert reply.get("type") == "result"
    options = f"<options>{submit(SUB_OPTIONS, pubsub__queue_requests='1')}</options>"
    # the stored item is handed to the first worker with room, as a queue notice
    _, out = await stream.iq("set", BOB, pubsub(f"<subscribe node='news' jid='{BOB}'/>{options}"))
    [note] = messages(out)
    assert note.get("to") == BOB and note.get("type") is None
