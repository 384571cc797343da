"""The per-item stanzas, written as text: item, retract and unlock notices, and the
answers to publish, retract and unlock.

Why text: these are sent for every work item, and building them as slixmpp
stanza objects (then serialising them, and parsing the stored payload only to
serialise it again) was the component's largest CPU cost per item. The stored
payload goes in as it is (Canonical XML written by ``payloads.py``).
``tests/protocol/test_notice_rendering.py`` holds the wire bytes of each kind.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Protocol
from xml.sax.saxutils import escape

from xmpp_queue.core.effects import (
    Effect,
    ItemNotice,
    NoticeItem,
    RetractNotice,
    UnlockNotice,
)
from xmpp_queue.xmpp.stanzas import (
    PUBSUB,
    PUBSUB_EVENT,
    QUEUEING,
    SHIM,
)

log = logging.getLogger("xmpp_queue.xmpp.render")


_ATTR_ESCAPES = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        "'": "&apos;",
        '"': "&quot;",
        "\n": "&#10;",
        "\r": "&#13;",
        "\t": "&#9;",
    }
)


def _attr(value: str) -> str:
    """An attribute value, quoted: what ``quoteattr`` produces, in one C-level pass
    (it runs a few times for every stanza the queue sends)."""
    return "'" + value.translate(_ATTR_ESCAPES) + "'"


def _headers_text(headers: Sequence[tuple[str, str]]) -> str:
    if not headers:
        return ""
    inner = "".join(f"<header name={_attr(k)}>{escape(v)}</header>" for k, v in headers)
    return f"<headers xmlns='{SHIM}'>{inner}</headers>"


def subid_headers(subids: Sequence[str]) -> list[tuple[str, str]]:
    # XEP-0060 §12.3: SubID headers tell a JID which of its subscriptions a
    # notice is for; on a queue the one SubID names the lock holder.
    return [("SubID", subid) for subid in subids]


def notice_item_text(it: NoticeItem, several: bool) -> str:
    """One ``<item/>`` of an items notice as text; in a notice of *several* items it
    carries its own headers (see the module docstring). Also what ``wire_size``
    measures an item by, whatever the item holds."""
    payload = it.payload or ""
    if "<!" in payload:
        log.warning("event=payload_skipped reason=not_canonical")
        payload = ""
    if several:
        payload += _headers_text(list(it.headers.items()))
    by = f" publisher={_attr(it.publisher)}" if it.publisher else ""
    return f"<item id={_attr(it.item_id)}{by}>{payload}</item>"


def notice_text(effect: Effect, sender: str, msg_id: str) -> str | None:
    """An items, retract or unlock notice (of any node) as the XML text to write;
    None for the other kinds, which :func:`notification` renders.

    Why text: these are the messages sent for every work item, and building them
    as slixmpp stanza objects (then serialising them, and parsing the stored payload
    only to serialise it again) was the component's largest CPU cost per item. So
    this is the one renderer of these kinds, for ordinary nodes and queues alike
    (the effect says what happened; the kind alone picks the renderer). The payload
    goes in as stored: it is Canonical XML written by ``requests`` after the
    hardened parse; one that is not (contains ``<!``, e.g. a hand-edited row) is
    left out, as :func:`payload_element` does.
    """
    kind = " type='headline'" if getattr(effect, "headline", False) else ""
    head = f"<message from={_attr(sender)} to={_attr(effect.to)} id={_attr(msg_id)}{kind}>"
    event = f"<event xmlns='{PUBSUB_EVENT}'>"
    if isinstance(effect, ItemNotice):
        headers: list[tuple[str, str]] = []
        several = len(effect.items) > 1
        parts = [notice_item_text(it, several) for it in effect.items]
        if not several:
            headers.extend(effect.items[0].headers.items())
        headers.extend(subid_headers(effect.subids))
        body = f"<items node={_attr(effect.node)}>{''.join(parts)}</items>"
    elif isinstance(effect, RetractNotice):
        retracts = "".join(f"<retract id={_attr(i)}/>" for i in effect.item_ids)
        body = f"<items node={_attr(effect.node)}>{retracts}</items>"
        headers = subid_headers(effect.subids)
    elif isinstance(effect, UnlockNotice):
        unlock = f"<unlock xmlns='{QUEUEING}' id={_attr(effect.item_id)}/>"
        body = f"<items node={_attr(effect.node)}>{unlock}</items>"
        headers = [("reason", effect.reason)]
    else:
        return None
    return f"{head}{event}{body}</event>{_headers_text(headers)}</message>"


class RequestXml(Protocol):
    """A request known by its element: slixmpp's ``Iq`` or the handlers' ``IqRequest``."""

    xml: ET.Element


def _result_head(iq: RequestXml) -> str:
    return (
        f"<iq type='result' from={_attr(iq.xml.get('to', ''))} "
        f"to={_attr(iq.xml.get('from', ''))} id={_attr(iq.xml.get('id', ''))}"
    )


def empty_result_text(iq: RequestXml) -> str:
    """An empty IQ result as text (retract and unlock answers: two per work item)."""
    return _result_head(iq) + "/>"


def publish_result_text(iq: RequestXml, node: str, item_ids: str | Sequence[str]) -> str:
    """:func:`publish_result` as text: the answer every publish gets (§13.11: one
    ``<item/>`` per item of a batch, in request order)."""
    ids = (item_ids,) if isinstance(item_ids, str) else item_ids
    items = "".join(f"<item id={_attr(i)}/>" for i in ids)
    return (
        f"{_result_head(iq)}><pubsub xmlns='{PUBSUB}'><publish node={_attr(node)}>"
        f"{items}</publish></pubsub></iq>"
    )
