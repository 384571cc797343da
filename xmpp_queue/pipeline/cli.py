"""``xmpp-queue pipeline ...``: argument parsing and wiring of the Spark jobs.

Why separate from the jobs: ``xmpp_queue/cli/`` owns the command and the
config file; it calls ``add_pipeline_parser`` to add the subcommands and
``run_pipeline`` with the parsed arguments and the ``[pipeline]`` settings.
Nothing here takes a credential: those come only from the config file.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from xmpp_queue.core.subscribe_options import MAX_BATCH_ITEMS
from xmpp_queue.pipeline.item_columns import ItemColumns, parse_column_list
from xmpp_queue.pipeline.settings import PipelineSettings, PipelineSettingsError, PublisherConfig

_DURATION = re.compile(r"^\s*(\d+)\s*(s|sec|m|min|h|d|w)?\s*$")
_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800, None: 1}


def parse_duration(text: str) -> int:
    """Seconds from ``90``, ``30s``, ``5m``, ``1h``, ``7d``, ``2w``."""
    match = _DURATION.match(text)
    if not match or int(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"not a positive duration: {text!r} (e.g. 30s, 5m, 1h)")
    return int(match.group(1)) * _UNITS[match.group(2)]


def batch_size(text: str) -> int:
    """Rows per publish: 1 to the service's batch limit."""
    if not text.isdigit() or not 1 <= int(text) <= MAX_BATCH_ITEMS:
        raise argparse.ArgumentTypeError(f"not a batch size from 1 to {MAX_BATCH_ITEMS}: {text!r}")
    return int(text)


def parse_moment(text: str, now: datetime | None = None) -> datetime:
    """An ISO 8601 time (naive = UTC) or a duration back from now (``7d`` = 7 days ago)."""
    now = now or datetime.now(UTC)
    if _DURATION.match(text):
        return now - timedelta(seconds=parse_duration(text))
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (ISO 8601 such as 2024-05-01T12:00, or 7d for 7 days ago)"
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _conf_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--spark-conf wants key=value, got {text!r}")
    return key.strip(), value.strip()


