"""Stanza -> typed request: the readers every request parser shares.

slixmpp's stanza API is dictionary-like and untyped, so requests are parsed at
the edge into frozen dataclasses and nothing past the handlers touches XML.
Malformed input raises the core's own errors
(``NodeIdRequired``, ``ItemRequired``, ``BadRequest``, ``InvalidPayload`` ...), so
parse failures travel through the same error table as every other refusal.

The parsers, one per request, live by verb family (``owner_requests``,
``subscriber_requests``, ``item_requests``); the readers they share (a node, a
JID, item ids, an integer attribute, a data form) and the depth limit of a
received stanza are here. Item payloads are ``payloads.py``'s.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from slixmpp import JID
from slixmpp.jid import InvalidJID

from xmpp_queue.core.errors import (
    BadRequest,
    ItemRequired,
    JidRequired,
    NodeIdRequired,
)
from xmpp_queue.xmpp.forms import FormValues, find_form, read_form

MAX_DEPTH = 100
"""The deepest a received stanza may nest (the stanza itself is level 1; an item's
payload starts at level 5, so it may nest 96 deep). Deeper ones are refused as a
whole before anything reads them (``QueueComponent.take_raw``): copying,
serialising or echoing such a tree recurses once per level and would reach
Python's recursion limit (about 1,000) and leave the request without an answer."""


def child(parent: ET.Element, ns: str, name: str) -> ET.Element | None:
    return parent.find(f"{{{ns}}}{name}")


def text_of(element: ET.Element | None) -> str | None:
    """The text of an optional element: None when absent, "" when empty."""
    return None if element is None else (element.text or "")


def node_of(element: ET.Element) -> str:
    node = element.get("node")
    if not node:
        raise NodeIdRequired()
    return node


def optional_node(element: ET.Element) -> str | None:
    return element.get("node") or None


def normalise_jid(value: str) -> str:
    """A JID as slixmpp normalises it (case-folded local part and domain)."""
    try:
        return JID(value).full
    except InvalidJID:
        raise BadRequest(f"malformed JID: {value[:100]!r}") from None


def jid_of(element: ET.Element) -> str:
    value = element.get("jid")
    if not value:
        raise JidRequired()
    return normalise_jid(value)


def integer(raw: str | None, what: str, minimum: int = 0) -> int | None:
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise BadRequest(f"{what} must be an integer") from None
    if value < minimum:
        raise BadRequest(f"{what} must be at least {minimum}")
    return value


def item_ids(element: ET.Element, ns: str) -> list[str]:
    return [item.get("id") or "" for item in element.findall(f"{{{ns}}}item")]


def one_item_id(element: ET.Element, ns: str) -> str:
    ids = item_ids(element, ns)
    if not ids or not ids[0]:
        raise ItemRequired()
    if len(ids) > 1:
        raise BadRequest("one item per request")
    return ids[0]


def some_item_ids(element: ET.Element, ns: str) -> tuple[str, ...]:
    """One or more item ids (XEP-0060 §13.11 batch); every ``<item/>`` needs its id."""
    ids = item_ids(element, ns)
    if not ids or not all(ids):
        raise ItemRequired()
    return tuple(ids)


def form_values(parent: ET.Element | None) -> FormValues | None:
    x = find_form(parent)
    return None if x is None else read_form(x).values
