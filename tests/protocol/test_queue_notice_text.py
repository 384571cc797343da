"""The per-item queue notices written as text equal the stanza-built ones."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from slixmpp import ComponentXMPP
from slixmpp.xmlstream.tostring import tostring

from xmpp_queue.core.effects import (
    ItemNotice,
    NoticeItem,
    PurgeNotice,
    RetractNotice,
    UnlockNotice,
)
from xmpp_queue.xmpp import render

SENDER = "queue.example.org"


def canonical(text: str) -> str:
    return ET.canonicalize(text, strip_text=True)


@pytest.mark.parametrize(
    "effect",
    [
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
            queue=True,
        ),
        RetractNotice("w@example.org", "jobs", ("i1",), ("sub-1",), queue=True),
        UnlockNotice("w@example.org/a", "jobs", "i1", "timeout"),
    ],
    ids=["item", "retract", "unlock"],
)
def test_text_notice_is_the_same_xml_as_the_stanza(effect: object) -> None:
    xmpp = ComponentXMPP(SENDER, "secret", "127.0.0.1", 5347)
    stanza = render.notification(xmpp, effect, SENDER, "xq-1")  # type: ignore[arg-type]
    built = tostring(stanza.xml, xmlns="jabber:component:accept", top_level=True)
    text = render.queue_notice_text(effect, SENDER, "xq-1")  # type: ignore[arg-type]
    assert text is not None
    wrapped = "<s xmlns='jabber:component:accept'>{}</s>"
    assert canonical(wrapped.format(text)) == canonical(wrapped.format(built))


def test_other_notices_stay_stanzas_and_non_canonical_payloads_are_left_out() -> None:
    assert render.queue_notice_text(PurgeNotice("w@x", "jobs"), SENDER, "xq-1") is None
    plain = ItemNotice("w@x", "news", (NoticeItem("i", "<p/>"),))
    assert render.queue_notice_text(plain, SENDER, "xq-1") is None
    hostile = ItemNotice("w@x", "jobs", (NoticeItem("i", "<!DOCTYPE x><x/>"),), queue=True)
    text = render.queue_notice_text(hostile, SENDER, "xq-1")
    assert text is not None and "DOCTYPE" not in text


def test_text_answers_are_the_same_xml_as_the_stanzas() -> None:
    xmpp = ComponentXMPP(SENDER, "secret", "127.0.0.1", 5347)
    iq = xmpp.make_iq_set(ito=SENDER, ifrom="w@example.org/a'b")
    iq["id"] = "p<1>"
    wrapped = "<s xmlns='jabber:component:accept'>{}</s>"

    def same(text: str, stanza: object) -> bool:
        built = tostring(stanza.xml, xmlns="jabber:component:accept", top_level=True)  # type: ignore[attr-defined]
        return canonical(wrapped.format(text)) == canonical(wrapped.format(built))

    assert same(
        render.publish_result_text(iq, "jobs&1", 'i"1'), render.publish_result(iq, "jobs&1", 'i"1')
    )
    assert same(render.empty_result_text(iq), render.empty_result(iq))
