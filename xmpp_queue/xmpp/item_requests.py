"""The per-item requests: publish and retract (XEP-0060 §7), XEP-0254's unlock
and our extend, batch unlock and dead-letter.

Apart from the other families because they are the hot path: sent once or more
for every work item, read from the element alone (no slixmpp stanza object).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field

from xmpp_queue.core.errors import (
    BadRequest,
    ItemRequired,
)
from xmpp_queue.core.model import NewItem
from xmpp_queue.core.node_config import PUBLISH_OPTIONS_FORM
from xmpp_queue.xmpp.forms import FormValues, find_form, read_form
from xmpp_queue.xmpp.payloads import item_content
from xmpp_queue.xmpp.requests import (
    child,
    integer,
    node_of,
    one_item_id,
    some_item_ids,
)
from xmpp_queue.xmpp.stanzas import PUBSUB


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


def parse_publish(pubsub: ET.Element, el: ET.Element) -> PublishRequest:
    node = node_of(el)
    items = el.findall(f"{{{PUBSUB}}}item")
    if not items:
        raise ItemRequired()
    parsed = tuple(NewItem(item.get("id"), *item_content(item)) for item in items)
    options_el = child(pubsub, PUBSUB, "publish-options")
    options = None
    x = find_form(options_el)
    if x is not None:
        form = read_form(x)
        if form.form_type not in (None, PUBLISH_OPTIONS_FORM):
            raise BadRequest("publish-options must be a pubsub#publish-options form")
        options = form.values
    return PublishRequest(node, parsed, options)


def parse_retract(pubsub: ET.Element, el: ET.Element) -> RetractRequest:
    node = node_of(el)
    notify_raw = el.get("notify")
    notify = None
    if notify_raw in ("1", "true"):
        notify = True
    elif notify_raw in ("0", "false"):
        notify = False
    elif notify_raw is not None:
        raise BadRequest("notify must be a boolean")
    return RetractRequest(node, some_item_ids(el, PUBSUB), notify)


def parse_lock(pubsub: ET.Element, el: ET.Element) -> LockRequest:
    """XEP-0254 unlock, or our extend / unlock / dead-letter: the same shape, in
    their own namespaces (``seconds``, ``delay`` and ``reason`` attributes)."""
    ns = el.tag[1:].split("}")[0]
    seconds = integer(el.get("seconds"), "seconds", minimum=1)
    delay = integer(el.get("delay"), "delay", minimum=0)
    reason = el.get("reason", "")
    item_id = one_item_id(el, ns)
    return LockRequest(node_of(el), item_id, seconds, delay, reason, (item_id,))


def parse_batch_unlock(pubsub: ET.Element, el: ET.Element) -> LockRequest:
    """Our ``<unlock xmlns='urn:xmpp-queue:0'>``: one or more items (a batch nack,
    all or none), optionally not offered again for ``delay`` seconds, optionally
    saying why (``reason`` on ``<unlock/>`` for every item, on an ``<item/>`` for
    that one; the service bounds its length)."""
    ns = el.tag[1:].split("}")[0]
    delay = integer(el.get("delay"), "delay", minimum=0)
    ids = some_item_ids(el, ns)
    default = el.get("reason", "")
    reasons = {}
    for item in el.findall(f"{{{ns}}}item"):
        text = item.get("reason", default)
        if text:
            reasons[item.get("id") or ""] = text
    return LockRequest(node_of(el), ids[0], None, delay, default, ids, reasons)
