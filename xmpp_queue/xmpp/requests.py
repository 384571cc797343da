"""Stanza -> typed request: the only place that reads request XML.

slixmpp's stanza API is dictionary-like and untyped, so requests are parsed at
the edge into frozen dataclasses and nothing past the handlers touches XML
Malformed input raises the core's own errors
(``NodeIdRequired``, ``ItemRequired``, ``BadRequest``, ``InvalidPayload`` ...), so
parse failures travel through the same error table as every other refusal.

Item payloads are the one piece of client XML the service stores and sends on.
They are checked and serialised here, with lxml and a hardened parser (no DTD,
no entities, no network, no huge trees): exactly one element, no DOCTYPE, no
processing instructions, then Canonical XML, so equal payloads are equal text
and ``payload_size`` is the stored byte count that pubsub#max_payload_size is
judged on. Payloads arriving inside the XMPP stream were already parsed by the
stream parser; those arriving as text (admin commands, bulk loads) get the same
treatment through :func:`canonical_payload_text`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field

from lxml import etree
from slixmpp import JID
from slixmpp.jid import InvalidJID
from slixmpp.xmlstream.tostring import tostring

from xmpp_queue.core.errors import (
    BadRequest,
    InvalidPayload,
    ItemRequired,
    JidRequired,
    NodeIdRequired,
    PayloadTooBig,
)
from xmpp_queue.core.model import Affiliation, NewItem, PageRequest, SubscriptionState
from xmpp_queue.core.node_config import PUBLISH_OPTIONS_FORM
from xmpp_queue.xmpp.forms import FormValues, find_form, read_form
from xmpp_queue.xmpp.stanzas import PUBSUB, PUBSUB_OWNER, RSM, SHIM

SHIM_HEADERS = f"{{{SHIM}}}headers"
SHIM_HEADER = f"{{{SHIM}}}header"

MAX_PAYLOAD_BYTES = 1024 * 1024
"""Hard cap before any parsing; pubsub#max_payload_size (the node's own limit) is
judged by the core on the canonical size."""

MAX_DEPTH = 100
"""The deepest a received stanza may nest (the stanza itself is level 1; an item's
payload starts at level 5, so it may nest 96 deep). Deeper ones are refused as a
whole before anything reads them (``QueueComponent.take_raw``): copying,
serialising or echoing such a tree recurses once per level and would reach
Python's recursion limit (about 1,000) and leave the request without an answer."""

_PARSER = etree.XMLParser(
    resolve_entities=False,
    no_network=True,
    huge_tree=False,
    load_dtd=False,
    dtd_validation=False,
    remove_blank_text=False,
)


# --- request types -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateRequest:
    node: str | None  # None: instant node (§8.1.2)
    config: FormValues | None


@dataclass(frozen=True, slots=True)
class NodeRequest:
    """Requests that name only a node: configure get, purge, owner subscriptions
    and affiliations get."""

    node: str


@dataclass(frozen=True, slots=True)
class ConfigureSet:
    node: str
    values: FormValues
    cancel: bool  # <x type='cancel'/>: §8.2.6, nothing changes


@dataclass(frozen=True, slots=True)
class DeleteRequest:
    node: str
    redirect: str | None


@dataclass(frozen=True, slots=True)
class DefaultOptionsRequest:
    node: str | None


@dataclass(frozen=True, slots=True)
class PublishRequest:
    """§7.1; several ``<item/>`` are §13.11's batch: (id, payload, size) each."""

    node: str
    items: tuple[NewItem, ...]
    publish_options: FormValues | None


@dataclass(frozen=True, slots=True)
class RetractRequest:
    """§7.2; several ``<item/>`` are §13.11's batch (all or none)."""

    node: str
    item_ids: tuple[str, ...]
    notify: bool | None


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


@dataclass(frozen=True, slots=True)
class NodeSubscriptionsSet:
    node: str
    changes: tuple[tuple[str, SubscriptionState, str | None], ...]


@dataclass(frozen=True, slots=True)
class NodeAffiliationsSet:
    node: str
    changes: tuple[tuple[str, Affiliation], ...]


