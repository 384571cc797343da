"""Core results and effects -> stanzas.

Results become the IQ replies of XEP-0060 (and XEP-0254's options echo);
effects become one ``<message/>`` each, with the XEP-0060 event payloads, the
XEP-0254 unlock event and XEP-0131 SHIM headers for SubIDs and item headers
(a dead letter's origin, an unlock's reason).

Message type: the node's ``pubsub#notification_type``, carried by each effect
(``headline``), headline by default for ordinary and queue nodes alike. A
headline reaches every available resource and is dropped, never stored offline,
when the recipient is gone (RFC 6121 §8.5.2, §8.5.3). For a queue that is the
safe behaviour: the item stays locked in the queue and comes back to the queue
by the worker's unavailable presence or its lock timeout, whereas a normal
message would sit in offline storage (or be rerouted to another resource of the
account) and be worked on again, late, after the item went to another worker.
``normal`` stays available per node. Authorization requests (§8.6) are forms for
an owner to answer: always normal.

Several items in one notification (a queue worker's ``pubsub#queue_max_batch``
above 1): XEP-0131 headers belong to a whole stanza, but the item headers
(``delivery-attempt``, a dead letter's origin) belong to each item, so in such a
notice each item carries its own ``<headers/>`` after its payload and only the
SubID stays on the message. Only a worker that asked for batches gets them; a
one-item notice is exactly as before.

Every message gets a fresh id so a bounce can be matched to it (XEP-0060 §13.4);
ids start with :data:`NOTIFICATION_ID_PREFIX` so a bounced notification is
recognised even after a restart.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol
from xml.sax.saxutils import escape

from slixmpp import Iq, Message
from slixmpp.basexmpp import BaseXMPP

from xmpp_queue.core.effects import (
    AuthorizationRequest,
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
from xmpp_queue.core.model import AffiliationEntry, Item, ItemPage, Subscription
from xmpp_queue.core.model import bare as bare_jid
from xmpp_queue.core.node_config import SubscribeOptions
from xmpp_queue.xmpp import forms
from xmpp_queue.xmpp.stanzas import (
    PUBSUB,
    PUBSUB_EVENT,
    PUBSUB_OWNER,
    QUEUE_EXT,
    QUEUEING,
    RSM,
    SHIM,
    format_instant,
    pubsub_feature,
)

log = logging.getLogger("xmpp_queue.xmpp.render")

NOTIFICATION_ID_PREFIX = "xq-"

# Disco features this module implements (XEP-0060 §8.8.4 / §12.6 subscription notices).
RENDERED_FEATURES = (pubsub_feature("subscription-notifications"),)


def _el(parent: ET.Element, ns: str, tag: str, /, **attrs: str | None) -> ET.Element:
    return ET.SubElement(
        parent, f"{{{ns}}}{tag}", {k: v for k, v in attrs.items() if v is not None}
    )


def payload_element(payload: str) -> ET.Element | None:
    """A stored payload (Canonical XML written by ``requests``) as an element.

    Canonical XML never contains ``<!`` (no DOCTYPE, comments or CDATA; ``<`` in
    text is escaped), so a stored payload that does was not written through the
    checks (a hand-edited row) and is not parsed: the item goes out without it.
    """
    if "<!" in payload:
        log.warning("event=payload_skipped reason=not_canonical")
        return None
    try:
        return ET.fromstring(payload)
    except ET.ParseError:
        log.warning("event=payload_skipped reason=not_well_formed")
        return None


def _add_payload(item: ET.Element, payload: str | None) -> None:
    if payload is not None:
        element = payload_element(payload)
        if element is not None:
            item.append(element)


# --- IQ results ----------------------------------------------------------------------


def empty_result(iq: Iq) -> Iq:
    return iq.reply()


def _pubsub(reply: Iq, ns: str = PUBSUB) -> ET.Element:
    return _el(reply.xml, ns, "pubsub")


def create_result(iq: Iq, node: str, instant: bool) -> Iq:
    """§8.1.2: an instant node's name is returned; §8.1.1 allows an empty result."""
    reply = iq.reply()
    if instant:
        _el(_pubsub(reply), PUBSUB, "create", node=node)
    return reply


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


