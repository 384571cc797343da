"""One renderer per kind of notice, and the bytes it writes.

The per-item kinds (items, retract, unlock) are written as text by
``text_render.notice_text`` for every node type (the component's hot path); the
occasional kinds are built as stanzas by ``render.notification``. The golden
strings below are the wire bytes: the same XML the stanza renderer produced for
these kinds before it gave them up (checked once by canonical comparison).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from slixmpp import ComponentXMPP
from slixmpp.xmlstream.tostring import tostring

from xmpp_queue.core.effects import (
    ConfigNotice,
    DeleteNotice,
    Effect,
    ItemNotice,
    NoticeItem,
    PurgeNotice,
    RetractNotice,
    SubscriptionNotice,
    TruncateNotice,
    UnlockNotice,
)
from xmpp_queue.core.model import SubscriptionState
from xmpp_queue.xmpp import iq_results, render, text_render

SENDER = "queue.example.org"
EVENT = "http://jabber.org/protocol/pubsub#event"
SHIM = "http://jabber.org/protocol/shim"
HEAD = f"<message from='{SENDER}' to='w@example.org/a' id='xq-1' type='headline'>"


def canonical(text: str) -> str:
    return ET.canonicalize(text, strip_text=True)


GOLDEN: list[tuple[Effect, str]] = [
    (
        ItemNotice(
            "w@example.org/a",
            "jobs & <more>",
            (
                NoticeItem(
                    "i'1\"",
                    "<job xmlns='urn:x'>a &amp; b</job>",
                    None,
                    {"delivery-attempt": "2", "origin-node": "q<1>"},
                ),
            ),
            ("sub-1",),
        ),
        f"{HEAD}<event xmlns='{EVENT}'><items node='jobs &amp; &lt;more&gt;'>"
        "<item id='i&apos;1&quot;'><job xmlns='urn:x'>a &amp; b</job></item></items></event>"
        f"<headers xmlns='{SHIM}'><header name='delivery-attempt'>2</header>"
        "<header name='origin-node'>q&lt;1&gt;</header><header name='SubID'>sub-1</header>"
        "</headers></message>",
    ),
    (  # an ordinary node's notice: a publisher shown, two subscriptions of one JID
        ItemNotice(
            "w@example.org/a",
            "news",
            (NoticeItem("n1", "<entry xmlns='urn:x'/>", "p@example.org"),),
            ("s1", "s2"),
        ),
        f"{HEAD}<event xmlns='{EVENT}'><items node='news'>"
        "<item id='n1' publisher='p@example.org'><entry xmlns='urn:x'/></item></items></event>"
        f"<headers xmlns='{SHIM}'><header name='SubID'>s1</header>"
        "<header name='SubID'>s2</header></headers></message>",
    ),
    (  # several items: each carries its own headers; a normal message
        ItemNotice(
            "w@example.org/a",
            "jobs",
            (NoticeItem("i1", None), NoticeItem("i2", "<j xmlns='urn:x'/>", None, {"h": "1"})),
            ("sub-1",),
            headline=False,
        ),
        f"<message from='{SENDER}' to='w@example.org/a' id='xq-1'>"
        f"<event xmlns='{EVENT}'><items node='jobs'><item id='i1'></item>"
        f"<item id='i2'><j xmlns='urn:x'/><headers xmlns='{SHIM}'><header name='h'>1</header>"
        "</headers></item></items></event>"
        f"<headers xmlns='{SHIM}'><header name='SubID'>sub-1</header></headers></message>",
    ),
    (
        RetractNotice("w@example.org/a", "jobs", ("i1", "i2"), ("sub-1",)),
        f"{HEAD}<event xmlns='{EVENT}'><items node='jobs'><retract id='i1'/><retract id='i2'/>"
        f"</items></event><headers xmlns='{SHIM}'><header name='SubID'>sub-1</header>"
        "</headers></message>",
    ),
    (
        UnlockNotice("w@example.org/a", "jobs", "i1", "timeout"),
        f"{HEAD}<event xmlns='{EVENT}'><items node='jobs'>"
        "<unlock xmlns='urn:xmpp:pubsub:queueing:0' id='i1'/></items></event>"
        f"<headers xmlns='{SHIM}'><header name='reason'>timeout</header></headers></message>",
    ),
]


@pytest.mark.parametrize(
    ("effect", "wire"), GOLDEN, ids=["item", "leaf-item", "batch", "retract", "unlock"]
)
def test_per_item_notices_are_written_as_text(effect: Effect, wire: str) -> None:
    assert text_render.notice_text(effect, SENDER, "xq-1") == wire


@pytest.mark.parametrize(("effect", "wire"), GOLDEN[:1] + GOLDEN[3:])
def test_the_stanza_renderer_has_no_rendering_of_the_per_item_kinds(
    effect: Effect, wire: str
) -> None:
    """One renderer per kind: the per-item kinds are the text renderer's alone."""
    xmpp = ComponentXMPP(SENDER, "secret", "127.0.0.1", 5347)
    with pytest.raises(TypeError):
        render.notification(xmpp, effect, SENDER, "xq-1")


OCCASIONAL: list[Effect] = [
    PurgeNotice("w@x", "jobs"),
    DeleteNotice("w@x", "jobs", "xmpp:q.example.org?;node=other"),
    ConfigNotice("w@x", "jobs", None),
    SubscriptionNotice("w@x", "jobs", "w@x", SubscriptionState.NONE, "s1"),
    TruncateNotice("w@x", "jobs", 3, 120),
]


@pytest.mark.parametrize("effect", OCCASIONAL, ids=lambda e: type(e).__name__)
def test_the_occasional_kinds_are_stanzas(effect: Effect) -> None:
    xmpp = ComponentXMPP(SENDER, "secret", "127.0.0.1", 5347)
    assert text_render.notice_text(effect, SENDER, "xq-1") is None
    built = tostring(render.notification(xmpp, effect, SENDER, "xq-1").xml)
    assert f'<event xmlns="{EVENT}"><' in built and 'node="jobs"' in built


def test_a_non_canonical_payload_is_left_out() -> None:
    hostile = ItemNotice("w@x", "jobs", (NoticeItem("i", "<!DOCTYPE x><x/>"),))
    text = text_render.notice_text(hostile, SENDER, "xq-1")
    assert text is not None and "DOCTYPE" not in text and "<item id='i'></item>" in text


def test_text_answers_are_the_same_xml_as_the_stanzas() -> None:
    xmpp = ComponentXMPP(SENDER, "secret", "127.0.0.1", 5347)
    iq = xmpp.make_iq_set(ito=SENDER, ifrom="w@example.org/a'b")
    iq["id"] = "p<1>"
    wrapped = "<s xmlns='jabber:component:accept'>{}</s>"

    def same(text: str, stanza: object) -> bool:
        built = tostring(stanza.xml, xmlns="jabber:component:accept", top_level=True)  # type: ignore[attr-defined]
        return canonical(wrapped.format(text)) == canonical(wrapped.format(built))

    assert same(
        text_render.publish_result_text(iq, "jobs&1", 'i"1'),
        iq_results.publish_result(iq, "jobs&1", 'i"1'),
    )
    assert same(text_render.empty_result_text(iq), iq_results.empty_result(iq))
