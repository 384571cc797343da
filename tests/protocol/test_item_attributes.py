"""Item attributes on the wire: XEP-0131 SHIM ``<headers/>`` beside the payload in
``<item/>``, on publish, in items retrieval and in notifications; malformed
headers are refused with the error table's answer and nothing is stored."""

from __future__ import annotations

import pytest

from tests.kit.stanzas import (
    ALICE,
    OWNER,
    PUB,
    Stream,
    error_of,
    find,
    make_queue,
    messages,
    pubsub,
)
from xmpp_queue.core.model import SYSTEM

SHIM = "http://jabber.org/protocol/shim"
JOB = "<job xmlns='urn:example'>x</job>"


def headers(**pairs: str) -> str:
    inner = "".join(f"<header name='{k}'>{v}</header>" for k, v in pairs.items())
    return f"<headers xmlns='{SHIM}'>{inner}</headers>"


def item_headers(item) -> dict[str, str]:  # type: ignore[no-untyped-def]
    found = item.find(f"{{{SHIM}}}headers")
    return {} if found is None else {h.get("name"): h.text or "" for h in found}


async def publish_item(stream: Stream, body: str, who: str = PUB):  # type: ignore[no-untyped-def]
    return await stream.iq("set", who, pubsub(f"<publish node='jobs'>{body}</publish>"))


async def test_headers_beside_the_payload_are_stored_and_retrieved(stream: Stream) -> None:
    await make_queue(stream)
    reply, _ = await publish_item(stream, f"<item id='a'>{JOB}{headers(region='eu')}</item>")
    assert reply.get("type") == "result"
    reply, _ = await stream.iq("get", OWNER, pubsub("<items node='jobs'/>"))
    item = find(reply, "{*}pubsub/{*}items/{*}item")
    assert item_headers(item) == {"region": "eu"}
    assert item.find("{urn:example}job") is not None


async def test_headers_may_come_first_and_reach_the_worker(stream: Stream) -> None:
    await make_queue(stream)
    reply, _ = await stream.iq(
        "set",
        ALICE,
        pubsub(
            "<subscribe node='jobs' jid='alice@example.org/a'/><options><x xmlns='jabber:x:data'"
            " type='submit'><field var='FORM_TYPE' type='hidden'><value>"
            "http://jabber.org/protocol/pubsub#subscribe_options</value></field>"
            "<field var='pubsub#queue_requests'><value>1</value></field></x></options>"
        ),
    )
    assert reply.get("type") == "result"
    _, out = await publish_item(stream, f"<item id='a'>{headers(k='v')}{JOB}</item>")
    (msg,) = messages(out)
    shim = {h.get("name"): h.text for h in msg.iter(f"{{{SHIM}}}header")}
    assert shim["k"] == "v" and shim["delivery-attempt"] == "1"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            f"<item id='a'>{JOB}{headers(k='1')}{headers(k='2')}</item>",
            ("modify", "bad-request", "invalid-payload"),
        ),
        (
            f"<item id='a'>{JOB}<headers xmlns='{SHIM}'><header name='k'>1</header>"
            "<header name='k'>2</header></headers></item>",
            ("modify", "bad-request", "invalid-payload"),
        ),
        (
            f"<item id='a'>{JOB}{headers(**{'delivery-attempt': '5'})}</item>",
            ("modify", "bad-request", "invalid-payload"),
        ),
        (
            f"<item id='a'>{JOB}{headers(Start='tomorrow')}</item>",
            ("modify", "bad-request", "invalid-payload"),
        ),
        (
            f"<item id='a'>{JOB}{headers(Start='2999-01-01T00:00:00Z')}</item>",
            ("modify", "not-acceptable", None),
        ),
        (
            f"<item id='a'>{JOB}{headers(k='x' * 2000)}</item>",
            ("modify", "not-acceptable", "payload-too-big"),
        ),
        (
            f"<item id='a'>{JOB}<headers xmlns='{SHIM}'><header>nameless</header></headers></item>",
            ("modify", "bad-request", "invalid-payload"),
        ),
        (  # ends past the year 9999: refused, not an internal error
            f"<item id='a'>{JOB}{headers(TTL='1000000000000')}</item>",
            ("modify", "bad-request", "invalid-payload"),
        ),
        (  # before the year 1 once in UTC
            f"<item id='a'>{JOB}{headers(Expires='0001-01-01T00:00:00+01:00')}</item>",
            ("modify", "bad-request", "invalid-payload"),
        ),
    ],
    ids=[
        "two-headers",
        "repeated-name",
        "reserved",
        "bad-start",
        "start-too-far",
        "too-big",
        "no-name",
        "ttl-out-of-range",
        "datetime-out-of-range",
    ],
)
async def test_bad_headers_are_refused_and_store_nothing(
    stream: Stream, body: str, error: tuple[str, str, str | None]
) -> None:
    await make_queue(stream)
    reply, out = await publish_item(stream, body)
    assert error_of(reply) == error
    assert out == []
    assert (await stream.service.get_items(SYSTEM, "jobs")).items == ()


async def test_a_truncation_tells_the_subscribers_how_much_went(stream: Stream) -> None:
    from tests.kit.stanzas import publish, subscribe_worker

    await make_queue(stream, pubsub__max_items="2", pubsub__queue_overflow="drop-oldest")
    await subscribe_worker(stream, ALICE, 1)
    await publish(stream, "jobs", "a")  # held by alice
    await publish(stream, "jobs", "b")  # waits
    reply, out = await publish(stream, "jobs", "c")
    assert reply.get("type") == "result"
    (msg,) = messages(out)
    truncated = msg.find(".//{urn:xmpp-queue:0}truncated")
    assert truncated is not None and truncated.get("items") == "1"
    assert int(truncated.get("bytes", "0")) > 0
    shim = {h.get("name"): h.text for h in msg.iter(f"{{{SHIM}}}header")}
    assert shim["reason"] == "truncated"
    ids = [i.item_id for i in (await stream.service.get_items(SYSTEM, "jobs")).items]
    assert ids == ["a", "c"]
