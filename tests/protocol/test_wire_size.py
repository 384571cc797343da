"""No stanza over ``[component] max_stanza_size``; items retrieval is paged (issue 27).

A component with a 64 KiB stanza limit (so the items stay small): items answers
are cut by bytes and by the page size and carry XEP-0059 ``<set/>`` so the client
can go on; a worker's batch larger than the limit arrives as several messages;
an item too big to send alone is refused at publish, and a node may not be
configured to accept one; stanzas nested deeper than the parser's limit get an
answer (bad-request) and the component stays up.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from tests.kit import FakeClock, build_service
from tests.kit.stanzas import (
    NODE_CONFIG,
    NS,
    OWNER,
    OWNER_NS,
    PUB,
    SERVICE,
    SUB_OPTIONS,
    FakeTransport,
    Stream,
    error_of,
    find,
    make_node,
    make_queue,
    messages,
    publish,
    pubsub,
    submit,
)
from xmpp_queue.core.model import ItemPage, NodeConfig, new_item
from xmpp_queue.core.service import ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.settings import STANZA_ENVELOPE
from xmpp_queue.xmpp.component import QueueComponent
from xmpp_queue.xmpp.refusals import REFUSALS
from xmpp_queue.xmpp.requests import MAX_DEPTH
from xmpp_queue.xmpp.wire_size import items_reply_text

LIMIT = 64 * 1024
CEILING = LIMIT - STANZA_ENVELOPE  # the largest payload a node may accept
PAGE = 10
WORKER = "workerbee237@example.org/w1"
NOW = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture
async def small(clock: FakeClock) -> AsyncIterator[Stream]:
    """The component as app/term.py builds it from ``max_stanza_size = 65536`` and
    ``items_page_size = 10``."""
    from xmpp_queue.storage.store import StateStore

    service = build_service(
        StateStore.in_memory(),
        clock,
        settings=ServiceSettings(
            default_config=NodeConfig(max_payload_size=CEILING),
            admins=frozenset({"admin@example.org"}),
            access=ServiceAccess.for_domain("example.org"),
            items_page_size=PAGE,
            page_bytes=CEILING,
            max_payload_ceiling=CEILING,
        ),
    )
    await service.start()
    comp = QueueComponent(SERVICE, "secret", "127.0.0.1", 5347, service, max_stanza_size=LIMIT)
    s = Stream(comp, FakeTransport(), clock)
    await s.start()
    yield s
    await s.close()


def payload(size: int, tag: str = "big") -> str:
    """An element whose canonical form is *size* bytes."""
    head, tail = f"<{tag} xmlns='urn:x'>", f"</{tag}>"
    fill = size - len(f'<{tag} xmlns="urn:x">') - len(tail)
    return f"{head}{'x' * fill}{tail}"


def written_sizes(s: Stream, since: int = 0) -> list[int]:
    """Bytes of each stanza the component wrote (writes are coalesced per loop tick,
    so a write may hold several: an upper bound)."""
    return [len(w) for w in s.transport.writes[since:]] or [0]


def item_ids(el: ET.Element, path: str = "ps:pubsub/ps:items/ps:item") -> list[str]:
    return [i.get("id", "") for i in el.findall(path, NS)]


def rsm(reply: ET.Element) -> tuple[str | None, str | None, str | None, str | None]:
    """(count, first, first@index, last) of the answer's <set/>."""
    found = find(reply, "ps:pubsub/rsm:set")
    first = found.find("rsm:first", NS)
    last = found.find("rsm:last", NS)
    count = found.find("rsm:count", NS)
    return (
        count.text if count is not None else None,
        first.text if first is not None else None,
        first.get("index") if first is not None else None,
        last.text if last is not None else None,
    )


async def fill(s: Stream, node: str, n: int, size: int) -> None:
    for i in range(n):
        reply, _ = await publish(s, node, f"i{i}", payload(size), who=OWNER)
        assert reply.get("type") == "result", ET.tostring(reply).decode()


async def items(s: Stream, body: str, node: str = "news") -> ET.Element:
    reply, _ = await s.iq("get", OWNER, pubsub(f"<items node='{node}'/>{body}"), iq_id="it")
    assert reply.get("type") == "result", ET.tostring(reply).decode()
    return reply


# --- items retrieval: cut by bytes, paged by count -----------------------------------


