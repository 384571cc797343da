"""Core results -> the IQ replies of XEP-0060 (and XEP-0254's options echo), as stanzas.

Why apart from the notices: a reply answers one request and is built on its
slixmpp ``Iq`` (``iq.reply()``); the occasional requests that get these
(configure, subscribe, items ...) are not the per-item hot path, whose answers
are text (``text_render.py``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import datetime

from slixmpp import Iq

from xmpp_queue.core.model import AffiliationEntry, Item, ItemPage, Subscription
from xmpp_queue.core.model import bare as bare_jid
from xmpp_queue.core.subscribe_options import SubscribeOptions
from xmpp_queue.xmpp import forms
from xmpp_queue.xmpp.render import add_payload, sub_element
from xmpp_queue.xmpp.stanzas import (
    PUBSUB,
    PUBSUB_OWNER,
    QUEUE_EXT,
    RSM,
    SHIM,
    format_instant,
)


def empty_result(iq: Iq) -> Iq:
    return iq.reply()


def _pubsub(reply: Iq, ns: str = PUBSUB) -> ET.Element:
    return sub_element(reply.xml, ns, "pubsub")


def create_result(iq: Iq, node: str, instant: bool) -> Iq:
    """§8.1.2: an instant node's name is returned; §8.1.1 allows an empty result."""
    reply = iq.reply()
    if instant:
        sub_element(_pubsub(reply), PUBSUB, "create", node=node)
    return reply


def publish_result(iq: Iq, node: str, item_id: str) -> Iq:
    """§7.1.2: the node and the (possibly generated) ItemID."""
    reply = iq.reply()
    publish = sub_element(_pubsub(reply), PUBSUB, "publish", node=node)
    sub_element(publish, PUBSUB, "item", id=item_id)
    return reply


def subscription_result(iq: Iq, sub: Subscription, echo: SubscribeOptions | None) -> Iq:
    """§6.1.2, plus XEP-0254 §2.1's options echo for queue subscriptions."""
    reply = iq.reply()
    pubsub = _pubsub(reply)
    sub_element(
        pubsub,
        PUBSUB,
        "subscription",
        node=sub.node,
        jid=sub.jid,
        subid=sub.subid,
        subscription=str(sub.state),
    )
    if echo is not None:
        sub_element(pubsub, PUBSUB, "options").append(forms.options_echo_form(echo))
    return reply


def form_result(iq: Iq, ns: str, element: str, form: ET.Element, **attrs: str | None) -> Iq:
    """A form inside ``<pubsub><element .../></pubsub>``: options, default, configure."""
    reply = iq.reply()
    sub_element(_pubsub(reply, ns), ns, element, **attrs).append(form)
    return reply


def _item(parent: ET.Element, ns: str, item: Item, publisher: str | None) -> None:
    """An ``<item/>``: its payload, then its attributes as XEP-0131 ``<headers/>``
    (the same place a publisher put them)."""
    element = sub_element(parent, ns, "item", id=item.item_id, publisher=publisher)
    add_payload(element, item.payload)
    if item.headers:
        container = sub_element(element, SHIM, "headers")
        for name, value in item.headers.items():
            sub_element(container, SHIM, "header", name=name).text = value


def items_result(iq: Iq, node: str, page: ItemPage) -> Iq:
    """§6.5.2 items, with an XEP-0059 ``<set/>`` when the request was paged (§6.5.4),
    and each item's ``publisher`` when the node exposes publishers (§7.1.2)."""
    reply = iq.reply()
    pubsub = _pubsub(reply)
    items = sub_element(pubsub, PUBSUB, "items", node=node)
    for item in page.items:
        _item(items, PUBSUB, item, bare_jid(item.publisher) if page.show_publisher else None)
    if page.paged:
        rsm = sub_element(pubsub, RSM, "set")
        if page.items:
            index = None if page.first_index is None else str(page.first_index)
            sub_element(rsm, RSM, "first", index=index).text = page.items[0].item_id
            sub_element(rsm, RSM, "last").text = page.items[-1].item_id
        sub_element(rsm, RSM, "count").text = str(page.count)
    return reply


def subscriptions_result(iq: Iq, subs: Sequence[Subscription], node: str | None) -> Iq:
    """§5.6 the requester's subscriptions (with node on each)."""
    reply = iq.reply()
    container = sub_element(_pubsub(reply), PUBSUB, "subscriptions", node=node)
    for sub in subs:
        sub_element(
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
    container = sub_element(_pubsub(reply, PUBSUB_OWNER), PUBSUB_OWNER, "subscriptions", node=node)
    for sub in subs:
        sub_element(
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
    container = sub_element(_pubsub(reply), PUBSUB, "affiliations", node=node)
    for entry in entries:
        sub_element(
            container, PUBSUB, "affiliation", node=entry.node, affiliation=str(entry.affiliation)
        )
    return reply


def node_affiliations_result(iq: Iq, node: str, entries: Sequence[AffiliationEntry]) -> Iq:
    """§8.9.1 a node's affiliations for its owner."""
    reply = iq.reply()
    container = sub_element(_pubsub(reply, PUBSUB_OWNER), PUBSUB_OWNER, "affiliations", node=node)
    for entry in entries:
        sub_element(
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
    extend = sub_element(_pubsub(reply), QUEUE_EXT, "extend", node=node)
    sub_element(extend, QUEUE_EXT, "item", id=item_id, expires=format_instant(expires))
    return reply