def publish_result(iq: Iq, node: str, item_id: str) -> Iq:
    """§7.1.2: the node and the (possibly generated) ItemID."""
    reply = iq.reply()
    publish = _el(_pubsub(reply), PUBSUB, "publish", node=node)
    _el(publish, PUBSUB, "item", id=item_id)
    return reply


def subscription_result(iq: Iq, sub: Subscription, echo: SubscribeOptions | None) -> Iq:
    """§6.1.2, plus XEP-0254 §2.1's options echo for queue subscriptions."""
    reply = iq.reply()
    pubsub = _pubsub(reply)
    _el(
        pubsub,
        PUBSUB,
        "subscription",
        node=sub.node,
        jid=sub.jid,
        subid=sub.subid,
        subscription=str(sub.state),
    )
    if echo is not None:
        _el(pubsub, PUBSUB, "options").append(forms.options_echo_form(echo))
    return reply


def form_result(iq: Iq, ns: str, element: str, form: ET.Element, **attrs: str | None) -> Iq:
    """A form inside ``<pubsub><element .../></pubsub>``: options, default, configure."""
    reply = iq.reply()
    _el(_pubsub(reply, ns), ns, element, **attrs).append(form)
    return reply


def _item(parent: ET.Element, ns: str, item: Item, publisher: str | None) -> None:
    """An ``<item/>``: its payload, then its attributes as XEP-0131 ``<headers/>``
    (the same place a publisher put them)."""
    element = _el(parent, ns, "item", id=item.item_id, publisher=publisher)
    _add_payload(element, item.payload)
    if item.headers:
        container = _el(element, SHIM, "headers")
        for name, value in item.headers.items():
            _el(container, SHIM, "header", name=name).text = value


def items_result(iq: Iq, node: str, page: ItemPage) -> Iq:
    """§6.5.2 items, with an XEP-0059 ``<set/>`` when the request was paged (§6.5.4),
    and each item's ``publisher`` when the node exposes publishers (§7.1.2)."""
    reply = iq.reply()
    pubsub = _pubsub(reply)
    items = _el(pubsub, PUBSUB, "items", node=node)
    for item in page.items:
        _item(items, PUBSUB, item, bare_jid(item.publisher) if page.show_publisher else None)
    if page.paged:
        rsm = _el(pubsub, RSM, "set")
        if page.items:
            index = None if page.first_index is None else str(page.first_index)
            _el(rsm, RSM, "first", index=index).text = page.items[0].item_id
            _el(rsm, RSM, "last").text = page.items[-1].item_id
        _el(rsm, RSM, "count").text = str(page.count)
    return reply


def subscriptions_result(iq: Iq, subs: Sequence[Subscription], node: str | None) -> Iq:
    """§5.6 the requester's subscriptions (with node on each)."""
    reply = iq.reply()
    container = _el(_pubsub(reply), PUBSUB, "subscriptions", node=node)
    for sub in subs:
        _el(
            container,
            PUBSUB,
            "subscription",
            node=sub.node,
            jid=sub.jid,
            subscription=str(sub.state),
            subid=sub.subid,
        )
    return reply


def node_subscriptions_result(iq: Iq, node: str, subs: Sequence[Subscription]) -> Iq:
    """§8.8.1 a node's subscriptions for its owner."""
    reply = iq.reply()
    container = _el(_pubsub(reply, PUBSUB_OWNER), PUBSUB_OWNER, "subscriptions", node=node)
    for sub in subs:
        _el(
            container,
            PUBSUB_OWNER,
            "subscription",
            jid=sub.jid,
            subscription=str(sub.state),
            subid=sub.subid,
        )
    return reply


def affiliations_result(iq: Iq, entries: Sequence[AffiliationEntry], node: str | None) -> Iq:
    """§5.7 the requester's affiliations."""
    reply = iq.reply()
    container = _el(_pubsub(reply), PUBSUB, "affiliations", node=node)
    for entry in entries:
        _el(container, PUBSUB, "affiliation", node=entry.node, affiliation=str(entry.affiliation))
    return reply


def node_affiliations_result(iq: Iq, node: str, entries: Sequence[AffiliationEntry]) -> Iq:
    """§8.9.1 a node's affiliations for its owner."""
    reply = iq.reply()
    container = _el(_pubsub(reply, PUBSUB_OWNER), PUBSUB_OWNER, "affiliations", node=node)
    for entry in entries:
        _el(
            container,
            PUBSUB_OWNER,
            "affiliation",
            jid=entry.jid,
            affiliation=str(entry.affiliation),
        )
    return reply


