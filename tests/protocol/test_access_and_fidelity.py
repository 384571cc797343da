"""On the wire: the service access policy and the XEP-0060 points of issue 10.

A stranger (outside ``[access] users``) gets forbidden for pubsub requests and
service-unavailable for disco, and its presence is ignored; the ``publisher``
attribute (§7.1.2, §12 itemreply); unsubscribe's ``subscription='none'``
(§6.2.2); the description/type/notification_type/itemreply fields through
configure and publish-options (§16.4, §7.1.5); XEP-0254's ``<options/>`` without
node/jid; node full (§7.1.3).
"""

from __future__ import annotations

import logging

import pytest

from tests.kit.stanzas import (
    ALICE,
    BOB,
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
    make_queue,
    messages,
    publish,
    pubsub,
    submit,
    subscribe_worker,
)

STRANGER = "mallory@elsewhere.example/x"
PUBLISH_OPTIONS = "http://jabber.org/protocol/pubsub#publish-options"


async def test_a_stranger_gets_forbidden_for_pubsub_and_service_unavailable_for_disco(
    stream: Stream,
) -> None:
    await make_node(stream, "news")
    for itype, body, ns in (
        ("set", "<create node='mine'/>", NS["ps"]),
        ("set", f"<subscribe node='news' jid='{STRANGER}'/>", NS["ps"]),
        ("get", "<items node='news'/>", NS["ps"]),
        ("set", "<publish node='news'><item id='x'><a xmlns='urn:x'/></item></publish>", NS["ps"]),
        ("get", "<subscriptions/>", NS["ps"]),
        ("get", "<default/>", OWNER_NS),
        ("get", "<configure node='news'/>", OWNER_NS),
    ):
        reply, out = await stream.iq(itype, STRANGER, pubsub(body, ns))
        assert error_of(reply)[:2] == ("auth", "forbidden"), body
        assert out == []
    commands = " node='http://jabber.org/protocol/commands'"  # XEP-0050's node too
    for query, node in (
        ("di", ""),
        ("dit", ""),
        ("di", " node='news'"),
        ("dit", " node='news'"),
        ("di", commands),
        ("dit", commands),
    ):
        ns = NS[query]
        head = f"<iq type='get' id='d' from='{STRANGER}' to='{SERVICE}'>"
        out = await stream.send(f"{head}<query xmlns='{ns}'{node}/></iq>")
        [reply] = out
        assert error_of(reply)[:2] == ("cancel", "service-unavailable"), query + node
    # Its presence is neither answered nor tracked.
    out = await stream.send(f"<presence from='{STRANGER}' to='{SERVICE}'/>")
    assert out == []
    # A user of the parent domain is served as before.
    reply, _ = await stream.iq("get", ALICE, pubsub("<items node='news'/>"))
    assert reply.get("type") == "result"