@dataclass(frozen=True, slots=True)
class LockRequest:
    """XEP-0254 unlock (seconds None), our extend, our delayed unlock or dead-letter.

    ``item_ids`` holds several ids only for our ``<unlock/>`` (a batch nack);
    ``item_id`` is the first."""

    node: str
    item_id: str
    seconds: int | None = None
    delay: int | None = None
    reason: str = ""
    item_ids: tuple[str, ...] = ()
    reasons: Mapping[str, str] = field(default_factory=dict)  # our nack: why, per item id


# --- small readers -------------------------------------------------------------------


def _child(parent: ET.Element, ns: str, name: str) -> ET.Element | None:
    return parent.find(f"{{{ns}}}{name}")


def _text(element: ET.Element | None) -> str | None:
    """The text of an optional element: None when absent, "" when empty."""
    return None if element is None else (element.text or "")


def _node(element: ET.Element) -> str:
    node = element.get("node")
    if not node:
        raise NodeIdRequired()
    return node


def _optional_node(element: ET.Element) -> str | None:
    return element.get("node") or None


def normalise_jid(value: str) -> str:
    """A JID as slixmpp normalises it (case-folded local part and domain)."""
    try:
        return JID(value).full
    except InvalidJID:
        raise BadRequest(f"malformed JID: {value[:100]!r}") from None


def _jid(element: ET.Element) -> str:
    value = element.get("jid")
    if not value:
        raise JidRequired()
    return normalise_jid(value)


def _int(raw: str | None, what: str, minimum: int = 0) -> int | None:
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise BadRequest(f"{what} must be an integer") from None
    if value < minimum:
        raise BadRequest(f"{what} must be at least {minimum}")
    return value


def _item_ids(element: ET.Element, ns: str) -> list[str]:
    return [item.get("id") or "" for item in element.findall(f"{{{ns}}}item")]


def _one_item_id(element: ET.Element, ns: str) -> str:
    ids = _item_ids(element, ns)
    if not ids or not ids[0]:
        raise ItemRequired()
    if len(ids) > 1:
        raise BadRequest("one item per request")
    return ids[0]


def _some_item_ids(element: ET.Element, ns: str) -> tuple[str, ...]:
    """One or more item ids (XEP-0060 §13.11 batch); every ``<item/>`` needs its id."""
    ids = _item_ids(element, ns)
    if not ids or not all(ids):
        raise ItemRequired()
    return tuple(ids)


def _form_values(parent: ET.Element | None) -> FormValues | None:
    x = find_form(parent)
    return None if x is None else read_form(x).values


# --- payloads ------------------------------------------------------------------------


