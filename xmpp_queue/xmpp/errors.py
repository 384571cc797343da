"""THE map from domain errors to XMPP errors, and the error replies built from it.

Only this module knows stanza conditions and the pubsub#errors namespace
(one error vocabulary, one map). Each row follows XEP-0060's "Error
Cases" tables and, for queues, the XEP-0254
order: no such item -> item-not-found; not a subscriber -> forbidden; locked by
another -> conflict; no longer the holder -> unexpected-request (type wait).

Choices where the specs leave room:

- ``InvalidOptions`` answers a subscribe with not-acceptable (docs/queueing.md, in line with
  XEP-0254's configuration flow) and an options submission with bad-request
  (XEP-0060 §6.3.6.2); both carry ``<invalid-options/>``.
- ``NotSubscribed`` is type cancel for unsubscribe (§6.2.3.2) and modify for
  options (§6.3.4.2); the core says which in ``exc.modify``.
- ``NotAQueue`` (unlock/extend on an ordinary node) is bad-request: the service
  does implement queueing, so feature-not-implemented would mislead, and the
  ``<unsupported feature=''/>`` attribute may only name XEP-0060 features.
- ``ServiceAccessDenied`` (a requester outside ``[access] users``) is forbidden
  for every pubsub request and service-unavailable for disco#info/#items: a
  stranger learns neither which nodes nor which features live here.
- ``NodeQuotaExceeded`` is not-allowed, type cancel: a quota, retrying will
  not help (RFC 6120's policy-violation fits too, but slixmpp cannot render it).
  ``PublishRateExceeded`` is resource-constraint, type wait: retry later; the
  text says when.
- ``QueueConfigurationRequired`` needs more than an ``<error/>``: XEP-0254 §2.1's
  reply carries the subscribe request and the options form to fill in, so this
  module builds whole replies rather than raising slixmpp's ``XMPPError``.

Anything not in the table (a bug, a driver error that escaped storage) becomes
internal-server-error, type wait, with a neutral text and one logged traceback;
never slixmpp's default "Slixmpp got into trouble" reply. Refusals of a client's
request are counted by condition and logged as key=value INFO lines without a
stack trace, at most one per JID a minute (``refusals.py``).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any, cast

from slixmpp import Iq
from slixmpp.exceptions import XMPPError

from xmpp_queue.core.errors import (
    AttributeRefused,
    AttributeTooBig,
    BadRequest,
    ClosedNode,
    DelayTooLong,
    FeatureNotImplemented,
    Forbidden,
    InvalidJid,
    InvalidNodeConfig,
    InvalidOptions,
    InvalidPayload,
    InvalidSubId,
    ItemForbidden,
    ItemLockedByOther,
    ItemNotFound,
    ItemRequired,
    JidRequired,
    NodeExists,
    NodeFull,
    NodeIdRequired,
    NodeNotFound,
    NotAQueue,
    NotLockHolder,
    NotSubscribed,
    Outcast,
    PageNotFound,
    PayloadRequired,
    PayloadTooBig,
    PendingSubscription,
    PreconditionNotMet,
    PubSubError,
    QueueConfigurationRequired,
    SnapshotNotFound,
    StorageUnavailable,
    SubIdRequired,
    SubscriptionRequired,
    UnsupportedAccessModel,
)
from xmpp_queue.core.limits import NodeQuotaExceeded, PublishRateExceeded
from xmpp_queue.core.service_access import ServiceAccessDenied
from xmpp_queue.xmpp import forms
from xmpp_queue.xmpp.refusals import REFUSALS
from xmpp_queue.xmpp.stanzas import PUBSUB, PUBSUB_ERRORS

log = logging.getLogger("xmpp_queue.xmpp.errors")

INTERNAL_ERROR_TEXT = "The service could not handle this request; try again later."


class UnknownRequest(PubSubError):
    """The ``<pubsub/>`` element holds no request this service knows."""


class AnswerTooBig(PubSubError):
    """The answer would be larger than ``[component] max_stanza_size`` (``wire_size``):
    not-acceptable, cancel; the text says to ask for less."""


@dataclass(frozen=True, slots=True)
class ErrorRow:
    """How one domain error is told to the client."""

    type: str  # cancel, modify, auth, wait
    condition: str  # RFC 6120 stanza error condition
    pubsub: str | None = None  # child in http://jabber.org/protocol/pubsub#errors
    feature: str | None = None  # for pubsub="unsupported": the feature attribute


ERROR_TABLE: dict[type[PubSubError], ErrorRow] = {
    # request shape
    BadRequest: ErrorRow("modify", "bad-request"),
    NodeIdRequired: ErrorRow("modify", "bad-request", "nodeid-required"),  # §7.2.3.3, §8.2.3.3
    ItemRequired: ErrorRow("modify", "bad-request", "item-required"),  # §7.1.3.6, §7.2.3.4
    JidRequired: ErrorRow("modify", "bad-request", "jid-required"),  # §6.3.4.3
    InvalidJid: ErrorRow("modify", "bad-request", "invalid-jid"),  # §6.1.3.1
    InvalidPayload: ErrorRow("modify", "bad-request", "invalid-payload"),  # §7.1.3.6
    PayloadRequired: ErrorRow("modify", "bad-request", "payload-required"),  # §7.1.3.6
    ItemForbidden: ErrorRow("modify", "bad-request", "item-forbidden"),  # §7.1.3.6
    PayloadTooBig: ErrorRow("modify", "not-acceptable", "payload-too-big"),  # §7.1.3.5
    # Item attributes (XEP-0131 headers in the item): a bad one is a bad payload, one
    # past a size limit is too big, a start past the node's bound is not acceptable.
    AttributeRefused: ErrorRow("modify", "bad-request", "invalid-payload"),
    AttributeTooBig: ErrorRow("modify", "not-acceptable", "payload-too-big"),
    DelayTooLong: ErrorRow("modify", "not-acceptable"),
    FeatureNotImplemented: ErrorRow("cancel", "feature-not-implemented", "unsupported"),
    UnknownRequest: ErrorRow("cancel", "feature-not-implemented"),
    AnswerTooBig: ErrorRow("cancel", "not-acceptable"),
    # nodes
    NodeNotFound: ErrorRow("cancel", "item-not-found"),  # §6.1.3.12 and every "no node"
    NodeExists: ErrorRow("cancel", "conflict"),  # §8.1.3
    InvalidNodeConfig: ErrorRow("modify", "not-acceptable"),  # §8.2.5.2
    UnsupportedAccessModel: ErrorRow(  # §8.1.3
        "modify", "not-acceptable", "unsupported-access-model"
    ),
    PreconditionNotMet: ErrorRow("cancel", "conflict", "precondition-not-met"),  # §7.1.5
    # §7.1.3.x "Node is full": conflict + node-full (a queue is publish_node_full
    # "reject"); not-allowed + max-items-exceeded is for §13.11 batch publishes.
    NodeFull: ErrorRow("cancel", "conflict", "node-full"),
    # access
    ServiceAccessDenied: ErrorRow("auth", "forbidden"),  # [access] users; disco: BY_VERB
    Forbidden: ErrorRow("auth", "forbidden"),  # §7.1.3.1, §8.x, XEP-0254 §2.3
    Outcast: ErrorRow("auth", "forbidden"),  # §6.1.3.8
    ClosedNode: ErrorRow("cancel", "not-allowed", "closed-node"),  # §6.1.3.4
    PendingSubscription: ErrorRow("auth", "not-authorized", "pending-subscription"),  # §6.1.3.7
    SubscriptionRequired: ErrorRow("auth", "not-authorized", "not-subscribed"),  # §6.5.9.3
    # subscriptions
    NotSubscribed: ErrorRow("cancel", "unexpected-request", "not-subscribed"),  # §6.2.3.2
    SubIdRequired: ErrorRow("modify", "bad-request", "subid-required"),  # §6.2.3.1
    InvalidSubId: ErrorRow("modify", "not-acceptable", "invalid-subid"),  # §6.2.3.5
    InvalidOptions: ErrorRow("modify", "bad-request", "invalid-options"),  # §6.3.6.2
    QueueConfigurationRequired: ErrorRow(  # XEP-0254 §2.1 / XEP-0060 §6.1.5
        "modify", "not-acceptable", "configuration-required"
    ),
    # items and locks
    ItemNotFound: ErrorRow("cancel", "item-not-found"),  # §7.2.3, XEP-0254 §2.3/§2.4
    SnapshotNotFound: ErrorRow("cancel", "item-not-found"),
    PageNotFound: ErrorRow("cancel", "item-not-found"),  # XEP-0059 §2.4
    NotAQueue: ErrorRow("modify", "bad-request"),  # see the module docstring
    ItemLockedByOther: ErrorRow("cancel", "conflict"),  # XEP-0254 §2.3/§2.4
    NotLockHolder: ErrorRow("wait", "unexpected-request"),  # XEP-0254 §2.3/§2.4
    # limits per JID ([limits])
    NodeQuotaExceeded: ErrorRow("cancel", "not-allowed"),  # RFC 6120 §8.3.3.10
    PublishRateExceeded: ErrorRow("wait", "resource-constraint"),  # RFC 6120 §8.3.3.18
    # the service itself
    StorageUnavailable: ErrorRow("wait", "internal-server-error"),
}

# The same domain error answered differently depending on the request.
BY_VERB: dict[tuple[type[PubSubError], str], ErrorRow] = {
    (InvalidOptions, "subscribe"): ErrorRow("modify", "not-acceptable", "invalid-options"),
    # A stranger's disco is answered as if nothing lived here (RFC 6120 §8.3.3.19).
    (ServiceAccessDenied, "disco#info"): ErrorRow("cancel", "service-unavailable"),
    (ServiceAccessDenied, "disco#items"): ErrorRow("cancel", "service-unavailable"),
}


def row_for(exc: BaseException, verb: str = "") -> ErrorRow | None:
    """The row for *exc* (its class or nearest mapped ancestor); None if unmapped."""
    if not isinstance(exc, PubSubError):
        return None
    for cls in type(exc).__mro__:
        row = BY_VERB.get((cls, verb)) or ERROR_TABLE.get(cls)
        if row is not None:
            break
    else:
        return None
    if isinstance(exc, NotSubscribed) and exc.modify:
        row = dataclasses.replace(row, type="modify")
    if isinstance(exc, FeatureNotImplemented):
        row = dataclasses.replace(row, feature=exc.feature)
    return row


def reply_for_exception(iq: Iq, exc: BaseException, verb: str = "") -> Iq:
    """The error reply to *iq* for *exc*, logged as the module docstring says."""
    row = row_for(exc, verb)
    if row is None:
        log.error(
            "event=request_failed verb=%s from=%s id=%s error=%s",
            verb or "-",
            iq["from"],
            iq["id"],
            type(exc).__name__,
            exc_info=exc,
        )
        return internal_error_reply(iq)
    sender = str(iq["from"])
    REFUSALS.note(
        sender,
        "event=request_refused verb=%s from=%s id=%s error=%s condition=%s text=%r",
        verb or "-",
        sender,
        iq["id"],
        type(exc).__name__,
        row.pubsub or row.condition,
        str(exc),
        condition=row.condition,
    )
    if isinstance(exc, QueueConfigurationRequired):
        return configuration_required_reply(iq, exc, row)
    reply = _echo(iq)
    add_error(reply, row, str(exc))
    return reply


def internal_error_reply(iq: Iq) -> Iq:
    reply = _echo(iq)
    add_error(reply, ErrorRow("wait", "internal-server-error"), INTERNAL_ERROR_TEXT)
    return reply


def add_error(reply: Iq, row: ErrorRow, text: str = "") -> None:
    """Turn *reply* into an error of *row*: condition, optional text, pubsub#errors child."""
    reply["type"] = "error"
    error = reply["error"]
    error["type"] = row.type
    error["condition"] = row.condition
    if text:
        error["text"] = text
    if row.pubsub:
        attrs = {"feature": row.feature} if row.feature else {}
        ET.SubElement(error.xml, f"{{{PUBSUB_ERRORS}}}{row.pubsub}", attrs)


