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

This module renders the occasional notices as stanzas (:func:`notification`)
and holds what every renderer shares (a stored payload as an element). The
per-item notices and answers are written as text by ``text_render.py``; the IQ
results of XEP-0060 are ``iq_results.py``'s.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from slixmpp import Message
from slixmpp.basexmpp import BaseXMPP

from xmpp_queue.core.effects import (
    AuthorizationRequest,
    ConfigNotice,
    DeleteNotice,
    Effect,
    PurgeNotice,
    SubscriptionNotice,
    TruncateNotice,
)
from xmpp_queue.xmpp import forms
from xmpp_queue.xmpp.stanzas import (
    PUBSUB_EVENT,
    QUEUE_EXT,
    SHIM,
    pubsub_feature,
)

log = logging.getLogger("xmpp_queue.xmpp.render")

NOTIFICATION_ID_PREFIX = "xq-"


# Disco features this module implements (XEP-0060 §8.8.4 / §12.6 subscription notices).
RENDERED_FEATURES = (pubsub_feature("subscription-notifications"),)


def sub_element(parent: ET.Element, ns: str, tag: str, /, **attrs: str | None) -> ET.Element:
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


def add_payload(item: ET.Element, payload: str | None) -> None:
    if payload is not None:
        element = payload_element(payload)
        if element is not None:
            item.append(element)


def _headers(msg: Message, headers: Sequence[tuple[str, str]]) -> None:
    """XEP-0131 SHIM headers, in one ``<headers/>`` element."""
    if not headers:
        return
    container = sub_element(msg.xml, SHIM, "headers")
    for name, value in headers:
        sub_element(container, SHIM, "header", name=name).text = value


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
    event = sub_element(msg.xml, PUBSUB_EVENT, "event")
    headers: list[tuple[str, str]] = []
    if isinstance(effect, TruncateNotice):
        items = sub_element(event, PUBSUB_EVENT, "items", node=effect.node)
        sub_element(
            items,
            QUEUE_EXT,
            "truncated",
            items=str(effect.items),
            bytes=str(effect.payload_bytes),
        )
        headers.append(("reason", "truncated"))
    elif isinstance(effect, PurgeNotice):
        sub_element(event, PUBSUB_EVENT, "purge", node=effect.node)
    elif isinstance(effect, DeleteNotice):
        delete = sub_element(event, PUBSUB_EVENT, "delete", node=effect.node)
        if effect.redirect:
            sub_element(delete, PUBSUB_EVENT, "redirect", uri=effect.redirect)
    elif isinstance(effect, ConfigNotice):
        config = sub_element(event, PUBSUB_EVENT, "configuration", node=effect.node)
        if effect.config is not None:
            config.append(forms.node_config_form(effect.config, "result"))
    elif isinstance(effect, SubscriptionNotice):
        sub_element(
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