def add_pipeline_parser(subparsers: Any) -> None:
    """Add ``pipeline`` with ``enqueue``, ``report`` and ``export-ledger``."""
    pipeline = subparsers.add_parser(
        "pipeline",
        help="Spark jobs: bulk enqueue, queue-history report, ledger export",
        description="Spark (PySpark) jobs over the queue service; local[*] unless --master.",
    )
    pipeline.add_argument("--master", help="Spark master URL (default: [pipeline] master)")
    pipeline.add_argument(
        "--jars",
        default="",
        help="extra comma-separated jars (JDBC drivers are found in /usr/share/java)",
    )
    pipeline.add_argument(
        "--spark-conf",
        action="append",
        type=_conf_pair,
        default=[],
        dest="spark_conf",
        metavar="KEY=VALUE",
        help="a Spark setting, e.g. spark.executor.memory=4g (repeatable)",
    )
    jobs = pipeline.add_subparsers(dest="pipeline_command", required=True)

    enqueue = jobs.add_parser("enqueue", help="publish rows of CSV / JSON lines / Parquet")
    enqueue.add_argument("--node", required=True, help="queue node to publish to")
    enqueue.add_argument(
        "--input",
        action="append",
        required=True,
        dest="inputs",
        help="a file, a directory or a glob (repeatable)",
    )
    enqueue.add_argument("--format", choices=("csv", "json", "parquet"), dest="input_format")
    enqueue.add_argument(
        "--payload",
        choices=("json", "xml"),
        default="json",
        help="json: the row as a XEP-0335 <json/> container; xml: the --xml-column text",
    )
    enqueue.add_argument("--xml-column", help="column holding the item's XML element")
    enqueue.add_argument(
        "--id-column", help="column of item ids: a re-run does not enqueue a row twice"
    )
    enqueue.add_argument("--connections", type=int, help="publisher connections (partitions)")
    enqueue.add_argument(
        "--publish-batch",
        type=batch_size,
        help="rows per publish request, 1 to 1000 (default: [pipeline] publish_batch, 16)",
    )
    enqueue.add_argument(
        "--max-payload-bytes", type=int, help="reject larger payloads before sending"
    )
    enqueue.add_argument("--rejects", help="write rejected rows here (JSON lines)")
    enqueue.add_argument(
        "--attribute-columns",
        type=parse_column_list,
        help="comma-separated columns sent as item attributes, named as the columns "
        "(default: [pipeline] attribute_columns)",
    )
    enqueue.add_argument(
        "--delay-column", help="column of seconds to hold each item back (SHIM Start)"
    )
    enqueue.add_argument(
        "--deliver-at-column",
        help="column of times to deliver each item at: ISO 8601 (no zone = UTC), Unix seconds",
    )
    enqueue.add_argument(
        "--ttl-column", help="column of whole seconds after which a waiting item expires"
    )
    enqueue.add_argument("--priority-column", help="column of high, medium or low (Urgency)")
    enqueue.add_argument(
        "--ordering-key-column",
        help="column of ordering keys: the rows of one key reach the queue in the input's "
        "order (an ordered queue then hands them out one at a time per key)",
    )

    report = jobs.add_parser("report", help="queue-history report: Parquet tables + report.html")
    report.add_argument("--out", required=True, help="output directory")
    report.add_argument("--since", type=parse_moment, help="start (ISO 8601 or e.g. 7d)")
    report.add_argument("--until", type=parse_moment, help="end, exclusive (default: now)")
    report.add_argument("--bucket", type=parse_duration, default=60, help="bucket (e.g. 5m)")
    report.add_argument(
        "--parquet",
        action="append",
        default=[],
        help="read an exported ledger archive (repeatable) instead of the database",
    )
    report.add_argument(
        "--database",
        action="store_true",
        help="also read the database when --parquet is given (rows deduplicated by id)",
    )
    report.add_argument("--poison-min", type=int, default=2, help="min deliveries to list")
    report.add_argument("--poison-limit", type=int, default=20, help="poison candidates listed")
    report.add_argument("--title", default="xmpp-queue: queue history")

    export = jobs.add_parser(
        "export-ledger", help="move old ledger rows to date-partitioned Parquet"
    )
    export.add_argument("--out", required=True, help="archive directory")
    export.add_argument(
        "--older-than",
        required=True,
        type=parse_moment,
        dest="cutoff",
        help="cut-off: a duration (30d) or an ISO 8601 time; older rows move",
    )


def run_pipeline(
    args: argparse.Namespace, settings: PipelineSettings, out: TextIO | None = None
) -> int:
    """Run the chosen job; returns the process exit code."""
    from xmpp_queue.pipeline.session import build_spark_session, spark_is_running

    out = out or sys.stdout
    started = time.monotonic()  # the summary's wall time counts Spark's start-up too
    from xmpp_queue.pipeline.input_errors import check_local_inputs, input_error

    inputs = list(getattr(args, "inputs", None) or getattr(args, "parquet", None) or [])
    if args.pipeline_command == "enqueue":
        # Before Spark starts: a misspelt node is one line now, not one reject per row.
        item_columns(args, settings).check()
        check_local_inputs(inputs)
        asyncio.run(check_node(settings.publisher_config(), args.node))
    elif inputs:
        check_local_inputs(inputs, "--parquet")
    running = spark_is_running()  # a host (tests, a notebook) owns that session: keep it

    spark = build_spark_session(
        master=args.master or settings.master,
        app_name=f"xmpp-queue {args.pipeline_command}",
        jars=[*settings.jars, *[j for j in args.jars.split(",") if j]],
        conf={**settings.spark_conf, **dict(args.spark_conf)},
    )
    try:
        if args.pipeline_command == "enqueue":
            return _enqueue(spark, args, settings, out, started)
        if args.pipeline_command == "report":
            return _report(spark, args, settings, out)
        return _export(spark, args, settings, out)
    except Exception as exc:  # an input mistake is one line (exit 2), the rest keeps its trace
        mistake = input_error(exc, inputs)
        if mistake is None:
            raise
        raise mistake from None
    finally:
        if not running:
            spark.stop()


def item_columns(args: argparse.Namespace, settings: PipelineSettings) -> ItemColumns:
    """The columns that give each item its attributes, delay, expiry and priority."""
    attributes = args.attribute_columns
    return ItemColumns(
        attributes=settings.attribute_columns if attributes is None else attributes,
        delay=args.delay_column,
        deliver_at=args.deliver_at_column,
        ttl=args.ttl_column,
        priority=args.priority_column,
        ordering_key=args.ordering_key_column,
    )