def configuration_required_reply(iq: Iq, exc: QueueConfigurationRequired, row: ErrorRow) -> Iq:
    """XEP-0254 §2.1, first example: the subscribe request, the options form with the
    required fields, and not-acceptable + configuration-required."""
    reply = iq.reply()
    pubsub = ET.SubElement(reply.xml, f"{{{PUBSUB}}}pubsub")
    attrs = {"jid": exc.jid, "node": exc.node}
    request = iq.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}subscribe")
    if request is not None:  # an options submission gets the form alone
        attrs = dict(request.attrib)
        ET.SubElement(pubsub, f"{{{PUBSUB}}}subscribe", attrs)
    options = ET.SubElement(pubsub, f"{{{PUBSUB}}}options", attrs)
    options.append(forms.required_options_form(exc.fields))
    add_error(reply, row)
    return reply


def as_xmpp_error(exc: BaseException, verb: str = "", sender: str = "-") -> XMPPError:
    """For paths that answer through slixmpp's own error handling (disco, commands):
    the same table, as an ``XMPPError`` (no payload-carrying replies there). The
    refusal is noted for *sender* (its own budget of lines, as the other paths')."""
    row = row_for(exc, verb)
    if row is None:
        log.error(
            "event=request_failed verb=%s error=%s", verb or "-", type(exc).__name__, exc_info=exc
        )
        return XMPPError("internal-server-error", INTERNAL_ERROR_TEXT, "wait")
    REFUSALS.note(
        sender,
        "event=request_refused verb=%s from=%s error=%s condition=%s",
        verb or "-",
        sender,
        type(exc).__name__,
        row.pubsub or row.condition,
        condition=row.condition,
    )
    return XMPPError(
        cast(Any, row.condition),
        str(exc),
        cast(Any, row.type),
        extension=row.pubsub,
        extension_ns=PUBSUB_ERRORS if row.pubsub else None,
        extension_args={"feature": row.feature} if row.feature else None,
    )


def _echo(iq: Iq) -> Iq:
    """A reply carrying the request's payload (RFC 6120 §8.3.1 allows it, XEP-0254's
    examples do it) without published payloads, which can be large."""
    reply = iq.reply()
    for child in iq.xml:
        reply.xml.append(copy.deepcopy(child))
    for publish in reply.xml.iter(f"{{{PUBSUB}}}publish"):
        for item in publish:
            for payload in list(item):
                item.remove(payload)
    return reply
