"""The pubsub stanzas a queue client sends, as strings, and what it reads back.

Why strings and bare ``ElementTree`` elements instead of slixmpp stanza
objects: the client is also the load generator of the benchmarks, which share
two cores with the server under test. Formatting a stanza here costs a few
microseconds; building it through slixmpp's ``ElementBase`` plugins costs a
hundred. Every builder returns well-formed XML with its inputs escaped.

Namespaces and elements follow XEP-0060 (pubsub), XEP-0254 (``unlock``),
XEP-0131 (SHIM headers) and this project's own requests in
``urn:xmpp-queue:0``: ``<extend seconds='N'>`` (keep a lock longer),
``<unlock delay='N'>`` (give items back, not to be offered again for N
seconds; several ``<item/>`` are a batch, all or none) and
``<dead-letter reason='...'>`` (move it to the dead-letter node now).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from xml.etree import ElementTree as ET

from xmpp_queue.client.attributes import AttributeView
from xmpp_queue.client.errors import StanzaError
from xmpp_queue.client.payload import escape_text

PUBSUB_OWNER_NS = "http://jabber.org/protocol/pubsub#owner"
PUBSUB_NS = "http://jabber.org/protocol/pubsub"
EVENT_NS = "http://jabber.org/protocol/pubsub#event"
QUEUEING_NS = "urn:xmpp:pubsub:queueing:0"
EXTEND_NS = "urn:xmpp-queue:0"
SHIM_NS = "http://jabber.org/protocol/shim"
DISCO_INFO_QUERY = "<query xmlns='http://jabber.org/protocol/disco#info'/>"
DATA_NS = "jabber:x:data"
STANZAS_NS = "urn:ietf:params:xml:ns:xmpp-stanzas"
PUBSUB_ERRORS_NS = "http://jabber.org/protocol/pubsub#errors"
NODE_CONFIG_FORM = "http://jabber.org/protocol/pubsub#node_config"
SUBSCRIBE_OPTIONS_FORM = "http://jabber.org/protocol/pubsub#subscribe_options"

CLIENT_NS = "jabber:client"
IQ_TAG = f"{{{CLIENT_NS}}}iq"
MESSAGE_TAG = f"{{{CLIENT_NS}}}message"
EVENT_TAG = f"{{{EVENT_NS}}}event"
_ITEMS_TAG = f"{{{EVENT_NS}}}items"
_ITEM_TAG = f"{{{EVENT_NS}}}item"
_RETRACT_TAG = f"{{{EVENT_NS}}}retract"
_UNLOCK_TAGS = (f"{{{QUEUEING_NS}}}unlock", "{urn:xmpp:queueing:0}unlock")  # + the spec's slip
_HEADERS_TAG = f"{{{SHIM_NS}}}headers"
_HEADER_TAG = f"{{{SHIM_NS}}}header"
_ERROR_TAG = f"{{{CLIENT_NS}}}error"
_TEXT_TAG = f"{{{STANZAS_NS}}}text"
_PUBSUB_TAG = f"{{{PUBSUB_NS}}}pubsub"
_PUBLISH_TAG = f"{{{PUBSUB_NS}}}publish"
_PUBLISHED_ITEM_TAG = f"{{{PUBSUB_NS}}}item"
_SUBSCRIPTION_TAG = f"{{{PUBSUB_NS}}}subscription"
_RESULT_ITEMS_TAG = f"{{{PUBSUB_NS}}}items"


def quote_attr(value: str) -> str:
    """An attribute value for a single-quoted XML attribute."""
    if "&" in value:
        value = value.replace("&", "&amp;")
    if "<" in value:
        value = value.replace("<", "&lt;")
    if "'" in value:
        value = value.replace("'", "&apos;")
    return value


# --- outgoing ------------------------------------------------------------------------


def iq(iq_type: str, iq_id: str, to: str, body: str) -> str:
    return f"<iq type='{iq_type}' id='{quote_attr(iq_id)}' to='{quote_attr(to)}'>{body}</iq>"


def presence(to: str, available: bool = True) -> str:
    """Directed presence: the service releases a worker's items when it goes away."""
    kind = "" if available else " type='unavailable'"
    return f"<presence to='{quote_attr(to)}'{kind}/>"


def data_form(form_type: str, fields: Mapping[str, str]) -> str:
    """A XEP-0004 ``submit`` form with a FORM_TYPE and one value per field."""
    parts = [
        f"<x xmlns='{DATA_NS}' type='submit'><field var='FORM_TYPE' type='hidden'>"
        f"<value>{form_type}</value></field>"
    ]
    for var, value in fields.items():
        parts.append(f"<field var='{quote_attr(var)}'><value>{escape_text(value)}</value></field>")
    parts.append("</x>")
    return "".join(parts)


def shim_headers(headers: Mapping[str, str] | None) -> str:
    """XEP-0131 ``<headers/>`` with one ``<header name='k'>v</header>`` per pair
    ("" for none): an item's attributes, put after its payload."""
    if not headers:
        return ""
    inner = "".join(
        f"<header name='{quote_attr(name)}'>{escape_text(value)}</header>"
        for name, value in headers.items()
    )
    return f"<headers xmlns='{SHIM_NS}'>{inner}</headers>"


