"""Benchmark: `xmpp-queue pipeline enqueue` against the component's own publish rate.

Starts a private Prosody and the component (SQLite, as users run it), then, on the
same setup and the same kind of queue node (no subscribers, so nothing but publishing
is measured):

1. one ``xmpp_queue.client.Publisher`` with a window of 32 publishes N items: the
   component's publish rate as a plain client sees it;
2. ``xmpp-queue pipeline enqueue`` publishes N CSV rows (Spark local mode, one
   publisher connection per partition) into a fresh queue node, once per
   ``--publish-batch`` value (rows per publish request; 1 = one publish per row).

Prints the rates and their ratio to the first (issue 6 asks the pipeline to reach
80% of it). The pipeline's rate is measured two ways: by the job's own summary
(Spark start-up included) and from the component's ledger (first to last publish).

    python bench/pipeline_enqueue.py --rows 100000 --publish-batch 1,16

``--publish-rate 1000`` runs the service with its default per-JID rate (the
loader is throttled), ``--rate-exempt`` lists the loader in ``[limits]
rate_exempt``; ``--master spark://host:7077`` runs the job on a standalone
cluster (the executors import this checkout through PYTHONPATH);
``--ordering-key`` sends the ``order_id % 100`` column as the ordering key.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from xmpp_queue.client import Publisher
from xmpp_queue.servers.prosody import PrivateProsody

ROOT = Path(__file__).resolve().parents[1]
SERVICE = "queue.localhost"
SECRET = "bench-secret"
PASSWORD = "pass"


def write_config(
    work: Path,
    prosody: PrivateProsody,
    db: Path,
    rate: int = 0,
    exempt: bool = False,
    master: str = "local[*]",
) -> Path:
    config = work / "config.toml"
    exempt_line = 'rate_exempt = ["loader@localhost"]' if exempt else ""
    config.write_text(
        f"""[component]
jid = "{SERVICE}"
secret = "{SECRET}"
server_host = "127.0.0.1"
server_port = {prosody.component_port}

[database]
url = "sqlite:///{db}"

[admins]
jids = ["admin@localhost"]

[logging]
level = "WARNING"

[limits]
publish_rate = {rate}  # 0: what the service can take, not 1,000 items/s per JID
{exempt_line}

