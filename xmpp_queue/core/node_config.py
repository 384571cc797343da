"""The node configuration and subscription option field tables.

One table per form, so the XEP-0004 forms (``xmpp/forms.py``), the admin
commands and the validation all derive from the same rows: a field is added
here once. Values arrive as XEP-0004 raw strings (``Mapping[var, Sequence[str]]``)
and leave as typed :class:`NodeConfig` values, or an error naming the field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xmpp_queue.core.errors import (
    InvalidNodeConfig,
    InvalidOptions,
    PreconditionNotMet,
    UnsupportedAccessModel,
)
from xmpp_queue.core.form_fields import (
    ConfigField,
    enum_parser,
    int_parser,
    parse_bool,
    parse_max_items,
    parse_text,
    render_value,
)
from xmpp_queue.core.message_config import MESSAGE_FIELDS
from xmpp_queue.core.model import (
    AccessModel,
    ItemReply,
    NodeConfig,
    NotificationType,
    PublishModel,
    SendLastPublished,
)
from xmpp_queue.core.ordering_config import ORDERING_FIELDS
from xmpp_queue.core.replay_config import REPLAY_FIELDS
from xmpp_queue.core.topic_config import TOPIC_FIELDS

__all__ = ["ConfigField", "parse_bool", "render_value"]

NODE_CONFIG_FORM = "http://jabber.org/protocol/pubsub#node_config"
SUBSCRIBE_OPTIONS_FORM = "http://jabber.org/protocol/pubsub#subscribe_options"
PUBLISH_OPTIONS_FORM = "http://jabber.org/protocol/pubsub#publish-options"
META_DATA_FORM = "http://jabber.org/protocol/pubsub#meta-data"

NODE_CONFIG_FIELDS: tuple[ConfigField, ...] = (
    ConfigField("pubsub#title", "title", "text-single", "A friendly name for the node", parse_text),
    ConfigField(
        "pubsub#description",
        "description",
        "text-single",
        "A description of the node",
        parse_text,
    ),
    ConfigField(
        "pubsub#type",
        "payload_type",
        "text-single",
        "Payload semantic type information (the payload's namespace)",
        parse_text,
    ),
    ConfigField(
        "pubsub#max_items",
        "max_items",
        "text-single",
        "Max # of items to persist (or max)",
        parse_max_items,
        datatype="pubsub:integer-or-max",
    ),
    ConfigField(
        "pubsub#persist_items", "persist_items", "boolean", "Persist items to storage", parse_bool
    ),
    ConfigField(
        "pubsub#deliver_payloads",
        "deliver_payloads",
        "boolean",
        "Deliver payloads with event notifications",
        parse_bool,
    ),
    ConfigField(
        "pubsub#notify_retract",
        "notify_retract",
        "boolean",
        "Notify subscribers when items are removed from the node",
        parse_bool,
    ),
    ConfigField(
        "pubsub#notify_delete",
        "notify_delete",
        "boolean",
        "Notify subscribers when the node is deleted",
        parse_bool,
    ),
    ConfigField(
        "pubsub#notify_config",
        "notify_config",
        "boolean",
        "Notify subscribers when the node configuration changes",
        parse_bool,
    ),
    ConfigField(
        "pubsub#access_model",
        "access_model",
        "list-single",
        "Specify the subscriber model",
        enum_parser(AccessModel),
        options=tuple(m.value for m in AccessModel),
    ),
    ConfigField(
        "pubsub#publish_model",
        "publish_model",
        "list-single",
        "Specify the publisher model",
        enum_parser(PublishModel),
        options=tuple(m.value for m in PublishModel),
    ),
    ConfigField(
        "pubsub#max_payload_size",
        "max_payload_size",
        "text-single",
        "Max payload size in bytes",
        int_parser(1),
        datatype="xs:integer",
    ),
    ConfigField(
        "pubsub#send_last_published_item",
        "send_last_published_item",
        "list-single",
        "When to send the last published item",
        enum_parser(SendLastPublished),
        options=tuple(m.value for m in SendLastPublished),
    ),
    ConfigField(
        "pubsub#notification_type",
        "notification_type",
        "list-single",
        "Specify the delivery style for notifications",
        enum_parser(NotificationType),
        options=tuple(m.value for m in NotificationType),
    ),
    ConfigField(
        "pubsub#itemreply",
        "itemreply",
        "list-single",
        "Whether items carry their publisher (publisher) or not (none)",
        enum_parser(ItemReply),
        options=tuple(m.value for m in ItemReply),
    ),
    ConfigField(
        "pubsub#queue",
        "queue",
        "boolean",
        "Queue mode (XEP-0254): each item goes to one subscriber",
        parse_bool,
    ),
    ConfigField(
        "pubsub#queue_lock_timeout",
        "queue_lock_timeout",
        "text-single",
        "Seconds a subscriber holds an item before it is given to another",
        int_parser(1, 86400 * 7),
        datatype="xs:integer",
        queue_only=True,
    ),
    ConfigField(
        "pubsub#queue_max_deliveries",
        "queue_max_deliveries",
        "text-single",
        "Deliveries before an item is dead-lettered (0 = no limit)",
        int_parser(0, 1_000_000),
        datatype="xs:integer",
        queue_only=True,
    ),
    ConfigField(
        "pubsub#queue_dead_letter",
        "queue_dead_letter",
        "text-single",
        "Node that receives dead-lettered items (empty = <node>/dead-letter)",
        parse_text,
        queue_only=True,
    ),
    ConfigField(
        "pubsub#queue_retry_delay",
        "queue_retry_delay",
        "text-single",
        "Seconds before an unlocked or expired item is offered again (doubles with each delivery)",
        int_parser(0, 86400),
        datatype="xs:integer",
        queue_only=True,
    ),
    ConfigField(
        "pubsub#queue_retry_delay_max",
        "queue_retry_delay_max",
        "text-single",
        "Upper bound of the growing retry delay, in seconds",
        int_parser(0, 86400 * 7),
        datatype="xs:integer",
        queue_only=True,
    ),
    *MESSAGE_FIELDS,
    *ORDERING_FIELDS,
    *TOPIC_FIELDS,
    *REPLAY_FIELDS,
)

_BY_VAR = {f.var: f for f in NODE_CONFIG_FIELDS}


def config_field(var: str) -> ConfigField | None:
    return _BY_VAR.get(var)


def config_values(config: NodeConfig) -> dict[str, str]:
    """The config as XEP-0004 strings, by field var (for forms and meta-data)."""
    return {f.var: render_value(getattr(config, f.attr)) for f in NODE_CONFIG_FIELDS}


def _parse_fields(values: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """Parse the known fields; an unknown ``pubsub#`` field or a bad value raises.

    XEP-0004 §3.1 says unknown fields are ignored, XEP-0060 §8.2.5.2 says a
    configuration the service cannot apply is not-acceptable. We reject unknown
    ``pubsub#`` fields (a typo in an owner's form must not pass silently) and
    ignore fields of other namespaces (FORM_TYPE and extensions).
    """
    changes: dict[str, Any] = {}
    for var, raw_values in values.items():
        if var == "FORM_TYPE":
            continue
        spec = _BY_VAR.get(var)
        if spec is None:
            if var.startswith("pubsub#"):
                raise InvalidNodeConfig(var, "unknown or unsupported configuration field")
            continue
        raw = raw_values[0] if raw_values else ""
        if len(raw_values) > 1:
            raise InvalidNodeConfig(var, "expected a single value")
        try:
            changes[spec.attr] = spec.parse(raw)
        except ValueError as exc:
            if spec.attr == "access_model":
                raise UnsupportedAccessModel(var, str(exc)) from None
            raise InvalidNodeConfig(var, str(exc)) from None
    return changes


def apply_config(base: NodeConfig, values: Mapping[str, Sequence[str]]) -> NodeConfig:
    """The config *base* with the submitted fields applied (XEP-0004 §3.5: omitted
    fields keep their current value), validated as a whole."""
    config = dataclasses.replace(base, **_parse_fields(values))
    validate_config(config)
    return config


def validate_config(config: NodeConfig) -> None:
    """Rules that span fields."""
    if config.queue and config.queue_retry_delay > config.queue_retry_delay_max > 0:
        raise InvalidNodeConfig(
            "pubsub#queue_retry_delay", "must not exceed pubsub#queue_retry_delay_max"
        )
    if config.queue and config.queue_delay > config.queue_max_delay:
        raise InvalidNodeConfig("pubsub#queue_delay", "must not exceed pubsub#queue_max_delay")


def check_preconditions(config: NodeConfig, values: Mapping[str, Sequence[str]]) -> None:
    """XEP-0060 §7.1.5: every publish-options field must match the node's config."""
    for var, raw_values in values.items():
        if var == "FORM_TYPE":
            continue
        spec = _BY_VAR.get(var)
        if spec is None:
            raise PreconditionNotMet(var, "unknown field")
        raw = raw_values[0] if raw_values else ""
        try:
            wanted = spec.parse(raw)
        except ValueError as exc:
            raise PreconditionNotMet(var, str(exc)) from None
        if wanted != getattr(config, spec.attr):
            raise PreconditionNotMet(var)


