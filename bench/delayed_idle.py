"""What delayed items cost while they wait: the component's CPU with a large delayed backlog.

Issue 19's target: 100,000 delayed items waiting cost no CPU while idle. This starts a
private Prosody and the component (SQLite, or PostgreSQL with --backend postgresql),
publishes N items whose ``Start`` is an hour away (in batches of 64, XEP-0060 §13.11),
then reads the component's CPU seconds from /proc over an idle interval, once with
an empty queue first (the baseline: timers, presence, the lease) and once with the
delayed backlog. It also reports the resident memory and how long the publishes took.

Run from the repository root:
    python bench/delayed_idle.py                    # 100,000 items, 30 s idle
    python bench/delayed_idle.py --items 20000 --idle 10
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from load import PUBSUB, create_queue_node, is_result
from processes import (
    component_config,
    cpu_seconds,
    drop_postgres_db,
    migrate,
    private_prosody,
    recreate_postgres_db,
    scratch_db_name,
    start_component,
)
from queue_throughput import wait_ready
from wire import LightClient

DOMAIN, QUEUE_DOMAIN, SECRET, PASSWORD = "localhost", "queue.localhost", "bench", "pw"
NODE = "delayed"
PG_DB = scratch_db_name("xq_bench_delayed")  # this run's own, dropped at its end
SHIM = "http://jabber.org/protocol/shim"


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def batch_publish(first: int, count: int, start: str) -> str:
    headers = f"<headers xmlns='{SHIM}'><header name='Start'>{start}</header></headers>"
    items = "".join(
        f"<item id='d{n}'><job xmlns='urn:example:bench'>{n}</job>{headers}</item>"
        for n in range(first, first + count)
    )
    return (
        f"<iq type='set' to='{QUEUE_DOMAIN}' id='b{first}'><pubsub xmlns='{PUBSUB}'>"
        f"<publish node='{NODE}'>{items}</publish></pubsub></iq>"
    )


async def idle_cpu(pid: int, seconds: float) -> float:
    before = cpu_seconds(pid)
    await asyncio.sleep(seconds)
    return cpu_seconds(pid) - before


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="xq-delayed-") as workdir:
        tmp = Path(workdir)
        prosody = private_prosody(
            {QUEUE_DOMAIN: SECRET}, {"publisher": PASSWORD}, nagle=False, extra_config=""
        )
        with prosody:
            if args.backend == "postgresql":
                recreate_postgres_db(PG_DB)
                url = f"postgresql://postgres@127.0.0.1:5432/{PG_DB}"
            else:
                url = f"sqlite:///{tmp / 'queue.db'}"
            config = component_config(
                tmp / "config.toml",
                jid=QUEUE_DOMAIN,
                secret=SECRET,
                port=prosody.component_port,
                database_url=url,
                log_level="WARNING",
            )
            migrate(config, tmp / "component.log")
            server = start_component(config, tmp / "component.log")
            pub = LightClient("127.0.0.1", prosody.c2s_port, DOMAIN, "publisher", PASSWORD, "b")
            try:
                await pub.connect()
                await wait_ready(pub, QUEUE_DOMAIN, server, 60)
                answer = await pub.request(create_queue_node(QUEUE_DOMAIN, NODE), "create1")
                assert is_result(answer), answer[:400]
                await asyncio.sleep(2)
                empty = await idle_cpu(server.pid, args.idle)
                rss_empty = rss_mib(server.pid)
                start = datetime.now(UTC) + timedelta(hours=1)
                stamp = start.isoformat().replace("+00:00", "Z")
                began = time.monotonic()
                for first in range(0, args.items, 64):
                    count = min(64, args.items - first)
                    answer = await pub.request(batch_publish(first, count, stamp), f"b{first}")
                    assert is_result(answer), answer[:400]
                loaded = time.monotonic() - began
                await asyncio.sleep(2)
                waiting = await idle_cpu(server.pid, args.idle)
                rss_full = rss_mib(server.pid)
            finally:
                await pub.close()
                server.stop()
                drop_postgres_db(PG_DB)  # only if this run created it
        print(f"backend {args.backend}, {args.items:,} items delayed by an hour")
        print(f"publishing them: {loaded:.1f} s ({args.items / loaded:,.0f} items/s)")
        print(
            f"component CPU over {args.idle:g} s idle: empty {empty * 1000:.0f} ms "
            f"({empty / args.idle * 100:.2f} %), with the delayed backlog "
            f"{waiting * 1000:.0f} ms ({waiting / args.idle * 100:.2f} %)"
        )
        print(f"component RSS: empty {rss_empty:.0f} MiB, with the backlog {rss_full:.0f} MiB")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=100_000)
    p.add_argument("--idle", type=float, default=30.0, help="seconds of idle measured")
    p.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    asyncio.run(run(p.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