def _publish_item(
    payload: str | None, item_id: str | None, headers: Mapping[str, str] | None = None
) -> str:
    item_attr = "" if item_id is None else f" id='{quote_attr(item_id)}'"
    inner = (payload or "") + shim_headers(headers)
    return f"<item{item_attr}>{inner}</item>" if inner else f"<item{item_attr}/>"


def publish(
    node: str,
    payload: str | None,
    item_id: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> str:
    """§7.1.1; *payload* is one serialised XML element, inserted as is, followed by
    the item's attributes as SHIM *headers* (when there are any)."""
    return (
        f"<pubsub xmlns='{PUBSUB_NS}'><publish node='{quote_attr(node)}'>"
        f"{_publish_item(payload, item_id, headers)}</publish></pubsub>"
    )


PublishEntry = tuple[str | None, str | None] | tuple[str | None, str | None, Mapping[str, str]]
"""(payload, item id) or (payload, item id, headers)."""


def publish_items(node: str, items: Sequence[PublishEntry]) -> str:
    """XEP-0060 §13.11: several (payload, item id[, headers]) in one publish; the
    service stores all of them or none, and answers after the one commit that
    holds them."""
    parts = "".join(_publish_item(*entry) for entry in items)
    return (
        f"<pubsub xmlns='{PUBSUB_NS}'><publish node='{quote_attr(node)}'>{parts}</publish></pubsub>"
    )


def create_node(node: str, config: Mapping[str, str] | None = None) -> str:
    """§8.1.3 create-and-configure in one request (§8.1.2 without *config*)."""
    configure = ""
    if config:
        configure = f"<configure>{data_form(NODE_CONFIG_FORM, config)}</configure>"
    return f"<pubsub xmlns='{PUBSUB_NS}'><create node='{quote_attr(node)}'/>{configure}</pubsub>"


def set_affiliations(node: str, affiliations: Mapping[str, str]) -> str:
    """§8.9.2 modify affiliations (owner): bare JID -> member, publisher, none ..."""
    rows = "".join(
        f"<affiliation jid='{quote_attr(jid)}' affiliation='{quote_attr(aff)}'/>"
        for jid, aff in affiliations.items()
    )
    return (
        f"<pubsub xmlns='{PUBSUB_OWNER_NS}'>"
        f"<affiliations node='{quote_attr(node)}'>{rows}</affiliations></pubsub>"
    )


def subscribe(node: str, jid: str, options: Mapping[str, str] | None = None) -> str:
    """§6.3.7 subscribe-and-configure: XEP-0254 §2.1's second request, sent first."""
    n, j = quote_attr(node), quote_attr(jid)
    opts = ""
    if options:
        opts = (
            f"<options node='{n}' jid='{j}'>{data_form(SUBSCRIBE_OPTIONS_FORM, options)}</options>"
        )
    return f"<pubsub xmlns='{PUBSUB_NS}'><subscribe node='{n}' jid='{j}'/>{opts}</pubsub>"


def unsubscribe(node: str, jid: str, subid: str | None = None) -> str:
    sub = "" if subid is None else f" subid='{quote_attr(subid)}'"
    return (
        f"<pubsub xmlns='{PUBSUB_NS}'>"
        f"<unsubscribe node='{quote_attr(node)}' jid='{quote_attr(jid)}'{sub}/></pubsub>"
    )


def _items(item_ids: str | Sequence[str]) -> str:
    ids = (item_ids,) if isinstance(item_ids, str) else item_ids
    return "".join(f"<item id='{quote_attr(i)}'/>" for i in ids)


def retract(node: str, item_ids: str | Sequence[str]) -> str:
    """XEP-0254 §2.3: from the lock holder, the ack; several ids are XEP-0060
    §13.11's batch (all acked or none)."""
    return (
        f"<pubsub xmlns='{PUBSUB_NS}'><retract node='{quote_attr(node)}'>"
        f"{_items(item_ids)}</retract></pubsub>"
    )


def get_items(node: str, max_items: int | None = None) -> str:
    limit = "" if max_items is None else f" max_items='{int(max_items)}'"
    return f"<pubsub xmlns='{PUBSUB_NS}'><items node='{quote_attr(node)}'{limit}/></pubsub>"


# --- incoming ------------------------------------------------------------------------


def parse_error(stanza: ET.Element) -> StanzaError:
    """The RFC 6120 error of an IQ (or any stanza) with ``type='error'``."""
    error = stanza.find(_ERROR_TAG)
    if error is None:
        return StanzaError("undefined-condition", "error stanza without <error/>")
    condition, text, app = "undefined-condition", "", None
    for child in error:
        tag = child.tag
        if tag == _TEXT_TAG:
            text = child.text or ""
        elif tag.startswith(f"{{{STANZAS_NS}}}"):
            condition = tag[len(STANZAS_NS) + 2 :]
            if not text and (child.text or "").strip():  # a redirect's URI (RFC 6120)
                text = (child.text or "").strip()
        elif tag.startswith("{"):
            app = tag.partition("}")[2]
    return StanzaError(condition, text, error.get("type", "cancel"), app)


def published_item_id(result: ET.Element) -> str | None:
    """The item id in a publish result (§7.1.2), when the service sent one."""
    pubsub = result.find(_PUBSUB_TAG)
    if pubsub is None:
        return None
    item = pubsub.find(f"{_PUBLISH_TAG}/{_PUBLISHED_ITEM_TAG}")
    return None if item is None else item.get("id")


def published_item_ids(result: ET.Element) -> list[str]:
    """Every item id in a publish result, in request order (§13.11)."""
    pubsub = result.find(_PUBSUB_TAG)
    if pubsub is None:
        return []
    return [i.get("id", "") for i in pubsub.findall(f"{_PUBLISH_TAG}/{_PUBLISHED_ITEM_TAG}")]


@dataclass(frozen=True, slots=True)
class SubscriptionResult:
    subid: str | None
    state: str


def subscription_of(result: ET.Element) -> SubscriptionResult:
    """§6.1.2: the ``<subscription/>`` of a subscribe result (state ``subscribed``
    when the service answered with an empty result, as §6.1.2 allows)."""
    sub = result.find(f"{_PUBSUB_TAG}/{_SUBSCRIPTION_TAG}")
    if sub is None:
        return SubscriptionResult(None, "subscribed")
    return SubscriptionResult(sub.get("subid"), sub.get("subscription", "subscribed"))


def result_item_ids(result: ET.Element) -> list[str]:
    """The item ids of a §6.5 items result."""
    items = result.find(f"{_PUBSUB_TAG}/{_RESULT_ITEMS_TAG}")
    if items is None:
        return []
    return [i.get("id", "") for i in items.findall(f"{{{PUBSUB_NS}}}item")]


@dataclass(frozen=True, slots=True)
class ItemEvent(AttributeView):
    """An item handed to us (or read back); ``element`` is its payload (None
    without payload), ``headers`` its SHIM headers, ``attributes`` the
    publisher's among them."""

    node: str
    item_id: str
    element: ET.Element | None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RetractEvent:
    """The item is gone: on a queue node, the confirmation of our ack."""

    node: str
    item_id: str


@dataclass(frozen=True, slots=True)
class UnlockEvent:
    """XEP-0254 §2.4: the item is no longer ours (our nack, or the lock timed out)."""

    node: str
    item_id: str


Event = ItemEvent | RetractEvent | UnlockEvent


def parse_headers(message: ET.Element) -> dict[str, str]:
    """XEP-0131 SHIM headers of a message (e.g. a dead letter's origin)."""
    headers = message.find(_HEADERS_TAG)
    if headers is None:
        return {}
    return {h.get("name", ""): h.text or "" for h in headers.iter(_HEADER_TAG)}


def _item_parts(item: ET.Element) -> tuple[ET.Element | None, dict[str, str] | None]:
    """An event item's payload and, in a several-item notification, the item's own
    SHIM headers (the service puts them inside each item, after the payload)."""
    payload: ET.Element | None = None
    own: dict[str, str] | None = None
    for child in item:
        if child.tag == _HEADERS_TAG:
            own = {h.get("name", ""): h.text or "" for h in child.iter(_HEADER_TAG)}
        elif payload is None:
            payload = child
    return payload, own


def result_items(result: ET.Element) -> list[ItemEvent]:
    """The items of a §6.5 items result, each with its payload and its attributes
    (the SHIM ``<headers/>`` the service puts inside each ``<item/>``)."""
    items = result.find(f"{_PUBSUB_TAG}/{_RESULT_ITEMS_TAG}")
    if items is None:
        return []
    node = items.get("node", "")
    out = []
    for item in items.findall(f"{{{PUBSUB_NS}}}item"):
        payload, own = _item_parts(item)
        out.append(ItemEvent(node, item.get("id", ""), payload, own or {}))
    return out


def parse_event(message: ET.Element) -> list[Event]:
    """The item, retract and unlock notifications in one pubsub event message."""
    event = message.find(EVENT_TAG)
    if event is None:
        return []
    out: list[Event] = []
    headers: dict[str, str] | None = None
    for items in event.iter(_ITEMS_TAG):
        node = items.get("node", "")
        for child in items:
            tag = child.tag
            if tag == _ITEM_TAG:
                if headers is None:
                    headers = parse_headers(message)
                payload, own = _item_parts(child)
                merged = headers if own is None else {**headers, **own}
                out.append(ItemEvent(node, child.get("id", ""), payload, merged))
            elif tag == _RETRACT_TAG:
                out.append(RetractEvent(node, child.get("id", "")))
            elif tag in _UNLOCK_TAGS:
                out.append(UnlockEvent(node, child.get("id", "")))
    return out
