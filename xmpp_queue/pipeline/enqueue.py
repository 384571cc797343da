"""``pipeline enqueue``: publish a data set into a queue node over XMPP from Spark.

Why over XMPP: the service's rules (access, size limits, dispatch, the ledger)
apply to every item only if items arrive the way any publisher's do; writing
rows into the database would be a second implementation of publish. Each Spark
partition opens one publisher connection and keeps a window of publishes in
flight (``xmpp_queue.client.Publisher`` retries ``wait`` errors with backoff).

Batches, the re-send of a refused batch and the per-key order of
``--ordering-key-column``: see ``sender.py``. With an ordering-key column the
rows are hash-partitioned by key (every row of a key in one partition) and
sorted inside each partition by their place in the input: file path, the
split's offset in the file, then the row's position in its split.

Re-running after a failure: with ``--id-column`` every row keeps its item id,
and publishing an id that is still queued replaces that item (XEP-0060 §7.1.2)
instead of adding a second one.

The whole job is one Spark action (a ``collect`` of per-partition tallies and
the rejected rows): a second action on the same plan would publish again.
"""

from __future__ import annotations

import asyncio
import glob
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from xmpp_queue.pipeline.enqueue_summary import (
    REJECTED,
    EnqueueSummary,
    summarize,
    write_rejects,
)
from xmpp_queue.pipeline.item_columns import (
    ITEM_HEADERS,
    ItemColumns,
    Outgoing,
    cell,
    row_headers,
)
from xmpp_queue.pipeline.payloads import (
    BAD_ROW,
    CORRUPT,
    ITEM_ID,
    PAYLOAD,
    RECORD,
    REJECT,
    SOURCE,
    PayloadMode,
    category_of,
    prepare_items,
    record_of_payload,
    xml_problem,
)
from xmpp_queue.pipeline.progress import spark_progress
from xmpp_queue.pipeline.sender import PartitionSender
from xmpp_queue.pipeline.settings import PublisherConfig

FORMATS = ("csv", "json", "parquet")
_EXTENSIONS = {
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".parquet": "parquet",
}
CHUNK_ROWS = 2048
"""Rows handed to the event loop at a time (a few windows' worth), so a partition
streams instead of holding all of its outcomes."""
DETAILS_PER_PARTITION = 1000
"""Rejected rows reported in full per partition; beyond that they are counted."""


@dataclass(frozen=True, slots=True)
class EnqueueOptions:
    node: str
    inputs: Sequence[str]
    input_format: str | None = None
    payload: PayloadMode = "json"
    xml_column: str | None = None
    id_column: str | None = None
    max_payload_bytes: int = 262144
    connections: int | None = None
    rejects_path: str | None = None
    item_columns: ItemColumns = field(default_factory=ItemColumns)


# --- input -------------------------------------------------------------------------------


def detect_format(inputs: Sequence[str]) -> str:
    """csv, json or parquet from the file names (of a directory's files too)."""
    found = set()
    for spec in inputs:
        paths = glob.glob(spec) or [spec]
        for path in paths:
            names = [path]
            if os.path.isdir(path):
                names = [n for n in os.listdir(path) if not n.startswith(("_", "."))]
            for name in names:
                ext = os.path.splitext(name)[1].lower()
                if ext in _EXTENSIONS:
                    found.add(_EXTENSIONS[ext])
    if len(found) != 1:
        raise ValueError(
            f"cannot tell the input format of {list(inputs)} (found {sorted(found) or 'none'}); "
            "give --format"
        )
    return found.pop()


def read_input(spark: SparkSession, inputs: Sequence[str], input_format: str | None) -> DataFrame:
    """The input rows; malformed CSV/JSON lines are kept in ``_corrupt_record``."""
    fmt = input_format or detect_format(inputs)
    paths = list(inputs)
    if fmt == "csv":
        inferred = spark.read.csv(paths, header=True, inferSchema=True).schema
        schema = StructType([*inferred.fields, StructField(CORRUPT, StringType(), True)])
        frame = spark.read.csv(
            paths, header=True, schema=schema, mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT
        )
    elif fmt == "json":
        frame = spark.read.json(paths, mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT)
    elif fmt == "parquet":
        frame = spark.read.parquet(*paths)
    else:
        raise ValueError(f"unknown input format {fmt!r}; use one of {', '.join(FORMATS)}")
    return frame.withColumn(SOURCE, F.col("_metadata.file_path"))


# --- publishing (runs on the executors) ---------------------------------------------------


