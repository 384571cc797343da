"""Node configuration fields of ordered work: ordering keys and a single active
consumer (docs/queueing.md, "Ordering keys" and "Single active consumer").

Both use our ``pubsub#queue_*`` names, as the other queue fields do, and only
mean something on a queue. ``pubsub#queue_ordered`` may change only while the
queue holds no items (Google Pub/Sub fixes message ordering when a subscription
is created; SQS a FIFO queue when the queue is created): the store's per-key
index is built as items arrive, and a node whose items were indexed one way
must not be read the other way.
"""

from __future__ import annotations

from xmpp_queue.core.errors import InvalidNodeConfig
from xmpp_queue.core.form_fields import ConfigField, parse_bool
from xmpp_queue.core.model import NodeConfig

QUEUE_ORDERED = "pubsub#queue_ordered"
QUEUE_SINGLE_ACTIVE = "pubsub#queue_single_active"

ORDERING_FIELDS: tuple[ConfigField, ...] = (
    ConfigField(
        QUEUE_ORDERED,
        "queue_ordered",
        "boolean",
        "Items with the same ordering-key are handed out one at a time, in publish order",
        parse_bool,
        queue_only=True,
    ),
    ConfigField(
        QUEUE_SINGLE_ACTIVE,
        "queue_single_active",
        "boolean",
        "Only the earliest subscriber receives items; the next one takes over when it leaves",
        parse_bool,
        queue_only=True,
    ),
)


def is_ordered(config: NodeConfig) -> bool:
    """Whether items of one ordering key wait for each other on this node."""
    return config.queue and config.queue_ordered


def check_ordering_change(config: NodeConfig, before: NodeConfig, items: int) -> None:
    """Refuse turning ordering on or off while the node holds items."""
    if is_ordered(config) != is_ordered(before) and items:
        raise InvalidNodeConfig(
            QUEUE_ORDERED, "ordering can change only while the queue is empty; purge or drain it"
        )
