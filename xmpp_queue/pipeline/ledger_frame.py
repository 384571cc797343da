"""The ledger as a Spark DataFrame: one schema, whatever the source.

Why: the same analytics run on rows read over JDBC (PostgreSQL gives real
timestamps, SQLite gives the text SQLAlchemy stored), on exported Parquet (with
its ``date`` partition column) and on synthetic data. ``conform_ledger`` turns
each into the same typed frame, so the transforms downstream never ask where the
rows came from. Names come from ``xmpp_queue.ledger_names`` and kinds from
``xmpp_queue.core.ledger``: nothing here re-types them.

The detail columns (``attributes``, ``reason``: revision 0006) are optional on
input: archives exported and databases last migrated before them lack them,
and their rows get NULL, as rows the service wrote without details do.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    IntegerType,
    LongType,
    NumericType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from xmpp_queue.core.ledger import EventKind
from xmpp_queue.ledger_names import (
    AT,
    ATTRIBUTES,
    COLUMNS,
    DELIVERIES,
    DETAIL_COLUMNS,
    ID,
    ITEM_ID,
    KIND,
    NODE,
    PAYLOAD_SIZE,
    REASON,
    SUBSCRIBER,
)

LEDGER_SCHEMA = StructType(
    [
        StructField(ID, LongType(), False),
        StructField(AT, TimestampType(), False),
        StructField(KIND, StringType(), False),
        StructField(NODE, StringType(), False),
        StructField(ITEM_ID, StringType(), False),
        StructField(SUBSCRIBER, StringType(), True),
        StructField(DELIVERIES, IntegerType(), False),
        StructField(PAYLOAD_SIZE, LongType(), False),
        StructField(ATTRIBUTES, StringType(), True),
        StructField(REASON, StringType(), True),
    ]
)

KINDS: tuple[str, ...] = tuple(kind.value for kind in EventKind)
REMOVING_KINDS: tuple[str, ...] = (
    EventKind.ACKED.value,
    EventKind.DEAD_LETTERED.value,
    EventKind.RETRACTED.value,
    EventKind.PURGED.value,
    EventKind.DROPPED.value,  # expired or truncated on a node that drops
)
"""Kinds after which the item is no longer in its node: they end a lifecycle and
lower the backlog. Unlock, expiry and extension leave the item queued."""


def parse_utc_timestamp(column: Column) -> Column:
    """A stored time as a Spark timestamp, read as UTC.

    Text (SQLite via SQLAlchemy: ``2024-01-02 03:04:05.123456``, or ISO 8601 with
    ``T``/offset) is cast under the session time zone, which the pipeline's
    session pins to UTC; numbers are taken as Unix seconds.
    """
    return F.to_timestamp(column)


def conform_ledger(frame: DataFrame) -> DataFrame:
    """Select the ledger columns in order with the pipeline's types (pure); a
    missing detail column (an older source) is NULL on every row."""
    types = {f.name: f.dataType for f in frame.schema.fields}
    missing = [name for name in COLUMNS if name not in types]
    if missing:
        raise ValueError(f"ledger rows lack column(s): {', '.join(missing)}")
    at = F.col(AT)
    if isinstance(types[AT], StringType):
        at = parse_utc_timestamp(at)
    elif isinstance(types[AT], NumericType):
        at = F.timestamp_seconds(at)
    return frame.select(
        F.col(ID).cast(LongType()).alias(ID),
        at.cast(TimestampType()).alias(AT),
        F.col(KIND).cast(StringType()).alias(KIND),
        F.col(NODE).cast(StringType()).alias(NODE),
        F.col(ITEM_ID).cast(StringType()).alias(ITEM_ID),
        F.col(SUBSCRIBER).cast(StringType()).alias(SUBSCRIBER),
        F.coalesce(F.col(DELIVERIES).cast(IntegerType()), F.lit(0)).alias(DELIVERIES),
        F.coalesce(F.col(PAYLOAD_SIZE).cast(LongType()), F.lit(0)).alias(PAYLOAD_SIZE),
        *[
            (F.col(name) if name in types else F.lit(None)).cast(StringType()).alias(name)
            for name in DETAIL_COLUMNS
        ],
    )


def as_utc(moment: datetime) -> datetime:
    """An aware UTC datetime; a naive one is taken as UTC (never as local time,
    which is what PySpark would assume when turning it into a literal)."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def in_time_range(
    frame: DataFrame, since: datetime | None = None, until: datetime | None = None
) -> DataFrame:
    """Rows with ``since <= at < until`` (either bound may be None)."""
    if since is not None:
        frame = frame.where(F.col(AT) >= F.lit(as_utc(since)))
    if until is not None:
        frame = frame.where(F.col(AT) < F.lit(as_utc(until)))
    return frame