def publish_partition(
    config: PublisherConfig,
    node: str,
    rows: Iterable[Any],
    check_xml: bool = True,
    ordered: bool = False,
) -> Iterator[tuple[Any, ...]]:
    """Publish one partition's prepared rows; yield tallies and rejected rows.

    Yields ``("count", status, category, n)`` once per (status, category) and
    ``("row", status, reason, item_id, source, record)`` for up to
    DETAILS_PER_PARTITION rejected or unsent rows, and ``("throttled", n)``: the
    publishes the service asked to retry later (its per-JID publish rate).
    *check_xml* parses payloads that came from a column (the JSON containers built
    here are well-formed); *ordered* keeps each ordering key's rows in order.
    """
    tally: Counter[tuple[str, str]] = Counter()
    details = 0
    loop = asyncio.new_event_loop()
    sender = PartitionSender(config, node, ordered)
    try:
        for chunk in _chunks(rows, CHUNK_ROWS):
            ready = []
            outcomes: list[tuple[str, str | None, Any]] = []
            for row in chunk:
                reason = row[REJECT] or (xml_problem(row[PAYLOAD]) if check_xml else None)
                headers: dict[str, str] = {}
                if not reason:
                    try:
                        headers = row_headers(cell(row, ITEM_HEADERS))
                    except ValueError as exc:  # a cell the client refuses: this row only
                        reason = f"{BAD_ROW}: {exc}"
                if reason:
                    outcomes.append((REJECTED, reason, row))
                else:
                    ready.append(Outgoing(row, headers) if headers else row)
            outcomes += loop.run_until_complete(sender.publish_all(ready))
            for status, reason, row in outcomes:
                tally[(status, category_of(reason) if reason else "")] += 1
                if reason and details < DETAILS_PER_PARTITION:
                    details += 1
                    record = row[RECORD] or record_of_payload(row[PAYLOAD])
                    yield ("row", status, reason, row[ITEM_ID], row[SOURCE], record)
    finally:
        loop.run_until_complete(sender.close())
        _close_loop(loop)
    for (status, category), n in tally.items():
        yield ("count", status, category, n)
    if sender.throttled:
        yield ("throttled", sender.throttled)


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """What ``asyncio.run`` does on exit: cancel what is left (the stream's own
    tasks), let it unwind, then close."""
    leftover = asyncio.all_tasks(loop)
    if leftover:
        loop.run_until_complete(_cancel(leftover))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


async def _cancel(tasks: set[asyncio.Task[Any]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _chunks(rows: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


# --- the job ---------------------------------------------------------------------------------


def run_enqueue(
    spark: SparkSession, options: EnqueueOptions, publisher: PublisherConfig
) -> EnqueueSummary:
    """Read, prepare and publish; returns the summary (rejects go to options.rejects_path)."""
    frame = read_input(spark, options.inputs, options.input_format)
    prepared = prepare_items(
        frame,
        options.payload,
        options.max_payload_bytes,
        id_column=options.id_column,
        xml_column=options.xml_column,
        item_columns=options.item_columns,
    )
    connections = options.connections or spark.sparkContext.defaultParallelism
    key_column = options.item_columns.ordering_key
    if key_column:
        prepared = by_key_in_input_order(prepared, connections)
    else:
        prepared = _with_connections(prepared, connections)
    node, check_xml, ordered = options.node, options.payload == "xml", bool(key_column)
    started = time.monotonic()
    with spark_progress(spark, f"publishing to {node}"):
        records = prepared.rdd.mapPartitions(
            lambda rows: publish_partition(publisher, node, rows, check_xml, ordered)
        ).collect()
    summary = summarize(records)
    summary.seconds = time.monotonic() - started
    if options.rejects_path and summary.examples:
        write_rejects(options.rejects_path, summary.examples)
    return summary


def _with_connections(frame: DataFrame, connections: int) -> DataFrame:
    """One partition per publisher connection: merge (keeping order inside each)
    when there are more, split when there are fewer."""
    current = frame.rdd.getNumPartitions()
    if current > connections:
        return frame.coalesce(connections)
    if current < connections:
        return frame.repartition(connections)
    return frame


_ROW = "_input_row"


def by_key_in_input_order(prepared: DataFrame, connections: int) -> DataFrame:
    """Every row of a key in one partition, the rows of each partition in input
    order: by file path, then by position in the file.

    The position is ``monotonically_increasing_id`` taken before anything
    reshuffles (``prepare_items`` is narrow: one output row per input row, in
    place): it grows with the read partition's index and the row's place in it,
    and Spark's file scan keeps one file's splits in offset order.
    """
    key = F.get_json_object(F.col(ITEM_HEADERS), "$.ordering_key")
    placed = prepared.withColumn(_ROW, F.monotonically_increasing_id())
    # Rows without a key go anywhere: spread them by position, not all to one partition.
    spread = F.coalesce(key, F.col(_ROW).cast("string"))
    return placed.repartition(connections, spread).sortWithinPartitions(SOURCE, _ROW).drop(_ROW)
