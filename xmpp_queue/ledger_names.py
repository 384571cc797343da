"""Table and column names of the event ledger, in one place.

Imported by ``storage/schema.py`` (which creates the table) and by the Spark
``pipeline`` (which reads it over JDBC or from exported Parquet), so the two
can never disagree. Imports nothing.
"""

TABLE = "queue_events"

ID = "id"
AT = "at"  # UTC timestamp of the change
KIND = "kind"  # one of xmpp_queue.core.ledger.EventKind values
NODE = "node"
ITEM_ID = "item_id"
SUBSCRIBER = "subscriber"  # lock holder's JID, NULL when none is involved
DELIVERIES = "deliveries"  # the item's delivery count after the change
PAYLOAD_SIZE = "payload_size"  # bytes of the canonical payload
ATTRIBUTES = "attributes"  # published rows: the publisher's attributes, JSON object; else NULL
REASON = "reason"  # unlocked/expired/dead_lettered/dropped rows: why; else NULL

COLUMNS = (ID, AT, KIND, NODE, ITEM_ID, SUBSCRIBER, DELIVERIES, PAYLOAD_SIZE)
"""The columns every ledger has had (revision 0002)."""
DETAIL_COLUMNS = (ATTRIBUTES, REASON)
"""Added by revision 0006 (nullable): absent from older databases and archives,
which readers take as NULL."""
ALL_COLUMNS = COLUMNS + DETAIL_COLUMNS

KINDS = (
    "published",
    "delivered",
    "acked",
    "unlocked",
    "expired",
    "dead_lettered",
    "retracted",
    "purged",
    "extended",
)
