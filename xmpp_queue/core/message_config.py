"""Node configuration fields of the message model: attribute limits, delay,
expiry, priority ageing and the dedup window (docs/queueing.md explains each).

``pubsub#item_expire`` is XEP-0060's registered field; the others use our
``pubsub#attribute*`` and ``pubsub#queue_*`` names, as the queue fields do.
Attribute limits and expiry apply to every node; the attribute bounds keep an
item's headers (16 KiB of names and values, 256 headers) inside the room the
stanza-size limit keeps beside the largest payload; delay, priority and dedup only
mean something on a queue.
"""

from __future__ import annotations

from xmpp_queue.core.form_fields import ConfigField, choice_parser, int_parser, parse_max_items

EXPIRE_ACTIONS = ("dead-letter", "drop")
OVERFLOW_POLICIES = ("refuse", "drop-oldest")

_DAY = 86400

MESSAGE_FIELDS: tuple[ConfigField, ...] = (
    ConfigField(
        "pubsub#attributes_max",
        "attributes_max",
        "text-single",
        "Max number of attributes (XEP-0131 headers) per item",
        int_parser(0, 256),
        datatype="xs:integer",
    ),
    ConfigField(
        "pubsub#attribute_name_max",
        "attribute_name_max",
        "text-single",
        "Max bytes of an attribute name",
        int_parser(1, 1024),
        datatype="xs:integer",
    ),
    ConfigField(
        "pubsub#attribute_value_max",
        "attribute_value_max",
        "text-single",
        "Max bytes of an attribute value",
        int_parser(1, 16384),
        datatype="xs:integer",
    ),
    ConfigField(
        "pubsub#attributes_max_bytes",
        "attributes_max_bytes",
        "text-single",
        "Max bytes of all attribute names and values of an item",
        int_parser(0, 16384),
        datatype="xs:integer",
    ),
    ConfigField(
        "pubsub#item_expire",
        "item_expire",
        "text-single",
        "Number of seconds after which to automatically purge items (0 = never)",
        int_parser(0, 366 * _DAY),
        datatype="xs:integer",
    ),
    ConfigField(
        "pubsub#queue_expire_action",
        "queue_expire_action",
        "list-single",
        "What happens to an item that expires while it waits",
        choice_parser(EXPIRE_ACTIONS),
        options=EXPIRE_ACTIONS,
        queue_only=True,
    ),
    ConfigField(
        "pubsub#queue_delay",
        "queue_delay",
        "text-single",
        "Seconds every item waits before it is offered (unless it carries a Start)",
        int_parser(0, 366 * _DAY),
        datatype="xs:integer",
        queue_only=True,
    ),
    ConfigField(
        "pubsub#queue_max_delay",
        "queue_max_delay",
        "text-single",
        "Longest delay a publisher may ask for, in seconds",
        int_parser(0, 366 * _DAY),
        datatype="xs:integer",
        queue_only=True,
    ),
    ConfigField(
        "pubsub#queue_priority_age",
        "queue_priority_age",
        "text-single",
        "Seconds after which a waiting item counts as urgent as the most urgent (0 = never)",
        int_parser(0, 7 * _DAY),
        datatype="xs:integer",
        queue_only=True,
    ),
    ConfigField(
        "pubsub#queue_dedup_window",
        "queue_dedup_window",
        "text-single",
        "Seconds an acked or retracted item id is remembered: a repeat publish stores nothing",
        int_parser(0, 7 * _DAY),
        datatype="xs:integer",
        queue_only=True,
    ),
    ConfigField(
        "pubsub#max_bytes",
        "max_bytes",
        "text-single",
        "Max payload bytes the node holds (or max)",
        parse_max_items,
        datatype="pubsub:integer-or-max",
    ),
    ConfigField(
        "pubsub#queue_overflow",
        "queue_overflow",
        "list-single",
        "Past max_items or max_bytes: refuse the new item, or drop the oldest waiting ones",
        choice_parser(OVERFLOW_POLICIES),
        options=OVERFLOW_POLICIES,
        queue_only=True,
    ),
)
