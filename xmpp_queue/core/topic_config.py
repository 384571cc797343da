"""Node configuration fields of topics with subscriptions (docs/queueing.md,
"Topics and subscriptions").

A queue names the topic it is bound to (``pubsub#queue_topic``, an ordinary
node's id; empty = not bound) and, optionally, a filter over attributes
(``pubsub#queue_filter``, Pub/Sub's syntax, ``topic_filter``). The filter is
parsed when it is set, so a bad one is refused at configuration with the
position of the error, never found at publish time.

``pubsub#queue_expire_after`` (seconds, 0 = off) deletes a bound queue that
has had no subscriber for that long (core/unused_queues.py), as Google
Pub/Sub expires an unused subscription: a binding nobody reads would
otherwise collect every topic item forever.
"""

from __future__ import annotations

from xmpp_queue.core.form_fields import ConfigField, int_parser
from xmpp_queue.core.topic_filter import compile_filter

QUEUE_TOPIC = "pubsub#queue_topic"
QUEUE_FILTER = "pubsub#queue_filter"
QUEUE_EXPIRE_AFTER = "pubsub#queue_expire_after"
MAX_EXPIRE_AFTER = 366 * 86400
MAX_TOPIC_ID = 1024


def parse_topic(raw: str) -> str:
    value = raw.strip()
    if len(value) > MAX_TOPIC_ID:
        raise ValueError(f"a node id of at most {MAX_TOPIC_ID} characters")
    return value


def parse_filter(raw: str) -> str:
    value = raw.strip()
    if value:
        # The owner's text as sent, so the position in the error is where they look.
        compile_filter(raw)  # raises FilterSyntaxError (a ValueError) with the position
    return value


TOPIC_FIELDS: tuple[ConfigField, ...] = (
    ConfigField(
        QUEUE_TOPIC,
        "queue_topic",
        "text-single",
        "Topic node whose every published item is copied into this queue (empty: none)",
        parse_topic,
        queue_only=True,
    ),
    ConfigField(
        QUEUE_FILTER,
        "queue_filter",
        "text-single",
        'Only topic items whose attributes match, e.g. attributes.region = "eu"',
        parse_filter,
        queue_only=True,
    ),
    ConfigField(
        QUEUE_EXPIRE_AFTER,
        "queue_expire_after",
        "text-single",
        "Seconds a bound queue may have no subscriber before it is deleted; 0: never",
        int_parser(0, MAX_EXPIRE_AFTER),
        datatype="xs:integer",
        queue_only=True,
    ),
)
