"""Queue-history analytics: pure DataFrame -> DataFrame functions over the ledger.

Why pure: each aggregate is tested against a plain-Python computation over the
same rows, and the jobs in ``report.py`` only wire sources to sinks. Nothing here
decides queue behaviour; it reads what the service recorded (docs/architecture.md: "the
pipeline never re-implements queue rules"). The input is a frame shaped by
``ledger_frame.conform_ledger``.

Vocabulary:
- a *lifecycle* is one stay of an item in its node: it starts with the first
  event of the item and ends with the event that removed it (acked,
  dead-lettered, retracted, purged). An item id published again after that
  starts a new lifecycle, so ids reused over time do not mix.
- *wait* = published -> first delivery; *handling* = last delivery -> ack (the
  delivery that the ack answers, since the ack ends the lifecycle);
  *end-to-end* = published -> ack. All in seconds.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from xmpp_queue.core.ledger import EventKind
from xmpp_queue.ledger_names import (
    AT,
    DELIVERIES,
    ID,
    ITEM_ID,
    KIND,
    NODE,
    REASON,
    SUBSCRIBER,
)
from xmpp_queue.pipeline.ledger_frame import KINDS, REMOVING_KINDS

NOT_AN_ITEM_KINDS = (
    EventKind.DEDUPLICATED.value,
    EventKind.FILTERED.value,
    EventKind.REPLAYED.value,
    EventKind.RETENTION_ENDED.value,
    EventKind.SNAPSHOT.value,
    EventKind.EXPIRED_UNUSED.value,
)
"""Rows that start or end no lifecycle: a repeat publish, a filtered topic item,
and retention's rows (a replayed item's next delivery and ack form a lifecycle
of their own, without a publish; a snapshot names no item)."""
_REPLAYED = EventKind.REPLAYED.value  # a retained item in the backlog again

CYCLE = "cycle"
BUCKET = "bucket_start"
BACKLOG = "backlog"
PERCENTILES = (0.5, 0.95, 0.99)
MEASURES = ("wait", "handling", "end_to_end")
QUEUED = "queued"
"""Outcome of a lifecycle with no removing event (still in the node)."""

_PUBLISHED = EventKind.PUBLISHED.value
_DELIVERED = EventKind.DELIVERED.value
_ACKED = EventKind.ACKED.value
_UNLOCKED = EventKind.UNLOCKED.value
_EXPIRED = EventKind.EXPIRED.value
_FILTERED = EventKind.FILTERED.value
TOPIC = "topic"
QUEUE = "queue"


def _is(kind: str) -> Column:
    return F.col(KIND) == F.lit(kind)


def _seconds_between(start: Column, end: Column) -> Column:
    return (F.unix_micros(end) - F.unix_micros(start)) / F.lit(1_000_000.0)


def bucket_start(at: Column, bucket_seconds: int) -> Column:
    """The start of the *bucket_seconds*-wide bucket holding *at*, aligned to the epoch."""
    return F.timestamp_seconds(F.floor(F.unix_seconds(at) / bucket_seconds) * bucket_seconds)


# --- lifecycles -------------------------------------------------------------------------


def with_lifecycle(events: DataFrame) -> DataFrame:
    """Add ``cycle``: how many removing events the item had before this one."""
    before = (
        Window.partitionBy(NODE, ITEM_ID).orderBy(ID).rowsBetween(Window.unboundedPreceding, -1)
    )
    removing = F.when(F.col(KIND).isin(*REMOVING_KINDS), 1).otherwise(0)
    return events.withColumn(CYCLE, F.coalesce(F.sum(removing).over(before), F.lit(0)))


def item_lifecycles(cycled: DataFrame) -> DataFrame:
    """One row per (node, item_id, cycle) with its times, counts and latencies.

    A ``deduplicated`` row (a repeat publish inside the dedup window) or a
    ``filtered`` row (a topic item a queue's filter kept out) changed no item of
    the queue, so it belongs to no lifecycle; nor do retention's rows
    (:data:`NOT_AN_ITEM_KINDS`)."""
    removing = F.col(KIND).isin(*REMOVING_KINDS)
    cycled = cycled.where(~F.col(KIND).isin(*NOT_AN_ITEM_KINDS))
    grouped = cycled.groupBy(NODE, ITEM_ID, CYCLE).agg(
        F.min(F.when(_is(_PUBLISHED), F.col(AT))).alias("published_at"),
        F.min(F.when(_is(_DELIVERED), F.col(AT))).alias("first_delivered_at"),
        F.max(F.when(_is(_DELIVERED), F.col(AT))).alias("last_delivered_at"),
        F.max(F.when(removing, F.col(AT))).alias("ended_at"),
        F.max(F.when(removing, F.col(KIND))).alias("outcome"),
        F.max(F.when(_is(_ACKED), F.col(SUBSCRIBER))).alias("handler"),
        F.count(F.when(_is(_DELIVERED), 1)).alias("delivered"),
        F.count(F.when(_is(_UNLOCKED), 1)).alias("unlocks"),
        F.count(F.when(_is(_EXPIRED), 1)).alias("expiries"),
        F.max(DELIVERIES).alias("max_deliveries"),
        F.max(AT).alias("last_seen_at"),
        F.min(ID).alias("first_id"),
        F.max(ID).alias("last_id"),
    )
    acked = F.col("outcome") == F.lit(_ACKED)
    return grouped.select(
        NODE,
        ITEM_ID,
        CYCLE,
        "published_at",
        "first_delivered_at",
        "ended_at",
        F.coalesce(F.col("outcome"), F.lit(QUEUED)).alias("outcome"),
        "handler",
        F.greatest(F.col("max_deliveries").cast("long"), F.col("delivered")).alias("deliveries"),
        "unlocks",
        "expiries",
        "last_seen_at",
        "first_id",
        "last_id",
        _seconds_between(F.col("published_at"), F.col("first_delivered_at")).alias("wait_s"),
        F.when(acked, _seconds_between(F.col("last_delivered_at"), F.col("ended_at"))).alias(
            "handling_s"
        ),
        F.when(acked, _seconds_between(F.col("published_at"), F.col("ended_at"))).alias(
            "end_to_end_s"
        ),
    )


# --- throughput and backlog ---------------------------------------------------------------


def kind_counts(events: DataFrame) -> DataFrame:
    """(node, kind, n): event counts, e.g. of the history before a report's range."""
    return events.groupBy(NODE, KIND).agg(F.count(F.lit(1)).alias("n"))


def opening_backlog(counts: DataFrame) -> DataFrame:
    """(node, opening_backlog) from (node, kind, n): items published and not removed."""
    sign = (
        F.when(F.col(KIND).isin(_PUBLISHED, _REPLAYED), 1)
        .when(F.col(KIND).isin(*REMOVING_KINDS), -1)
        .otherwise(0)
    )
    return counts.groupBy(NODE).agg(F.sum(sign * F.col("n")).cast("long").alias("opening_backlog"))


def _kind_count(kind: str) -> Column:
    """How many *kind* events a group holds; a ``filtered`` row is itself a count of
    items (the service writes one per bound queue and committed batch)."""
    if kind == _FILTERED:  # a row from before the counts (deliveries 0) is one item
        n = F.greatest(F.col(DELIVERIES), F.lit(1))
        return F.coalesce(F.sum(F.when(_is(kind), n)), F.lit(0)).alias(kind)
    return F.count(F.when(_is(kind), 1)).alias(kind)


def bound_queues(events: DataFrame) -> DataFrame:
    """(topic, queue, copied, filtered): per topic, each bound queue with the items
    copied into it (``published`` rows naming the topic) and the items its filter
    kept out (the counts of its ``filtered`` rows)."""
    rows = events.where(F.col(KIND).isin(_PUBLISHED, _FILTERED) & F.col(REASON).isNotNull())
    copied = F.sum(F.when(_is(_PUBLISHED), 1).otherwise(0))
    filtered = F.sum(F.when(_is(_FILTERED), F.col(DELIVERIES)).otherwise(0))
    return rows.groupBy(F.col(REASON).alias(TOPIC), F.col(NODE).alias(QUEUE)).agg(
        copied.cast("long").alias("copied"), filtered.cast("long").alias("filtered")
    )


def node_buckets(
    events: DataFrame, bucket_seconds: int, opening: DataFrame | None = None
) -> DataFrame:
    """Per node and time bucket: a count column per event kind, and the backlog.

    Every bucket between a node's first and last event is present (zeros where
    nothing happened), so throughput charts show quiet periods as quiet. The
    backlog is the number of items in the node at the end of the bucket:
    *opening* (from ``opening_backlog``; 0 when None) plus published minus removed.
    """
    stamped = events.withColumn(BUCKET, bucket_start(F.col(AT), bucket_seconds))
    counts = stamped.groupBy(NODE, BUCKET).agg(*[_kind_count(k) for k in KINDS])
    spans = stamped.groupBy(NODE).agg(
        F.unix_seconds(F.min(BUCKET)).alias("_first"),
        F.unix_seconds(F.max(BUCKET)).alias("_last"),
    )
    grid = spans.select(
        NODE,
        F.explode(F.sequence("_first", "_last", F.lit(bucket_seconds).cast("long"))).alias("_s"),
    ).select(NODE, F.timestamp_seconds("_s").alias(BUCKET))
    filled = grid.join(counts, [NODE, BUCKET], "left").select(
        NODE,
        BUCKET,
        *[F.coalesce(F.col(k), F.lit(0)).cast("long").alias(k) for k in KINDS],
    )
    net = F.col(_PUBLISHED) + F.col(_REPLAYED) - sum((F.col(k) for k in REMOVING_KINDS), F.lit(0))
    running = (
        Window.partitionBy(NODE)
        .orderBy(BUCKET)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    if opening is None:
        start = F.lit(0).cast("long")
    else:
        filled = filled.join(F.broadcast(opening), [NODE], "left")
        start = F.coalesce(F.col("opening_backlog"), F.lit(0)).cast("long")
    return filled.select(
        NODE,
        BUCKET,
        *KINDS,
        (start + F.sum(net).over(running)).cast("long").alias(BACKLOG),
    )


# --- latency ------------------------------------------------------------------------------


def _percentile_columns(value: Column, prefix: str) -> list[Column]:
    """Samples, p50/p95/p99 (one sketch for the three), mean and max of *value*."""
    sketch = F.percentile_approx(value, list(PERCENTILES))
    return [
        F.count(value).alias(f"{prefix}samples"),
        sketch.alias(f"{prefix}_sketch"),
        F.avg(value).alias(f"{prefix}mean"),
        F.max(value).alias(f"{prefix}max"),
    ]


def _unpack_percentiles(frame: DataFrame, prefix: str) -> DataFrame:
    """Replace the sketch array column by one column per percentile."""
    sketch = F.col(f"{prefix}_sketch")
    columns = [c for c in frame.columns if c != f"{prefix}_sketch"] + [
        sketch[i].alias(f"{prefix}p{round(p * 100)}") for i, p in enumerate(PERCENTILES)
    ]
    return frame.select(*columns)


def latency_by_node(lifecycles: DataFrame) -> DataFrame:
    """(node, measure, samples, p50, p95, p99, mean, max) for wait, handling, end-to-end."""
    aggregates = [
        column
        for measure in MEASURES
        for column in _percentile_columns(F.col(f"{measure}_s"), f"{measure}__")
    ]
    wide = lifecycles.groupBy(NODE).agg(*aggregates)
    for measure in MEASURES:
        wide = _unpack_percentiles(wide, f"{measure}__")
    stats = ("samples", "p50", "p95", "p99", "mean", "max")
    rows = F.array(
        *[
            F.struct(
                F.lit(measure).alias("measure"),
                *[F.col(f"{measure}__{s}").alias(s) for s in stats],
            )
            for measure in MEASURES
        ]
    )
    return wide.select(NODE, F.explode(rows).alias("_r")).select(
        NODE, *[F.col(f"_r.{c}").alias(c) for c in ("measure", *stats)]
    )


# --- workers -------------------------------------------------------------------------------


def worker_stats(events: DataFrame, lifecycles: DataFrame) -> DataFrame:
    """Per worker (the lock holder's JID): deliveries, items handled, unlock and
    timeout rates (per delivery), and handling-time percentiles of its acks."""
    held = events.where(F.col(SUBSCRIBER).isNotNull())
    counts = held.groupBy(SUBSCRIBER).agg(
        F.count(F.when(_is(_DELIVERED), 1)).alias("deliveries"),
        F.count(F.when(_is(_ACKED), 1)).alias("handled"),
        F.count(F.when(_is(_UNLOCKED), 1)).alias("unlocked"),
        F.count(F.when(_is(_EXPIRED), 1)).alias("expired"),
        F.size(F.collect_set(NODE)).alias("nodes"),
    )
    handling = (
        lifecycles.where(F.col("handling_s").isNotNull())
        .groupBy(F.col("handler").alias(SUBSCRIBER))
        .agg(*_percentile_columns(F.col("handling_s"), "handling_"))
        .drop("handling_samples")
    )
    handling = _unpack_percentiles(handling, "handling_")

    def rate(part: str) -> Column:
        return F.when(F.col("deliveries") > 0, F.col(part) / F.col("deliveries"))

    return counts.join(handling, [SUBSCRIBER], "left").select(
        F.col(SUBSCRIBER).alias("worker"),
        "deliveries",
        "handled",
        "unlocked",
        "expired",
        rate("unlocked").alias("unlock_rate"),
        rate("expired").alias("timeout_rate"),
        "nodes",
        "handling_p50",
        "handling_p95",
        "handling_p99",
        "handling_mean",
        "handling_max",
    )


# --- poison candidates ------------------------------------------------------------------------


def poison_candidates(
    lifecycles: DataFrame, events: DataFrame, min_deliveries: int = 2, limit: int = 20
) -> DataFrame:
    """The lifecycles delivered most often (at least *min_deliveries* times), with
    the workers that held them: the items most likely to crash whoever takes them.

    A lifecycle is a run of consecutive ids among its item's events, so its
    holders are the deliveries of the item with ids in [first_id, last_id].
    """
    top = (
        lifecycles.where(F.col("deliveries") >= min_deliveries)
        .orderBy(
            F.col("deliveries").desc(),
            (F.col("unlocks") + F.col("expiries")).desc(),
            F.col(NODE),
            F.col(ITEM_ID),
            F.col(CYCLE),
        )
        .limit(limit)
    )
    keys = top.select(NODE, ITEM_ID, CYCLE, "first_id", "last_id")
    deliveries = events.where(_is(_DELIVERED) & F.col(SUBSCRIBER).isNotNull()).select(
        NODE, ITEM_ID, ID, SUBSCRIBER
    )
    holders = (
        deliveries.join(F.broadcast(keys), [NODE, ITEM_ID])
        .where(F.col(ID).between(F.col("first_id"), F.col("last_id")))
        .groupBy(NODE, ITEM_ID, CYCLE)
        .agg(F.array_sort(F.collect_set(SUBSCRIBER)).alias("holders"))
    )
    return top.join(holders, [NODE, ITEM_ID, CYCLE], "left").select(
        NODE,
        ITEM_ID,
        CYCLE,
        "deliveries",
        "unlocks",
        "expiries",
        "outcome",
        "published_at",
        "last_seen_at",
        F.coalesce(F.col("holders"), F.array().cast("array<string>")).alias("holders"),
    )


# --- per node totals ---------------------------------------------------------------------------


def node_totals(buckets: DataFrame, latency: DataFrame) -> DataFrame:
    """One row per node: event counts over the range, the backlog at its end, and
    the p95 of each latency measure (for the printed summary)."""
    last = Window.partitionBy(NODE).orderBy(F.col(BUCKET).desc())
    final_backlog = (
        buckets.withColumn("_rank", F.row_number().over(last))
        .where(F.col("_rank") == 1)
        .select(NODE, F.col(BACKLOG))
    )
    sums = buckets.groupBy(NODE).agg(*[F.sum(k).cast("long").alias(k) for k in KINDS])
    p95 = latency.groupBy(NODE).pivot("measure", list(MEASURES)).agg(F.first("p95"))
    p95 = p95.select(NODE, *[F.col(m).alias(f"{m}_p95") for m in MEASURES])
    return sums.join(final_backlog, [NODE], "left").join(p95, [NODE], "left").orderBy(NODE)
