"""Item payloads: hostile and malformed input is refused and nothing is stored.

In the stream, the XMPP parser has already rejected DTDs (a DOCTYPE cannot
appear inside a stanza); payloads given as text (admin commands, bulk loads) go
through ``canonical_payload_text`` with the hardened lxml parser.
"""

from __future__ import annotations

import pytest

from tests.kit.stanzas import (
    OWNER,
    Stream,
    error_of,
    find,
    make_node,
    publish,
    pubsub,
)
from xmpp_queue.core.errors import InvalidPayload, PayloadTooBig
from xmpp_queue.core.model import SYSTEM
from xmpp_queue.xmpp.payloads import MAX_PAYLOAD_BYTES, canonical_payload_text

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<lolz>&lol4;</lolz>"""

XXE = """<?xml version="1.0"?>
<!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<foo>&xxe;</foo>"""


@pytest.mark.parametrize(
    "text",
    [
        BILLION_LAUGHS,
        XXE,
        "<!DOCTYPE a><a/>",
        "<a>&undefined;</a>",
        "<?evil do-something?><a/>",
        "<a><?evil inside?></a>",
        "<a/><b/>",
        "just text",
        "<a>",
        "",
    ],
    ids=[
        "billion-laughs",
        "xxe",
        "doctype",
        "undefined-entity",
        "pi-before",
        "pi-inside",
        "two-roots",
        "text",
        "unclosed",
        "empty",
    ],
)
def test_hostile_text_payloads_are_invalid(text: str) -> None:
    with pytest.raises(InvalidPayload):
        canonical_payload_text(text)


def test_text_payload_over_the_hard_cap_is_refused_before_parsing() -> None:
    with pytest.raises(PayloadTooBig):
        canonical_payload_text("<a>" + "x" * MAX_PAYLOAD_BYTES + "</a>")


def test_canonical_form_is_stable_and_sized_in_bytes() -> None:
    one, size = canonical_payload_text("<p:a xmlns:p='urn:x' b='2' a='1'><p:c/></p:a>")
    two, _ = canonical_payload_text(
        '<?xml version="1.0"?>\n<p:a a="1" b="2" xmlns:p="urn:x"><p:c></p:c></p:a>'
    )
    assert one == two == '<p:a xmlns:p="urn:x" a="1" b="2"><p:c></p:c></p:a>'
    assert size == len(one.encode())
    _, size = canonical_payload_text("<a>é</a>")
    assert size == len("<a>é</a>".encode())


async def _stored(stream: Stream, node: str = "news") -> list[str | None]:
    page = await stream.service.get_items(SYSTEM, node)
    return [i.payload for i in page.items]


@pytest.mark.parametrize(
    "item",
    [
        "<item id='i'><a xmlns='urn:a'/><b xmlns='urn:b'/></item>",
        "<item id='i'>loose text</item>",
        "<item id='i'><a xmlns='urn:a'/>trailing</item>",
    ],
    ids=["two-children", "text-only", "text-beside-element"],
)
async def test_item_must_hold_exactly_one_element(stream: Stream, item: str) -> None:
    await make_node(stream, "news")
    reply, out = await stream.iq("set", OWNER, pubsub(f"<publish node='news'>{item}</publish>"))
    assert error_of(reply) == ("modify", "bad-request", "invalid-payload")
    assert out == []
    assert await _stored(stream) == []


async def test_payload_over_the_node_limit_is_payload_too_big(stream: Stream) -> None:
    await make_node(stream, "small", pubsub__max_payload_size="64")
    reply, _ = await publish(stream, "small", "i", f"<a xmlns='urn:a'>{'x' * 100}</a>", who=OWNER)
    assert error_of(reply) == ("modify", "not-acceptable", "payload-too-big")
    assert await _stored(stream, "small") == []


async def test_payload_over_the_hard_cap_is_payload_too_big(stream: Stream) -> None:
    await make_node(stream, "news")
    huge = f"<a xmlns='urn:a'>{'x' * MAX_PAYLOAD_BYTES}</a>"
    reply, _ = await publish(stream, "news", "i", huge, who=OWNER)
    assert error_of(reply) == ("modify", "not-acceptable", "payload-too-big")
    # the error reply does not echo the payload back
    assert list(find(reply, "{*}pubsub/{*}publish/{*}item")) == []
    assert await _stored(stream) == []


async def test_stored_payload_is_canonical_and_round_trips(stream: Stream) -> None:
    await make_node(stream, "news")
    payload = (
        "<entry xmlns='http://www.w3.org/2005/Atom' b='2' a='1'><title>T &amp; U</title></entry>"
    )
    reply, _ = await publish(stream, "news", "i", payload, who=OWNER)
    assert reply.get("type") == "result"
    [stored] = await _stored(stream)
    assert stored == (
        '<entry xmlns="http://www.w3.org/2005/Atom" a="1" b="2"><title>T &amp; U</title></entry>'
    )
    reply, _ = await stream.iq("get", OWNER, pubsub("<items node='news'/>"))
    entry = find(reply, "{*}pubsub/{*}items/{*}item/{http://www.w3.org/2005/Atom}entry")
    assert entry.attrib == {"a": "1", "b": "2"}
    assert find(entry, "{http://www.w3.org/2005/Atom}title").text == "T & U"


async def test_a_doctype_inside_the_stream_never_reaches_the_service(stream: Stream) -> None:
    await make_node(stream, "news")
    before = len(stream.transport.writes)
    stream.comp.data_received(
        f"<iq type='set' id='x' from='{OWNER}' to='pubsub.example.org'>"
        "<pubsub xmlns='http://jabber.org/protocol/pubsub'><publish node='news'>"
        "<item id='i'><!DOCTYPE a [<!ENTITY e 'boom'>]><a>&e;</a></item>"
        "</publish></pubsub></iq>"
    )
    await stream.settle()
    # slixmpp answers with a not-well-formed stream error and closes the stream
    assert b"not-well-formed" in b"".join(stream.transport.writes[before:])
    assert await _stored(stream) == []


def test_stored_payloads_that_are_not_canonical_are_not_parsed() -> None:
    from xmpp_queue.xmpp.render import payload_element

    assert payload_element(BILLION_LAUGHS) is None
    assert payload_element("<a><!-- c --></a>") is None
    assert payload_element("<a") is None
    element = payload_element('<a xmlns="urn:a">t</a>')
    assert element is not None and element.tag == "{urn:a}a"