[pipeline]
master = "{master}"
publisher_jid = "loader@localhost"
publisher_password = "{PASSWORD}"
service_jid = "{SERVICE}"
xmpp_host = "127.0.0.1"
xmpp_port = {prosody.c2s_port}
window = 32
allow_plain = true
"""
    )
    return config


def write_rows(path: Path, rows: int) -> None:
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["order_id", "amount", "note", "customer"])
        for i in range(rows):
            writer.writerow([f"order-{i}", f"{i % 997}.5", "bench row", f"c{i % 100}"])


async def direct_publish(prosody: PrivateProsody, node: str, items: int) -> float:
    """Items/s of one Publisher with a window of 32 into a fresh queue node."""
    async with Publisher(
        f"loader@localhost/direct-{os.getpid()}",
        PASSWORD,
        SERVICE,
        host="127.0.0.1",
        port=prosody.c2s_port,
        window=32,
        allow_plain=True,
    ) as pub:
        await pub.create_queue(node)
        payload = '<json xmlns=\'urn:xmpp:json:0\'>{"order_id":"x","amount":1.5}</json>'
        start = time.perf_counter()
        futures = [await pub.submit(node, payload, item_id=f"d-{i}") for i in range(items)]
        await asyncio.gather(*futures)
        return items / (time.perf_counter() - start)


async def create_node(prosody: PrivateProsody, node: str) -> None:
    async with Publisher(
        "loader@localhost/setup",
        PASSWORD,
        SERVICE,
        host="127.0.0.1",
        port=prosody.c2s_port,
        allow_plain=True,
    ) as pub:
        await pub.create_queue(node)


def ledger_rate(db: Path, node: str) -> tuple[int, float]:
    """Publishes of *node* in the ledger and their rate, first to last."""
    with sqlite3.connect(db) as conn:
        count, first, last = conn.execute(
            "SELECT count(*), min(at), max(at) FROM queue_events "
            "WHERE node = ? AND kind = 'published'",
            (node,),
        ).fetchone()
    if not count or first == last:
        return count or 0, 0.0
    span = datetime.fromisoformat(last) - datetime.fromisoformat(first)
    return count, count / span.total_seconds()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument(
        "--direct-items", type=int, default=20_000, help="items for the direct Publisher baseline"
    )
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument(
        "--publish-batch", default="16", help="rows per publish request, e.g. 1,16 (one job each)"
    )
    parser.add_argument("--master", default="local[*]", help="Spark master URL")
    parser.add_argument("--publish-rate", type=int, default=0, help="[limits] publish_rate")
    parser.add_argument("--rate-exempt", action="store_true", help="loader in rate_exempt")
    parser.add_argument("--ordering-key", action="store_true", help="customer as ordering key")
    args = parser.parse_args()

    with (
        tempfile.TemporaryDirectory(prefix="xq-bench-enqueue-") as tmp,
        PrivateProsody({SERVICE: SECRET}, {"loader": PASSWORD, "admin": PASSWORD}) as prosody,
    ):
        work = Path(tmp)
        db = work / "queue.sqlite"
        config = write_config(work, prosody, db, args.publish_rate, args.rate_exempt, args.master)
        run = [sys.executable, "-m", "xmpp_queue"]
        subprocess.run([*run, "migrate", "-c", str(config)], check=True, capture_output=True)
        component = subprocess.Popen(
            [*run, "run", "-c", str(config)], stderr=(work / "component.log").open("w")
        )
        try:
            time.sleep(5.0)  # the component connects; a failed create below says if not
            direct = asyncio.run(direct_publish(prosody, "direct", args.direct_items))
            print(
                f"direct Publisher (window 32): {direct:,.0f} items/s ({args.direct_items:,} items)"
            )
            rows = work / "rows.csv"
            write_rows(rows, args.rows)
            for batch in (int(b) for b in args.publish_batch.split(",")):
                node = f"bulk-{batch}"
                asyncio.run(create_node(prosody, node))
                code = enqueue(run, config, node, rows, args, batch, direct, db)
                if code:
                    return code
        finally:
            component.terminate()
            component.wait(10)
    return 0


def enqueue(
    run: list[str],
    config: Path,
    node: str,
    rows: Path,
    args: argparse.Namespace,
    batch: int,
    direct: float,
    db: Path,
) -> int:
    """One ``pipeline enqueue`` job into *node*; prints its rates."""
    started = time.perf_counter()
    job = subprocess.run(
        [
            *run,
            "pipeline",
            *(
                []
                if args.master.startswith("local")
                else ["--spark-conf", f"spark.executorEnv.PYTHONPATH={ROOT}"]
            ),
            "enqueue",
            "-c",
            str(config),
            "--node",
            node,
            "--input",
            str(rows),
            "--id-column",
            "order_id",
            "--connections",
            str(args.connections),
            "--publish-batch",
            str(batch),
            *(["--ordering-key-column", "customer"] if args.ordering_key else []),
        ],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    print(job.stdout[-2500:])
    if job.returncode != 0:
        print(job.stderr[-2500:], file=sys.stderr)
        return job.returncode
    published, rate = ledger_rate(db, node)
    print(
        f"pipeline enqueue, publish batch {batch}: {args.rows:,} rows in {wall:.1f} s wall "
        f"({args.rows / wall:,.0f} rows/s with Spark start-up)"
    )
    print(
        f"pipeline enqueue, publish batch {batch}, publishing phase (ledger): {published:,} "
        f"items, {rate:,.0f} items/s = {rate / direct:.0%} of the direct Publisher"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