async def check_node(config: PublisherConfig, node: str) -> None:
    """Refuse a node that does not exist (or that this account cannot see) up front."""
    from xmpp_queue.client import ClientError, StanzaError
    from xmpp_queue.client.link import PubSubLink
    from xmpp_queue.client.wire import quote_attr

    where = config.where
    try:
        link = await PubSubLink.connect(config.account)
    except (ClientError, TimeoutError) as exc:
        raise PipelineSettingsError(f"cannot log in as {config.jid} ({where}): {exc}") from None
    try:
        query = f"<query xmlns='http://jabber.org/protocol/disco#info' node='{quote_attr(node)}'/>"
        await link.call(query, "get")
    except StanzaError as exc:
        if exc.condition == "item-not-found":
            raise PipelineSettingsError(
                f"node {node!r} does not exist on {config.account.service}: check --node, or "
                "create the queue first"
            ) from None
        raise PipelineSettingsError(f"node {node!r} on {where}: {exc}") from None
    finally:
        await link.close()


def _enqueue(
    spark: Any,
    args: argparse.Namespace,
    settings: PipelineSettings,
    out: TextIO,
    started: float,
) -> int:
    from xmpp_queue.pipeline.enqueue import EnqueueOptions, run_enqueue
    from xmpp_queue.pipeline.enqueue_summary import print_enqueue_summary

    options = EnqueueOptions(
        node=args.node,
        inputs=args.inputs,
        input_format=args.input_format,
        payload=args.payload,
        xml_column=args.xml_column,
        id_column=args.id_column,
        max_payload_bytes=args.max_payload_bytes or settings.max_payload_bytes,
        connections=args.connections,
        rejects_path=args.rejects,
        item_columns=item_columns(args, settings),
    )
    publisher = settings.publisher_config()
    if args.publish_batch is not None:
        publisher = replace(publisher, batch=args.publish_batch)
    summary = run_enqueue(spark, options, publisher)
    summary.total_seconds = time.monotonic() - started
    print_enqueue_summary(summary, args.node, out, publisher.jid)
    return 0 if summary.ok else 1


def _report(spark: Any, args: argparse.Namespace, settings: PipelineSettings, out: TextIO) -> int:
    from xmpp_queue.pipeline.ledger_io import load_ledger
    from xmpp_queue.pipeline.report import ReportOptions, print_summary, run_report

    use_db = args.database or not args.parquet
    if use_db and not settings.database_url:
        print("pipeline report: no database URL in the config ([database] url)", file=out)
        return 2
    until = args.until or datetime.now(UTC)
    selection = load_ledger(
        spark, settings.database_url if use_db else None, args.parquet, args.since, until
    )
    options = ReportOptions(
        out_dir=args.out,
        since=args.since,
        until=until,
        bucket_seconds=args.bucket,
        poison_min_deliveries=args.poison_min,
        poison_limit=args.poison_limit,
        title=args.title,
        sources=selection.sources,
    )
    result = run_report(selection.events, options, selection.opening_counts)
    print_summary(result, out)
    return 0


def _export(spark: Any, args: argparse.Namespace, settings: PipelineSettings, out: TextIO) -> int:
    from xmpp_queue.pipeline.export import export_ledger
    from xmpp_queue.pipeline.ledger_io import jdbc_source

    if not settings.database_url:
        print("pipeline export-ledger: no database URL in the config ([database] url)", file=out)
        return 2
    result = export_ledger(
        spark, jdbc_source(settings.database_url), settings.database_url, args.out, args.cutoff
    )
    if result.recovered:
        print(f"finished interrupted run(s): {', '.join(result.recovered)}", file=out)
    if result.run_id is None:
        print(f"no ledger rows older than {args.cutoff:%Y-%m-%d %H:%M:%S} UTC", file=out)
    else:
        print(
            f"exported {result.rows:,} rows ({', '.join(result.dates)}) to {args.out}, "
            f"deleted {result.deleted:,} from the database (run {result.run_id})",
            file=out,
        )
    return 0