# --- subscription options ------------------------------------------------------------

QUEUE_REQUESTS = "pubsub#queue_requests"
QUEUE_MAX_BATCH = "pubsub#queue_max_batch"
DELIVER = "pubsub#deliver"
MAX_QUEUE_REQUESTS = 10_000
MAX_BATCH_ITEMS = 1_000
"""The most items one notification carries (``pubsub#queue_max_batch``) and one
retract, unlock or publish request may name: a bound on the work one stanza asks for."""


@dataclass(frozen=True, slots=True)
class SubscribeOptions:
    """Parsed subscribe_options: the queue window, whether to deliver at all, and
    how many items one notification may carry (``max_batch``, default 1: a plain
    XEP-0254 client sees exactly one item per message)."""

    queue_requests: int | None
    deliver: bool
    raw: Mapping[str, tuple[str, ...]]
    max_batch: int = 1


SUBSCRIBE_OPTION_FIELDS: tuple[ConfigField, ...] = (
    ConfigField(DELIVER, "deliver", "boolean", "Enable delivery?", parse_bool),
    ConfigField(
        QUEUE_REQUESTS,
        "queue_requests",
        "text-single",
        "Number of items processed in parallel (XEP-0254)",
        int_parser(1, MAX_QUEUE_REQUESTS),
        datatype="xs:integer",
        queue_only=True,
    ),
    ConfigField(
        QUEUE_MAX_BATCH,
        "max_batch",
        "text-single",
        "Most items sent in one notification (this service's extension; default 1)",
        int_parser(1, MAX_BATCH_ITEMS),
        datatype="xs:integer",
        queue_only=True,
    ),
)
_SUB_BY_VAR = {f.var: f for f in SUBSCRIBE_OPTION_FIELDS}

