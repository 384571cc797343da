"""``pipeline enqueue``: publish a data set into a queue node over XMPP from Spark.

Why over XMPP: the service's rules (access, size limits, dispatch, the ledger)
apply to every item only if items arrive the way any publisher's do; writing
rows into the database would be a second implementation of publish. Each Spark
partition opens one publisher connection and keeps a window of publishes in
flight (``xmpp_queue.client.Publisher`` retries ``wait`` errors with backoff).

Batches: consecutive rows go out several per publish (XEP-0060 §13.11), which
the service stores all or none in one commit. A refusal therefore means that
nothing of the batch was stored, so its rows are sent again one per publish and
each ends published or rejected with its own reason: the rejects file names the
row the service refused, not its neighbours.

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

from xmpp_queue.client.attributes import headers_bytes
from xmpp_queue.pipeline.enqueue_summary import (
    FAILED,
    PUBLISHED,
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
    headers_of,
    row_headers,
)
from xmpp_queue.pipeline.payloads import (
    BAD_ROW,
    CORRUPT,
    ITEM_ID,
    NOT_SENT,
    PAYLOAD,
    RECORD,
    REFUSED,
    REJECT,
    SOURCE,
    PayloadMode,
    category_of,
    prepare_items,
    record_of_payload,
    xml_problem,
)
from xmpp_queue.pipeline.progress import spark_progress
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
BATCH_PAYLOAD_BYTES = 64 * 1024
"""Payload and attribute bytes per batch publish at most (a single larger row goes alone). XMPP
servers cap a client's stanza size (Prosody and ejabberd at 256 KiB by default) and
close the stream above it, which would fail every publish in flight."""
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
    config: PublisherConfig, node: str, rows: Iterable[Any], check_xml: bool = True
) -> Iterator[tuple[Any, ...]]:
    """Publish one partition's prepared rows; yield tallies and rejected rows.

    Yields ``("count", status, category, n)`` once per (status, category) and
    ``("row", status, reason, item_id, source, record)`` for up to
    DETAILS_PER_PARTITION rejected or unsent rows. *check_xml* parses payloads
    that came from a column (the JSON containers built here are well-formed).
    """
    tally: Counter[tuple[str, str]] = Counter()
    details = 0
    loop = asyncio.new_event_loop()
    sender = _PartitionSender(config, node)
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


class _PartitionSender:
    """One publisher connection for a partition, opened on first use and opened
    again for the next chunk after a failure (rows already answered keep their
    outcome; with --id-column a re-run resends the rest safely)."""

    def __init__(self, config: PublisherConfig, node: str) -> None:
        self.config = config
        self.node = node
        self.publisher: Any = None

    async def _open(self) -> None:
        from xmpp_queue.client import Publisher

        cfg = self.config
        publisher = Publisher(
            cfg.jid,
            cfg.password,
            cfg.service_jid,
            host=cfg.host,
            port=cfg.port,
            window=cfg.window,
            allow_plain=cfg.allow_plain,
            # XML payloads were checked by xml_problem; JSON containers are built well-formed.
            check_payloads=False,
        )
        await publisher.connect()
        self.publisher = publisher

    async def close(self) -> None:
        publisher, self.publisher = self.publisher, None
        if publisher is not None:
            try:
                await publisher.close()
            except Exception:  # closing a broken stream must not hide the outcomes
                publisher.abort()

    async def publish_all(self, rows: list[Any]) -> list[tuple[str, str | None, Any]]:
        """Submit every row through the publisher's window, then collect the answers.

        Rows go in batches of ``config.batch``; the rows of a batch the service
        refused are sent again one by one (see the module docstring)."""
        if not rows:
            return []
        if self.publisher is None:
            try:
                await self._open()
            except Exception as exc:  # reported per row; the other partitions go on
                reason = f"{NOT_SENT}: cannot connect ({type(exc).__name__}: {exc})"
                return [(FAILED, reason, row) for row in rows]
        results, refused = await self._send(batches(rows, self.config.batch))
        if refused:
            singles, _ = await self._send([[row] for row in refused])
            results += singles
        if any(status == FAILED for status, _, _ in results):
            await self.close()  # the stream is suspect: reconnect for the next chunk
        return results

    async def _send(
        self, groups: Sequence[list[Any]]
    ) -> tuple[list[tuple[str, str | None, Any]], list[Any]]:
        """Outcomes of *groups* (one publish each), and the rows of refused batches."""
        pending: list[tuple[list[Any], asyncio.Future[Any] | BaseException]] = []
        for group in groups:
            try:
                pending.append((group, await self._submit(group)))
            except Exception as exc:  # the stream broke while sending
                pending.append((group, exc))
        results: list[tuple[str, str | None, Any]] = []
        refused: list[Any] = []
        for group, future in pending:
            try:
                if isinstance(future, BaseException):
                    raise future
                await future
            except Exception as exc:
                status, reason, _ = _failure(exc, group[0])
                if status == REJECTED and len(group) > 1:
                    refused += group  # all or none: nothing of it was stored
                else:
                    results += [(status, reason, row) for row in group]
            else:
                results += [(PUBLISHED, None, row) for row in group]
        return results, refused

    async def _submit(self, group: list[Any]) -> asyncio.Future[Any]:
        from xmpp_queue.client import PublishItem

        if len(group) == 1:
            row = group[0]
            if isinstance(row, Outgoing):
                return await self.publisher.submit(
                    self.node, row[PAYLOAD], row[ITEM_ID], attributes=row.headers
                )
            return await self.publisher.submit(self.node, row[PAYLOAD], row[ITEM_ID])
        items = [
            PublishItem(row[PAYLOAD], row[ITEM_ID], row.headers)
            if isinstance(row, Outgoing)
            else (row[PAYLOAD], row[ITEM_ID])
            for row in group
        ]
        return await self.publisher.submit_batch(self.node, items)


def batches(
    rows: Sequence[Any], size: int, max_bytes: int = BATCH_PAYLOAD_BYTES
) -> list[list[Any]]:
    """Consecutive rows, at most *size* per batch and *max_bytes* of payload and
    attribute headers (a row larger than that on its own is a batch of one)."""
    out: list[list[Any]] = []
    group: list[Any] = []
    weight = 0
    for row in rows:
        payload = row[PAYLOAD]
        n = len(payload.encode("utf-8")) if payload else 0
        n += headers_bytes(headers_of(row))
        if group and (len(group) >= size or weight + n > max_bytes):
            out.append(group)
            group, weight = [], 0
        group.append(row)
        weight += n
    if group:
        out.append(group)
    return out


def _failure(exc: Exception, row: Any) -> tuple[str, str, Any]:
    """A refusal by the service (rejected) or a transport failure (not sent)."""
    from xmpp_queue.client import PublishError

    if isinstance(exc, PublishError):
        if exc.condition in ("connection-lost", "remote-server-timeout"):
            return (FAILED, f"{NOT_SENT}: {exc.condition}", row)
        return (REJECTED, f"{REFUSED}: {exc}", row)
    return (FAILED, f"{NOT_SENT}: {type(exc).__name__}: {exc}", row)


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
    prepared = _with_connections(
        prepared, options.connections or spark.sparkContext.defaultParallelism
    )
    node, check_xml = options.node, options.payload == "xml"
    started = time.monotonic()
    with spark_progress(spark, f"publishing to {node}"):
        records = prepared.rdd.mapPartitions(
            lambda rows: publish_partition(publisher, node, rows, check_xml)
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