async def test_disco_refusals_are_logged_once_per_jid_not_once_for_everyone(
    stream: Stream, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 27 point 8: a stranger knocking by disco costs one line, and it does not
    use up the line another JID's refused disco gets (they shared one budget)."""
    head = f"<iq type='get' id='d' from='{STRANGER}' to='{SERVICE}'>"
    with caplog.at_level(logging.INFO, "xmpp_queue.xmpp.errors"):
        for _ in range(50):
            await stream.send(f"{head}<query xmlns='{NS['dit']}'/></iq>")
        reply = await stream.send(
            f"<iq type='get' id='a' from='{ALICE}' to='{SERVICE}'>"
            f"<query xmlns='{NS['di']}' node='no-such-node'/></iq>"
        )
    assert error_of(reply[0])[1] == "item-not-found"
    lines = [r.getMessage() for r in caplog.records if "event=request_refused" in r.getMessage()]
    assert len(lines) == 2, lines
    assert f"from={STRANGER}" in lines[0] and f"from={ALICE}" in lines[1]


async def test_7_1_2_publisher_attribute_when_itemreply_is_publisher(stream: Stream) -> None:
    """§7.1.2 "Item Publisher" / §12 itemreply: publisher on notifications and on
    every item retrieval; none when the node does not expose it."""
    await make_node(stream, "news", pubsub__itemreply="publisher")
    await stream.iq("set", ALICE, pubsub(f"<subscribe node='news' jid='{ALICE}'/>"))
    _, out = await publish(stream, "news", "i1", who=OWNER)
    [note] = messages(out)
    assert find(note, "ev:event/ev:items/ev:item").get("publisher") == "owner@example.org"
    reply, _ = await stream.iq("get", ALICE, pubsub("<items node='news'/>"))
    assert find(reply, "ps:pubsub/ps:items/ps:item").get("publisher") == "owner@example.org"
    await make_node(stream, "quiet")
    await stream.iq("set", ALICE, pubsub(f"<subscribe node='quiet' jid='{ALICE}'/>"))
    _, out = await publish(stream, "quiet", "i1", who=OWNER)
    [note] = messages(out)
    assert find(note, "ev:event/ev:items/ev:item").get("publisher") is None
    reply, _ = await stream.iq("get", ALICE, pubsub("<items node='quiet'/>"))
    assert find(reply, "ps:pubsub/ps:items/ps:item").get("publisher") is None


async def test_7_1_2_a_worker_sees_who_sent_the_job_on_a_queue(stream: Stream) -> None:
    await make_queue(stream, pubsub__itemreply="publisher")
    await subscribe_worker(stream, ALICE, 1)
    _, out = await publish(stream, "jobs", "j1")
    [note] = messages(out)  # the per-item text path
    assert find(note, "ev:event/ev:items/ev:item").get("publisher") == "pub@example.org"


async def test_6_2_2_unsubscribe_answers_with_subscription_none(stream: Stream) -> None:
    await make_node(stream, "news")
    reply, _ = await stream.iq("set", ALICE, pubsub(f"<subscribe node='news' jid='{ALICE}'/>"))
    subid = find(reply, "ps:pubsub/ps:subscription").get("subid")
    reply, _ = await stream.iq("set", ALICE, pubsub(f"<unsubscribe node='news' jid='{ALICE}'/>"))
    sub = find(reply, "ps:pubsub/ps:subscription")
    assert (sub.get("node"), sub.get("jid"), sub.get("subscription"), sub.get("subid")) == (
        "news",
        ALICE,
        "none",
        subid,
    )


async def test_16_4_new_config_fields_round_trip_through_configure_and_publish_options(
    stream: Stream,
) -> None:
    fields = {
        "pubsub__description": "Invoices to render",
        "pubsub__type": "urn:example:invoice",
        "pubsub__notification_type": "normal",
        "pubsub__itemreply": "publisher",
    }
    await make_node(stream, "news")
    form = submit(NODE_CONFIG, **fields)
    reply, _ = await stream.iq(
        "set", OWNER, pubsub(f"<configure node='news'>{form}</configure>", OWNER_NS)
    )
    assert reply.get("type") == "result"
    reply, _ = await stream.iq("get", OWNER, pubsub("<configure node='news'/>", OWNER_NS))
    shown = {
        f.get("var"): f.findtext("x:value", namespaces=NS) for f in reply.iterfind(".//x:field", NS)
    }
    for var, value in fields.items():
        assert shown[var.replace("__", "#")] == value
    notification_type = find(reply, ".//x:field[@var='pubsub#notification_type']")
    assert {
        o.findtext("x:value", namespaces=NS) for o in notification_type.iterfind("x:option", NS)
    } == {
        "headline",
        "normal",
    }
    # §7.1.5: publish-options are preconditions on these fields too.
    item = "<item id='p1'><a xmlns='urn:example:invoice'/></item>"
    matching = submit(
        PUBLISH_OPTIONS, pubsub__itemreply="publisher", pubsub__type="urn:example:invoice"
    )
    reply, _ = await stream.iq(
        "set",
        OWNER,
        pubsub(
            f"<publish node='news'>{item}</publish><publish-options>{matching}</publish-options>"
        ),
    )
    assert reply.get("type") == "result"
    wrong = submit(PUBLISH_OPTIONS, pubsub__notification_type="headline")
    reply, _ = await stream.iq(
        "set",
        OWNER,
        pubsub(f"<publish node='news'>{item}</publish><publish-options>{wrong}</publish-options>"),
    )
    assert error_of(reply) == ("cancel", "conflict", "precondition-not-met")
    # A value the field does not offer is refused (§8.2.5.2), nothing changes.
    form = submit(NODE_CONFIG, pubsub__itemreply="owner")
    reply, _ = await stream.iq(
        "set", OWNER, pubsub(f"<configure node='news'>{form}</configure>", OWNER_NS)
    )
    assert error_of(reply)[:2] == ("modify", "not-acceptable")


async def test_xep_0254_options_without_node_and_jid_belong_to_the_subscribe(
    stream: Stream,
) -> None:
    """XEP-0254 §2.1's examples carry <options/> with no (or empty) node and jid:
    they apply to the <subscribe/> beside them. Naming another node or JID is
    bad-request."""
    await make_queue(stream)
    form = submit(SUB_OPTIONS, pubsub__queue_requests="2")
    for attrs in ("", " node='' jid=''", f" node='jobs' jid='{ALICE}'"):
        reply, _ = await stream.iq(
            "set",
            ALICE,
            pubsub(f"<subscribe node='jobs' jid='{ALICE}'/><options{attrs}>{form}</options>"),
        )
        assert reply.get("type") == "result", attrs
        echo = find(reply, "ps:pubsub/ps:options")
        assert echo.get("node") is None and echo.get("jid") is None  # as XEP-0254's result
    for attrs in (" node='other'", f" jid='{BOB}'"):
        reply, _ = await stream.iq(
            "set",
            ALICE,
            pubsub(f"<subscribe node='jobs' jid='{ALICE}'/><options{attrs}>{form}</options>"),
        )
        assert error_of(reply)[:2] == ("modify", "bad-request"), attrs


async def test_7_1_3_node_full_is_conflict_with_node_full(stream: Stream) -> None:
    await make_queue(stream, pubsub__max_items="1")
    reply, _ = await publish(stream, "jobs", "i1")
    assert reply.get("type") == "result"
    reply, _ = await publish(stream, "jobs", "i2")
    assert error_of(reply) == ("cancel", "conflict", "node-full")


async def test_queue_notices_follow_notification_type_normal(stream: Stream) -> None:
    await make_queue(stream, pubsub__notification_type="normal")
    await subscribe_worker(stream, ALICE, 1)
    _, out = await publish(stream, "jobs", "j1", who=PUB)
    [note] = messages(out)
    assert note.get("type") is None