SERVICE_OPTION_PREFIX = "xmpp-queue#"
"""Subscription options under this prefix are the service's own, kept opaque (a push
subscription's endpoint, ``push/``): only the system actor may set them (the service
checks), no subscriber sees them (the options form shows the ``pubsub#`` fields)."""


def service_options(values: Mapping[str, Sequence[str]]) -> list[str]:
    """The service's own option names among *values* (see SERVICE_OPTION_PREFIX)."""
    return [var for var in values if var.startswith(SERVICE_OPTION_PREFIX)]


def parse_subscribe_options(
    values: Mapping[str, Sequence[str]], current: SubscribeOptions | None = None
) -> SubscribeOptions:
    """Parse a submitted subscribe_options form onto *current* (or the defaults).

    ``pubsub#queue_requests`` must be a positive integer (docs/queueing.md: anything else is
    invalid-options). Unknown ``pubsub#`` fields are rejected, as for node config.
    """
    queue_requests = current.queue_requests if current else None
    deliver = current.deliver if current else True
    max_batch = current.max_batch if current else 1
    raw: dict[str, tuple[str, ...]] = dict(current.raw) if current else {}
    for var, raw_values in values.items():
        if var == "FORM_TYPE":
            continue
        spec = _SUB_BY_VAR.get(var)
        if var.startswith(SERVICE_OPTION_PREFIX):
            raw[var] = tuple(raw_values)
            continue
        if spec is None:
            if var.startswith("pubsub#"):
                raise InvalidOptions(var, "unknown or unsupported subscription option")
            continue
        if len(raw_values) != 1:
            raise InvalidOptions(var, "expected exactly one value")
        try:
            parsed = spec.parse(raw_values[0])
        except ValueError as exc:
            raise InvalidOptions(var, str(exc)) from None
        if spec.attr == "queue_requests":
            queue_requests = parsed
        elif spec.attr == "max_batch":
            max_batch = parsed
        else:
            deliver = parsed
        raw[var] = (render_value(parsed),)
    return SubscribeOptions(
        queue_requests=queue_requests, deliver=deliver, raw=raw, max_batch=max_batch
    )


def max_batch_of(options: Mapping[str, Sequence[str]]) -> int:
    """A stored subscription's ``pubsub#queue_max_batch`` (1 when never set)."""
    raw = options.get(QUEUE_MAX_BATCH)
    return int(raw[0]) if raw else 1


def subscribe_option_values(options: SubscribeOptions, echo: bool = False) -> dict[str, str]:
    """The options as form values. In XEP-0254 §2.1's *echo*, the batch size only
    when the subscriber chose one: a plain client gets back what it sent."""
    values = {DELIVER: render_value(options.deliver)}
    if options.queue_requests is not None:
        values[QUEUE_REQUESTS] = str(options.queue_requests)
        if not echo or QUEUE_MAX_BATCH in options.raw:
            values[QUEUE_MAX_BATCH] = str(options.max_batch)
    return values
