"""The client's stanza strings and parsers (XEP-0060, XEP-0254, XEP-0131), no network."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from xmpp_queue.client import wire, wire_locks

P = "{http://jabber.org/protocol/pubsub}"
X = "{jabber:x:data}"


def parse(xml: str) -> ET.Element:
    """Parse as a c2s stanza would be (default namespace jabber:client)."""
    return ET.fromstring(f"<wrap xmlns='jabber:client'>{xml}</wrap>")[0]


def form_values(x: ET.Element) -> dict[str, str]:
    return {f.get("var", ""): f.findtext(f"{X}value", "") for f in x.findall(f"{X}field")}


def test_iq_escapes_attributes() -> None:
    iq = parse(wire.iq("set", "a'b", "q<s>&x", "<ping xmlns='urn:xmpp:ping'/>"))
    assert (iq.get("type"), iq.get("id"), iq.get("to")) == ("set", "a'b", "q<s>&x")
    assert iq[0].tag == "{urn:xmpp:ping}ping"


def test_publish_puts_the_payload_element_in_one_item() -> None:
    body = parse(wire.publish("jobs'1", "<json xmlns='urn:xmpp:json:0'>[1]</json>", "id-1"))
    publish = body.find(f"{P}publish")
    assert publish is not None and publish.get("node") == "jobs'1"
    (item,) = publish.findall(f"{P}item")
    assert item.get("id") == "id-1"
    assert item[0].tag == "{urn:xmpp:json:0}json"


def test_publish_without_id_or_payload() -> None:
    item = parse(wire.publish("n", None)).find(f"{P}publish/{P}item")
    assert item is not None and item.get("id") is None and len(item) == 0


def test_subscribe_and_options_travel_in_one_request_xep_0254_2_1() -> None:
    body = parse(wire.subscribe("jobs", "bee@x/r", {"pubsub#queue_requests": "5"}))
    sub, opts = body.find(f"{P}subscribe"), body.find(f"{P}options")
    assert sub is not None and sub.attrib == {"node": "jobs", "jid": "bee@x/r"}
    assert opts is not None and opts.attrib == {"node": "jobs", "jid": "bee@x/r"}
    x = opts.find(f"{X}x")
    assert x is not None and x.get("type") == "submit"
    assert form_values(x) == {
        "FORM_TYPE": wire.SUBSCRIBE_OPTIONS_FORM,
        "pubsub#queue_requests": "5",
    }


def test_create_node_with_and_without_config() -> None:
    body = parse(wire.create_node("q", {"pubsub#queue": "1", "pubsub#title": "a<b"}))
    x = body.find(f"{P}configure/{X}x")
    assert x is not None
    assert form_values(x)["pubsub#title"] == "a<b"
    assert form_values(x)["FORM_TYPE"] == wire.NODE_CONFIG_FORM
    assert parse(wire.create_node("q")).find(f"{P}configure") is None


def test_set_affiliations_is_an_owner_request_xep_0060_8_9_2() -> None:
    body = parse(wire.set_affiliations("q", {"w1@example.org": "member"}))
    assert body.tag == f"{{{wire.PUBSUB_OWNER_NS}}}pubsub"
    rows = body.findall(
        f"{{{wire.PUBSUB_OWNER_NS}}}affiliations/{{{wire.PUBSUB_OWNER_NS}}}affiliation"
    )
    assert body[0].get("node") == "q"
    assert [(r.get("jid"), r.get("affiliation")) for r in rows] == [("w1@example.org", "member")]


def test_retract_unlock_extend_name_node_and_item() -> None:
    retract = parse(wire.retract("n", "i")).find(f"{P}retract/{P}item")
    assert retract is not None and retract.get("id") == "i"
    unlock = parse(wire_locks.unlock("n", "i")).find("{urn:xmpp:pubsub:queueing:0}unlock")
    assert unlock is not None and unlock.get("node") == "n"
    assert unlock[0].tag == "{urn:xmpp:pubsub:queueing:0}item"
    extend = parse(wire_locks.extend("n", "i", 30)).find("{urn:xmpp-queue:0}extend")
    assert extend is not None and extend.attrib == {"node": "n", "seconds": "30"}
    unsub = parse(wire.unsubscribe("n", "me@x/r", "s1")).find(f"{P}unsubscribe")
    assert unsub is not None and unsub.get("subid") == "s1"


def test_presence_directed_and_unavailable() -> None:
    assert parse(wire.presence("queue.localhost")).attrib == {"to": "queue.localhost"}
    assert parse(wire.presence("q", available=False)).get("type") == "unavailable"


def test_parse_error_reads_condition_type_text_and_pubsub_child() -> None:
    iq = parse(
        "<iq type='error' id='1'><error type='modify'>"
        "<not-acceptable xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/>"
        "<configuration-required xmlns='http://jabber.org/protocol/pubsub#errors'/>"
        "<text xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'>need queue_requests</text>"
        "</error></iq>"
    )
    err = wire.parse_error(iq)
    assert (err.condition, err.etype, err.app_condition, err.text) == (
        "not-acceptable",
        "modify",
        "configuration-required",
        "need queue_requests",
    )
    assert not err.retryable
    wait = wire.parse_error(
        parse(
            "<iq type='error'><error type='wait'>"
            "<unexpected-request xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"
        )
    )
    assert wait.condition == "unexpected-request" and wait.retryable


def test_a_batch_publish_carries_every_item_xep_0060_13_11() -> None:
    body = parse(wire.publish_items("q", [("<a xmlns='urn:x'/>", "i1"), (None, None)]))
    items = body.findall(f"{P}publish/{P}item")
    assert body.find(f"{P}publish").get("node") == "q"
    assert [i.get("id") for i in items] == ["i1", None]
    assert items[0][0].tag == "{urn:x}a" and len(items[1]) == 0
    result = parse(
        f"<iq type='result'><pubsub xmlns='{wire.PUBSUB_NS}'><publish node='q'>"
        "<item id='i1'/><item id='gen-2'/></publish></pubsub></iq>"
    )
    assert wire.published_item_ids(result) == ["i1", "gen-2"]


def test_results_publish_id_and_subscription() -> None:
    result = parse(
        f"<iq type='result'><pubsub xmlns='{wire.PUBSUB_NS}'><publish node='n'>"
        "<item id='gen-1'/></publish></pubsub></iq>"
    )
    assert wire.published_item_id(result) == "gen-1"
    assert wire.published_item_id(parse("<iq type='result'/>")) is None
    sub = parse(
        f"<iq type='result'><pubsub xmlns='{wire.PUBSUB_NS}'>"
        "<subscription node='n' jid='a@b/c' subid='s9' subscription='subscribed'/>"
        "</pubsub></iq>"
    )
    assert wire.subscription_of(sub) == wire.SubscriptionResult("s9", "subscribed")


def test_parse_event_items_with_shim_headers() -> None:
    message = parse(
        "<message from='q'><event xmlns='http://jabber.org/protocol/pubsub#event'>"
        "<items node='dl'><item id='i1'><example xmlns='urn:xmpp:example'>p</example></item>"
        "</items></event><headers xmlns='http://jabber.org/protocol/shim'>"
        "<header name='origin-node'>jobs</header><header name='deliveries'>3</header>"
        "</headers></message>"
    )
    (event,) = wire.parse_event(message)
    assert isinstance(event, wire.ItemEvent)
    assert (event.node, event.item_id) == ("dl", "i1")
    assert event.element is not None and event.element.text == "p"
    assert event.headers == {"origin-node": "jobs", "deliveries": "3"}


def test_parse_event_retract_and_unlock_notifications() -> None:
    message = parse(
        "<message><event xmlns='http://jabber.org/protocol/pubsub#event'><items node='n'>"
        "<retract id='a'/><unlock xmlns='urn:xmpp:pubsub:queueing:0' id='b'/>"
        "<unlock xmlns='urn:xmpp:queueing:0' id='c'/></items></event></message>"
    )
    assert wire.parse_event(message) == [
        wire.RetractEvent("n", "a"),
        wire.UnlockEvent("n", "b"),
        wire.UnlockEvent("n", "c"),
    ]
    assert wire.parse_event(parse("<message><body>hi</body></message>")) == []