async def test_items_answer_is_cut_to_the_stanza_limit_with_rsm_to_go_on(small: Stream) -> None:
    await make_node(small, "news", pubsub__max_items="max")
    await fill(small, "news", 3, CEILING)  # three of the largest items allowed
    mark = len(small.transport.writes)
    reply = await items(small, "")
    assert max(written_sizes(small, mark)) <= LIMIT
    assert item_ids(reply) == ["i0"]
    assert rsm(reply) == ("3", "i0", "0", "i0")
    # the client goes on from <last/> and gets everything, one stanza at a time
    got, last = ["i0"], "i0"
    while len(got) < 3:
        more = await items(small, f"<set xmlns='{NS['rsm']}'><after>{last}</after></set>")
        got += item_ids(more)
        last = rsm(more)[3] or ""
    assert got == ["i0", "i1", "i2"]
    assert max(written_sizes(small, mark)) <= LIMIT


async def test_max_items_and_backward_pages_are_cut_keeping_what_lets_the_client_go_on(
    small: Stream,
) -> None:
    await make_node(small, "news", pubsub__max_items="max")
    await fill(small, "news", 4, CEILING // 2 + 100)  # two do not fit in one stanza
    reply, _ = await small.iq(
        "get", OWNER, pubsub("<items node='news' max_items='2'/>"), iq_id="mi"
    )
    assert item_ids(reply) == ["i2"]  # the oldest of the two newest, then after=i2
    assert rsm(reply) == ("4", "i2", "2", "i2")
    back = await items(small, f"<set xmlns='{NS['rsm']}'><max>2</max><before/></set>")
    assert item_ids(back) == ["i3"]  # a backward page keeps its end: before=i3 goes on
    assert rsm(back) == ("4", "i3", "3", "i3")


async def test_unpaged_request_on_a_long_node_answers_the_first_page(small: Stream) -> None:
    await make_node(small, "news", pubsub__max_items="max")
    await fill(small, "news", 25, 100)
    reply = await items(small, "")
    assert item_ids(reply) == [f"i{n}" for n in range(PAGE)]
    assert rsm(reply) == ("25", "i0", "0", "i9")
    # RSM max above the page size is the page size
    big = await items(small, f"<set xmlns='{NS['rsm']}'><max>1000</max><after>i9</after></set>")
    assert item_ids(big) == [f"i{n}" for n in range(10, 20)]
    # max_items above the page size: the first page of the newest N, paged
    reply, _ = await small.iq(
        "get", OWNER, pubsub("<items node='news' max_items='20'/>"), iq_id="mi"
    )
    assert item_ids(reply) == [f"i{n}" for n in range(5, 15)]
    assert rsm(reply) == ("25", "i5", "5", "i14")
    # a short node answers as before: everything, no <set/>
    await make_node(small, "short")
    await fill(small, "short", 3, 100)
    short = await items(small, "", node="short")
    assert item_ids(short) == ["i0", "i1", "i2"]
    assert short.find("ps:pubsub/rsm:set", NS) is None


@pytest.mark.parametrize("backward", [False, True])
async def test_renderer_cuts_a_page_the_store_let_through(small: Stream, backward: bool) -> None:
    """The store stops a page by payload bytes; the renderer's exact cut measures the
    serialised items (whatever they carry), keeping a backward page's end."""
    stored = tuple(
        new_item("news", f"i{n}", PUB, payload(CEILING), CEILING, {"h": "v" * 100}, NOW)
        for n in range(3)
    )
    page = ItemPage(items=stored, count=7, first_index=2, paged=True, backward=backward)
    request = small.comp._build_stanza(
        ET.fromstring(
            f"<iq xmlns='jabber:component:accept' type='get' id='x' from='{OWNER}' to='{SERVICE}'/>"
        )
    )
    text = items_reply_text(request, "news", page, LIMIT)
    assert len(text.encode()) <= LIMIT
    reply = ET.fromstring(text)
    expected = ("i2", "4") if backward else ("i0", "2")
    assert item_ids(reply) == [expected[0]]
    assert rsm(reply) == ("7", expected[0], expected[1], expected[0])


# --- notifications: batches split by bytes -----------------------------------------------


async def test_batch_larger_than_the_limit_arrives_as_several_messages(small: Stream) -> None:
    await make_queue(small, "jobs", pubsub__max_payload_size=str(CEILING))
    for i in range(3):
        reply, _ = await publish(small, "jobs", f"i{i}", payload(CEILING - 10))
        assert reply.get("type") == "result"
    form = submit(SUB_OPTIONS, pubsub__queue_requests="3", pubsub__queue_max_batch="3")
    mark = len(small.transport.writes)
    reply, out = await small.iq(
        "set", WORKER, pubsub(f"<subscribe node='jobs' jid='{WORKER}'/><options>{form}</options>")
    )
    assert reply.get("type") == "result"
    notes = messages(out)
    assert [item_ids(m, "ev:event/ev:items/ev:item") for m in notes] == [["i0"], ["i1"], ["i2"]]
    # coalesced writes: the three messages were written together; each is under the limit
    assert all(len(ET.tostring(m)) <= LIMIT for m in notes)
    assert sum(written_sizes(small, mark)) > LIMIT
    # small items still share one message
    for i in range(3, 6):
        await publish(small, "jobs", f"i{i}", "<s xmlns='urn:x'/>")
    body = "".join(f"<item id='i{i}'/>" for i in range(3))
    _, out = await small.iq("set", WORKER, pubsub(f"<retract node='jobs'>{body}</retract>"))
    batched = [item_ids(m, "ev:event/ev:items/ev:item") for m in messages(out)]
    assert ["i3", "i4", "i5"] in batched


# --- the largest item: refused at publish and at node configuration ------------------


async def test_item_larger_than_the_ceiling_is_refused_at_publish(small: Stream) -> None:
    await make_node(small, "news")
    ok, _ = await publish(small, "news", "fits", payload(CEILING), who=OWNER)
    assert ok.get("type") == "result"
    reply, _ = await publish(small, "news", "big", payload(CEILING + 1), who=OWNER)
    assert error_of(reply) == ("modify", "not-acceptable", "payload-too-big")


@pytest.mark.parametrize("at", ["create", "configure"])
async def test_node_config_above_the_ceiling_is_refused_naming_the_limit(
    small: Stream, at: str
) -> None:
    form = submit(NODE_CONFIG, pubsub__max_payload_size=str(CEILING + 1))
    if at == "create":
        body = pubsub(f"<create node='n'/><configure>{form}</configure>")
        reply, _ = await small.iq("set", OWNER, body)
    else:
        await make_node(small, "n")
        body = pubsub(f"<configure node='n'>{form}</configure>", OWNER_NS)
        reply, _ = await small.iq("set", OWNER, body)
    assert error_of(reply) == ("modify", "not-acceptable", None)
    text = find(reply, "jc:error/st:text").text or ""
    assert str(CEILING) in text and "max_payload_size" in text
    ok_form = submit(NODE_CONFIG, pubsub__max_payload_size=str(CEILING))
    reply, _ = await small.iq(
        "set", OWNER, pubsub(f"<create node='m'/><configure>{ok_form}</configure>")
    )
    assert reply.get("type") == "result"


# --- deep nesting (issue 27 point 5) -----------------------------------------------------


def nested(depth: int) -> str:
    return "<a xmlns='urn:a'>" * depth + "</a>" * depth


@pytest.mark.parametrize("depth", [MAX_DEPTH, 950, 5000])
async def test_deeply_nested_publish_is_bad_request_and_the_component_stays_up(
    stream: Stream, depth: int
) -> None:
    await make_node(stream, "news")
    reply, out = await publish(stream, "news", "deep", nested(depth), who=OWNER)
    assert error_of(reply) == ("modify", "bad-request", "invalid-payload")
    assert out == []
    # still answering, and a payload within the limit is accepted
    fine, _ = await publish(stream, "news", "ok", nested(MAX_DEPTH - 5), who=OWNER)
    assert fine.get("type") == "result"


async def test_deeply_nested_request_of_any_kind_gets_an_answer(
    stream: Stream, caplog: pytest.LogCaptureFixture
) -> None:
    deep = nested(1200)
    sender = "deep@example.org/x"  # no refusal logged for it yet
    reply, _ = await stream.iq("get", PUB, f"<query xmlns='urn:other'>{deep}</query>", iq_id="d1")
    assert error_of(reply)[:2] == ("modify", "bad-request")
    await make_node(stream, "news")
    reply, _ = await stream.iq(
        "set", OWNER, pubsub(f"<configure node='news'>{deep}</configure>", OWNER_NS), iq_id="d2"
    )
    assert error_of(reply)[:2] == ("modify", "bad-request")
    with caplog.at_level(logging.INFO, "xmpp_queue"):
        for _ in range(20):
            sent = await stream.send(f"<message from='{sender}' to='{SERVICE}'>{deep}</message>")
            assert sent == []
        ok, _ = await stream.iq("get", OWNER, pubsub("<items node='news'/>"), iq_id="d3")
    assert ok.get("type") == "result"
    # dropped messages are refusals: counted, one line per JID a minute (issue 27 point 8)
    dropped = [r.getMessage() for r in caplog.records if "reason=too_deep" in r.getMessage()]
    assert len(dropped) == 1 and sender in dropped[0], dropped
    assert REFUSALS.counts["bad-request"] >= 22
