"""Node configuration field of retention (docs/queueing.md, "Retention, seek and
snapshots").

``pubsub#queue_retain_acked`` keeps an acked item for that many seconds, so the
queue's owner can seek back and have it handed out again (Google Pub/Sub's
``retain_acked_messages`` with ``message_retention_duration``). 0, the
default, deletes an item at its ack, as before. The cap (31 days) is Pub/Sub's.
"""

from __future__ import annotations

from xmpp_queue.core.form_fields import ConfigField, int_parser

QUEUE_RETAIN_ACKED = "pubsub#queue_retain_acked"
MAX_RETAIN = 31 * 86400

REPLAY_FIELDS: tuple[ConfigField, ...] = (
    ConfigField(
        QUEUE_RETAIN_ACKED,
        "queue_retain_acked",
        "text-single",
        "Seconds an acked item is kept (payload on disk) so a seek can replay it; 0: off",
        int_parser(0, MAX_RETAIN),
        datatype="xs:integer",
        queue_only=True,
    ),
)