def canonical_payload_text(data: str | bytes) -> tuple[str, int]:
    """Check and canonicalise one XML element given as text; (C14N text, byte size).

    Rejects anything but a single element: DOCTYPE (and with it entity
    expansion), processing instructions, text outside the element, non-XML.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise PayloadTooBig(len(raw), MAX_PAYLOAD_BYTES)
    try:
        root = etree.fromstring(raw, _PARSER)
    except etree.XMLSyntaxError as exc:
        raise InvalidPayload(f"payload is not well-formed XML: {exc.msg}") from None
    tree = root.getroottree()
    if tree.docinfo.doctype or tree.docinfo.internalDTD is not None:
        raise InvalidPayload("payloads must not carry a DOCTYPE")
    if any(True for _ in root.itersiblings(preceding=True)) or any(
        True for _ in root.itersiblings()
    ):
        raise InvalidPayload("payloads must be exactly one element")
    for node in root.iter(etree.ProcessingInstruction, etree.Entity):
        raise InvalidPayload(f"payloads must not carry {type(node).__name__} nodes")
    canonical = etree.tostring(root, method="c14n", with_comments=False)
    return canonical.decode("utf-8"), len(canonical)


def canonical_payload(element: ET.Element) -> tuple[str, int]:
    """The stored form of a payload element received in a stanza."""
    return canonical_payload_text(tostring(element))


def item_payload(item: ET.Element) -> tuple[str | None, int]:
    """The payload of an ``<item/>``: None when empty, else exactly one element."""
    payload, size, _ = item_content(item)
    return payload, size


def item_content(item: ET.Element) -> tuple[str | None, int, dict[str, str]]:
    """An ``<item/>``'s payload (None, or exactly one element) and its attributes:
    at most one XEP-0131 ``<headers/>`` beside the payload, in either order."""
    children = list(item)
    stray_text = (item.text or "").strip() or any((c.tail or "").strip() for c in children)
    if stray_text:
        raise InvalidPayload("an item holds one XML element, not text")
    headers = [c for c in children if c.tag == SHIM_HEADERS]
    if len(headers) > 1:
        raise InvalidPayload("an item holds at most one SHIM <headers/> element")
    attributes = shim_attributes(headers[0]) if headers else {}
    payloads = [c for c in children if c.tag != SHIM_HEADERS]
    if not payloads:
        return None, 0, attributes
    if len(payloads) > 1:
        raise InvalidPayload("an item holds exactly one payload element (and optional headers)")
    return (*canonical_payload(payloads[0]), attributes)


def shim_attributes(headers: ET.Element) -> dict[str, str]:
    """``<header name='k'>v</header>`` children as a dict; a repeated name or
    anything but headers is refused (an attribute has one value)."""
    found: dict[str, str] = {}
    for child in headers:
        if child.tag != SHIM_HEADER:
            raise InvalidPayload("SHIM <headers/> holds only <header/> elements")
        if len(child):
            raise InvalidPayload("a SHIM <header/> holds text only")
        name = child.get("name")
        if name is None:
            raise InvalidPayload("a SHIM <header/> needs a name")
        if name in found:
            raise InvalidPayload(f"header {name!r} appears twice")
        found[name] = child.text or ""
    return found


# --- parsers, one per request (pubsub = the <pubsub/> element, el = the verb) ---------


def parse_create(pubsub: ET.Element, el: ET.Element) -> CreateRequest:
    configure = _child(pubsub, PUBSUB, "configure")
    return CreateRequest(_optional_node(el), _form_values(configure))


def parse_node(pubsub: ET.Element, el: ET.Element) -> NodeRequest:
    return NodeRequest(_node(el))


def parse_configure_set(pubsub: ET.Element, el: ET.Element) -> ConfigureSet:
    node = _node(el)
    x = find_form(el)
    if x is None:
        raise BadRequest("configure needs a data form")
    form = read_form(x)
    return ConfigureSet(node, form.values, form.type == "cancel")


def parse_delete(pubsub: ET.Element, el: ET.Element) -> DeleteRequest:
    redirect = _child(el, PUBSUB_OWNER, "redirect")
    uri = redirect.get("uri") if redirect is not None else None
    return DeleteRequest(_node(el), uri or None)


def parse_default_options(pubsub: ET.Element, el: ET.Element) -> DefaultOptionsRequest:
    return DefaultOptionsRequest(_optional_node(el))


def parse_publish(pubsub: ET.Element, el: ET.Element) -> PublishRequest:
    node = _node(el)
    items = el.findall(f"{{{PUBSUB}}}item")
    if not items:
        raise ItemRequired()
    parsed = tuple(NewItem(item.get("id"), *item_content(item)) for item in items)
    options_el = _child(pubsub, PUBSUB, "publish-options")
    options = None
    x = find_form(options_el)
    if x is not None:
        form = read_form(x)
        if form.form_type not in (None, PUBLISH_OPTIONS_FORM):
            raise BadRequest("publish-options must be a pubsub#publish-options form")
        options = form.values
    return PublishRequest(node, parsed, options)


def parse_retract(pubsub: ET.Element, el: ET.Element) -> RetractRequest:
    node = _node(el)
    notify_raw = el.get("notify")
    notify = None
    if notify_raw in ("1", "true"):
        notify = True
    elif notify_raw in ("0", "false"):
        notify = False
    elif notify_raw is not None:
        raise BadRequest("notify must be a boolean")
    return RetractRequest(node, _some_item_ids(el, PUBSUB), notify)


def parse_subscribe(pubsub: ET.Element, el: ET.Element) -> SubscribeRequest:
    """§6.1 subscribe, or §6.3.7 subscribe-and-configure (XEP-0254 §2.1).

    The ``<options/>`` beside ``<subscribe/>`` belongs to it, so its ``node`` and
    ``jid`` attributes may be left out or empty, as in XEP-0254's examples (and
    XEP-0060 §6.3.7's); when given, they must name the same node and JID, else
    bad-request (options for another subscription cannot ride along).
    """
    node = _node(el)
    jid = _jid(el)
    options = _child(pubsub, PUBSUB, "options")
    if options is not None:
        if options.get("node") and options.get("node") != node:
            raise BadRequest("the options name another node than the subscribe")
        other = options.get("jid")
        if other and normalise_jid(other) != jid:
            raise BadRequest("the options name another JID than the subscribe")
    return SubscribeRequest(node, jid, _form_values(options))


def parse_subscription(pubsub: ET.Element, el: ET.Element) -> SubscriptionRequest:
    return SubscriptionRequest(_node(el), _jid(el), el.get("subid") or None)


def parse_options_set(pubsub: ET.Element, el: ET.Element) -> OptionsSet:
    node, jid = _node(el), _jid(el)
    x = find_form(el)
    if x is None:
        raise BadRequest("options needs a data form")
    return OptionsSet(node, jid, el.get("subid") or None, read_form(x).values)


def parse_items(pubsub: ET.Element, el: ET.Element) -> ItemsRequest:
    node = _node(el)
    ids = _item_ids(el, PUBSUB)
    if any(not i for i in ids):
        raise ItemRequired()
    max_items = _int(el.get("max_items"), "max_items", minimum=1)
    page = None
    rsm = _child(pubsub, RSM, "set")
    if rsm is not None:
        page = PageRequest(
            max=_int(_text(_child(rsm, RSM, "max")), "RSM max"),
            after=_text(_child(rsm, RSM, "after")),
            before=_text(_child(rsm, RSM, "before")),
            index=_int(_text(_child(rsm, RSM, "index")), "RSM index"),
        )
    return ItemsRequest(node, tuple(ids), max_items, page, el.get("subid") or None)


def parse_optional_node(pubsub: ET.Element, el: ET.Element) -> OptionalNodeRequest:
    return OptionalNodeRequest(_optional_node(el))


def parse_node_subscriptions_set(pubsub: ET.Element, el: ET.Element) -> NodeSubscriptionsSet:
    node = _node(el)
    changes = []
    for sub in el:
        try:
            state = SubscriptionState(sub.get("subscription", ""))
        except ValueError:
            raise BadRequest(
                "subscription must be none, pending, unconfigured or subscribed"
            ) from None
        changes.append((_jid(sub), state, sub.get("subid") or None))
    return NodeSubscriptionsSet(node, tuple(changes))


def parse_node_affiliations_set(pubsub: ET.Element, el: ET.Element) -> NodeAffiliationsSet:
    node = _node(el)
    changes = []
    for aff in el:
        try:
            affiliation = Affiliation(aff.get("affiliation", ""))
        except ValueError:
            allowed = ", ".join(a.value for a in Affiliation)
            raise BadRequest(f"affiliation must be one of {allowed}") from None
        changes.append((_jid(aff), affiliation))
    return NodeAffiliationsSet(node, tuple(changes))


def parse_lock(pubsub: ET.Element, el: ET.Element) -> LockRequest:
    """XEP-0254 unlock, or our extend / unlock / dead-letter: the same shape, in
    their own namespaces (``seconds``, ``delay`` and ``reason`` attributes)."""
    ns = el.tag[1:].split("}")[0]
    seconds = _int(el.get("seconds"), "seconds", minimum=1)
    delay = _int(el.get("delay"), "delay", minimum=0)
    reason = el.get("reason", "")
    item_id = _one_item_id(el, ns)
    return LockRequest(_node(el), item_id, seconds, delay, reason, (item_id,))


def parse_batch_unlock(pubsub: ET.Element, el: ET.Element) -> LockRequest:
    """Our ``<unlock xmlns='urn:xmpp-queue:0'>``: one or more items (a batch nack,
    all or none), optionally not offered again for ``delay`` seconds, optionally
    saying why (``reason`` on ``<unlock/>`` for every item, on an ``<item/>`` for
    that one; the service bounds its length)."""
    ns = el.tag[1:].split("}")[0]
    delay = _int(el.get("delay"), "delay", minimum=0)
    ids = _some_item_ids(el, ns)
    default = el.get("reason", "")
    reasons = {}
    for item in el.findall(f"{{{ns}}}item"):
        text = item.get("reason", default)
        if text:
            reasons[item.get("id") or ""] = text
    return LockRequest(_node(el), ids[0], None, delay, default, ids, reasons)
