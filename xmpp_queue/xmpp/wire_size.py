"""No stanza the component sends is larger than ``[component] max_stanza_size``.

Why: an XMPP server closes a component stream that sends a stanza over its
limit (Prosody's ``component_stanza_size_limit``, 512 KiB by default), and with
it every worker's and publisher's traffic; a user who can make the component
answer with a large stanza (an items request on a node of large items, a
worker taking them in batches) could knock it off the server at will.

Sizes are measured on what is sent (UTF-8 bytes of the serialised stanza), item
by item, so the accounting holds whatever an item element carries (payload,
SHIM headers, attributes added later):

- an items notice of several items (a worker's ``pubsub#queue_max_batch``) is
  split into as many messages as it takes (:func:`split_item_notice`);
- an items answer is cut to the items that fit and says so with an XEP-0059
  ``<set/>`` (count, first, last) so the client pages on from ``last``
  (:func:`items_reply_text`; a ``before`` page keeps its end);
- what still does not fit (a single item stored before the limit was lowered)
  goes without its payload, logged; any other answer too large becomes an error
  reply (:class:`AnswerTooBig`), and the component's ``send_raw`` drops anything
  left over rather than lose the stream.

A publish of an item that could not be sent on its own is refused before it is
stored (``core/payload_ceiling.py``), so the last resorts are for data stored
under an older, larger limit.
"""

from __future__ import annotations

import dataclasses
import logging
import xml.etree.ElementTree as ET

from slixmpp import Iq
from slixmpp.xmlstream import StanzaBase
from slixmpp.xmlstream.tostring import tostring

from xmpp_queue.core.effects import ItemNotice, NoticeItem
from xmpp_queue.core.model import ItemPage
from xmpp_queue.xmpp import iq_results, text_render
from xmpp_queue.xmpp.errors import AnswerTooBig
from xmpp_queue.xmpp.stanzas import PUBSUB

log = logging.getLogger("xmpp_queue.xmpp.wire_size")

SLACK = 1024
"""Bytes kept below the limit for what an estimate may miss (message id, namespace
declarations the serialiser adds)."""
RSM_RESERVE = 12 * 1024
"""Bytes kept in a cut items answer for its ``<set/>``: first and last ids (up to
1023 characters each, escaped) and the count."""


def utf8_size(text: str) -> int:
    """Bytes of *text* on the wire (``isascii`` is O(1): no copy for the usual case)."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


# --- notifications -------------------------------------------------------------------


def split_item_notice(effect: ItemNotice, sender: str, limit: int) -> list[ItemNotice]:
    """*effect* as one or more notices, each under *limit* bytes once rendered
    (a single item too large stays alone: the send path deals with it)."""
    if len(effect.items) <= 1:
        return [effect]
    probe = dataclasses.replace(effect, items=(NoticeItem("", None),))
    envelope = utf8_size(text_render.notice_text(probe, sender, "x" * 40) or "")
    budget = limit - envelope - SLACK
    groups: list[list[NoticeItem]] = [[]]
    used = 0
    for item in effect.items:
        size = utf8_size(text_render.notice_item_text(item, several=True))
        if groups[-1] and used + size > budget:
            groups.append([])
            used = 0
        groups[-1].append(item)
        used += size
    if len(groups) == 1:
        return [effect]
    log.info(
        "event=notice_split to=%s node=%s items=%d messages=%d",
        effect.to,
        effect.node,
        len(effect.items),
        len(groups),
    )
    return [dataclasses.replace(effect, items=tuple(g)) for g in groups]


def without_payload(effect: ItemNotice) -> ItemNotice:
    """A one-item notice too large to send: the item goes without its payload."""
    log.error(
        "event=item_too_big_to_send to=%s node=%s item=%s action=sent_without_payload",
        effect.to,
        effect.node,
        effect.items[0].item_id if effect.items else "-",
    )
    return dataclasses.replace(
        effect, items=tuple(dataclasses.replace(i, payload=None) for i in effect.items)
    )


# --- items answers -------------------------------------------------------------------


def stanza_text(stanza: StanzaBase) -> str:
    """A stanza as the stream writes it (slixmpp's own serialisation)."""
    stream = stanza.stream
    xmlns = stream.default_ns if stream is not None else ""
    return tostring(stanza.xml, xmlns=xmlns, stream=stream, top_level=True)


def _item_sizes(reply: Iq) -> list[int]:
    items = reply.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}items")
    if items is None:
        return []
    return [utf8_size(tostring(el, xmlns=PUBSUB)) for el in items]


def items_reply_text(iq: Iq, node: str, page: ItemPage, limit: int) -> str:
    """The §6.5 answer for *page* as text, cut to fit in *limit* bytes (see the
    module docstring)."""
    reply = iq_results.items_result(iq, node, page)
    text = stanza_text(reply)
    total = utf8_size(text)
    if total <= limit:
        return text
    sizes = _item_sizes(reply)
    budget = limit - (total - sum(sizes)) - RSM_RESERVE - SLACK
    order = range(len(sizes) - 1, -1, -1) if page.backward else range(len(sizes))
    kept, used = 0, 0
    for n in order:
        if kept and used + sizes[n] > budget:
            break
        kept += 1
        used += sizes[n]
    items = page.items[-kept:] if page.backward else page.items[:kept]
    first = page.first_index
    if first is not None and page.backward:
        first += len(page.items) - kept
    if used > budget:  # one item alone is too large: it goes without its payload
        log.error(
            "event=item_too_big_to_send node=%s item=%s action=sent_without_payload",
            node,
            items[0].item_id,
        )
        items = (dataclasses.replace(items[0], payload=None),)
    cut = dataclasses.replace(page, items=items, first_index=first, paged=True)
    log.info(
        "event=items_answer_cut node=%s items=%d sent=%d limit=%d",
        node,
        len(page.items),
        len(items),
        limit,
    )
    return stanza_text(iq_results.items_result(iq, node, cut))


def check_answer(text: str, limit: int) -> None:
    """Raise :class:`AnswerTooBig` when an answer cannot be sent as it is."""
    if utf8_size(text) > limit:
        raise AnswerTooBig(
            f"the answer would be larger than this service's {limit}-byte stanza limit;"
            " ask for less (XEP-0059 paging)"
        )


def element_depth_exceeds(xml: ET.Element, limit: int) -> bool:
    """Whether *xml* nests deeper than *limit* levels (itself = 1), without recursion."""
    stack = [(xml, 1)]
    while stack:
        element, depth = stack.pop()
        if len(element):
            if depth >= limit:
                return True
            stack.extend((child, depth + 1) for child in element)
    return False