def extend_result(iq: Iq, node: str, item_id: str, expires: datetime) -> Iq:
    """Our lock extension: the new deadline of the worker's lock."""
    reply = iq.reply()
    extend = _el(_pubsub(reply), QUEUE_EXT, "extend", node=node)
    _el(extend, QUEUE_EXT, "item", id=item_id, expires=format_instant(expires))
    return reply


# --- notifications -----------------------------------------------------------------


def _headers(msg: Message, headers: Sequence[tuple[str, str]]) -> None:
    """XEP-0131 SHIM headers, in one ``<headers/>`` element."""
    if not headers:
        return
    container = _el(msg.xml, SHIM, "headers")
    for name, value in headers:
        _el(container, SHIM, "header", name=name).text = value


def _subid_headers(subids: Sequence[str]) -> list[tuple[str, str]]:
    # XEP-0060 §12.3: SubID headers tell a JID which of its subscriptions a
    # notice is for; on a queue the one SubID names the lock holder.
    return [("SubID", subid) for subid in subids]


def notification(xmpp: BaseXMPP, effect: Effect, sender: str, msg_id: str) -> Message:
    """One effect of the occasional kinds (purge, delete, configuration, subscription,
    truncation, authorization request) as one message (see the module docstring for
    type and id). The per-item kinds are :func:`notice_text`'s alone."""
    msg = xmpp.make_message(mto=effect.to, mfrom=sender)
    msg["id"] = msg_id
    if not isinstance(effect, AuthorizationRequest) and effect.headline:
        msg["type"] = "headline"
    else:
        del msg["type"]
    if isinstance(effect, AuthorizationRequest):
        msg.xml.append(forms.authorization_form(effect.node, effect.jid, effect.subid))
        return msg
    event = _el(msg.xml, PUBSUB_EVENT, "event")
    headers: list[tuple[str, str]] = []
    if isinstance(effect, TruncateNotice):
        items = _el(event, PUBSUB_EVENT, "items", node=effect.node)
        _el(
            items,
            QUEUE_EXT,
            "truncated",
            items=str(effect.items),
            bytes=str(effect.payload_bytes),
        )
        headers.append(("reason", "truncated"))
    elif isinstance(effect, PurgeNotice):
        _el(event, PUBSUB_EVENT, "purge", node=effect.node)
    elif isinstance(effect, DeleteNotice):
        delete = _el(event, PUBSUB_EVENT, "delete", node=effect.node)
        if effect.redirect:
            _el(delete, PUBSUB_EVENT, "redirect", uri=effect.redirect)
    elif isinstance(effect, ConfigNotice):
        config = _el(event, PUBSUB_EVENT, "configuration", node=effect.node)
        if effect.config is not None:
            config.append(forms.node_config_form(effect.config, "result"))
    elif isinstance(effect, SubscriptionNotice):
        _el(
            event,
            PUBSUB_EVENT,
            "subscription",
            node=effect.node,
            jid=effect.jid,
            subscription=str(effect.state),
            subid=effect.subid,
        )
    else:  # the per-item kinds are :func:`notice_text`'s; a new kind needs a renderer
        raise TypeError(f"no stanza rendering for {type(effect).__name__}")
    _headers(msg, headers)
    return msg


# --- the per-item notices, as text -----------------------------------------------------


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
        headers.extend(_subid_headers(effect.subids))
        body = f"<items node={_attr(effect.node)}>{''.join(parts)}</items>"
    elif isinstance(effect, RetractNotice):
        retracts = "".join(f"<retract id={_attr(i)}/>" for i in effect.item_ids)
        body = f"<items node={_attr(effect.node)}>{retracts}</items>"
        headers = _subid_headers(effect.subids)
    elif isinstance(effect, UnlockNotice):
        unlock = f"<unlock xmlns='{QUEUEING}' id={_attr(effect.item_id)}/>"
        body = f"<items node={_attr(effect.node)}>{unlock}</items>"
        headers = [("reason", effect.reason)]
    else:
        return None
    return f"{head}{event}{body}</event>{_headers_text(headers)}</message>"
