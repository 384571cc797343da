"""The subscriber's requests (XEP-0060 §6): subscribe, unsubscribe, options,
items, and the requester's own subscriptions and affiliations.

Each parser takes the ``<pubsub/>`` element and the verb element inside it and
returns a frozen request (or raises the core's error for what is malformed).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from xmpp_queue.core.errors import (
    BadRequest,
    ItemRequired,
)
from xmpp_queue.core.model import PageRequest
from xmpp_queue.xmpp.forms import FormValues, find_form, read_form
from xmpp_queue.xmpp.requests import (
    child,
    form_values,
    integer,
    item_ids,
    jid_of,
    node_of,
    normalise_jid,
    optional_node,
    text_of,
)
from xmpp_queue.xmpp.stanzas import PUBSUB, RSM


@dataclass(frozen=True, slots=True)
class DefaultOptionsRequest:
    node: str | None


@dataclass(frozen=True, slots=True)
class SubscribeRequest:
    node: str
    jid: str
    options: FormValues | None


@dataclass(frozen=True, slots=True)
class SubscriptionRequest:
    """unsubscribe and options get: one subscription, by JID and optional subid."""

    node: str
    jid: str
    subid: str | None


@dataclass(frozen=True, slots=True)
class OptionsSet:
    node: str
    jid: str
    subid: str | None
    values: FormValues


@dataclass(frozen=True, slots=True)
class ItemsRequest:
    node: str
    item_ids: tuple[str, ...]
    max_items: int | None
    page: PageRequest | None
    subid: str | None


@dataclass(frozen=True, slots=True)
class OptionalNodeRequest:
    """The requester's own subscriptions or affiliations, optionally for one node."""

    node: str | None


def parse_default_options(pubsub: ET.Element, el: ET.Element) -> DefaultOptionsRequest:
    return DefaultOptionsRequest(optional_node(el))


def parse_subscribe(pubsub: ET.Element, el: ET.Element) -> SubscribeRequest:
    """§6.1 subscribe, or §6.3.7 subscribe-and-configure (XEP-0254 §2.1).

    The ``<options/>`` beside ``<subscribe/>`` belongs to it, so its ``node`` and
    ``jid`` attributes may be left out or empty, as in XEP-0254's examples (and
    XEP-0060 §6.3.7's); when given, they must name the same node and JID, else
    bad-request (options for another subscription cannot ride along).
    """
    node = node_of(el)
    jid = jid_of(el)
    options = child(pubsub, PUBSUB, "options")
    if options is not None:
        if options.get("node") and options.get("node") != node:
            raise BadRequest("the options name another node than the subscribe")
        other = options.get("jid")
        if other and normalise_jid(other) != jid:
            raise BadRequest("the options name another JID than the subscribe")
    return SubscribeRequest(node, jid, form_values(options))


def parse_subscription(pubsub: ET.Element, el: ET.Element) -> SubscriptionRequest:
    return SubscriptionRequest(node_of(el), jid_of(el), el.get("subid") or None)


def parse_options_set(pubsub: ET.Element, el: ET.Element) -> OptionsSet:
    node, jid = node_of(el), jid_of(el)
    x = find_form(el)
    if x is None:
        raise BadRequest("options needs a data form")
    return OptionsSet(node, jid, el.get("subid") or None, read_form(x).values)


def parse_items(pubsub: ET.Element, el: ET.Element) -> ItemsRequest:
    node = node_of(el)
    ids = item_ids(el, PUBSUB)
    if any(not i for i in ids):
        raise ItemRequired()
    max_items = integer(el.get("max_items"), "max_items", minimum=1)
    page = None
    rsm = child(pubsub, RSM, "set")
    if rsm is not None:
        page = PageRequest(
            max=integer(text_of(child(rsm, RSM, "max")), "RSM max"),
            after=text_of(child(rsm, RSM, "after")),
            before=text_of(child(rsm, RSM, "before")),
            index=integer(text_of(child(rsm, RSM, "index")), "RSM index"),
        )
    return ItemsRequest(node, tuple(ids), max_items, page, el.get("subid") or None)


def parse_optional_node(pubsub: ET.Element, el: ET.Element) -> OptionalNodeRequest:
    return OptionalNodeRequest(optional_node(el))
