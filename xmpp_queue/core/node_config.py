"""The node configuration and subscription option field tables.

One table per form, so the XEP-0004 forms (``xmpp/forms.py``), the admin
commands and the validation all derive from the same rows: a field is added
here once. Values arrive as XEP-0004 raw strings (``Mapping[var, Sequence[str]]``)
and leave as typed :class:`NodeConfig` values, or an error naming the field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from xmpp_queue.core.errors import (
    InvalidNodeConfig,
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
