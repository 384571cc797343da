"""Takeover time: kill (or pause) the active process, time until a publish is answered.

High availability on PostgreSQL (docs/high-availability.md): two `xmpp-queue run`
processes share one config behind a private Prosody and/or ejabberd. Each round
fails the active process, measures the seconds from the failure to the first
publish answered again (by the standby that took over), then starts a fresh
standby in place of the failed one. Prints every time, the median and the worst.

Run from the repository root:
    python bench/takeover.py                        # 10 kills behind each server
    python bench/takeover.py --rounds 20 --servers prosody --mode pause

The chaos test's longer version (kills and pauses under load, its invariants):
    XMPP_QUEUE_CHAOS_TAKEOVERS=30 python -m pytest -q -s \\
        tests/integration/test_high_availability.py -k chaos
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from processes import drop_postgres_db, recreate_postgres_db  # noqa: E402

from tests.integration.cluster import Cluster, timed_takeover  # noqa: E402
from tests.integration.queue_helpers import create_queue  # noqa: E402
from tests.kit.integration import (  # noqa: E402
    COMPONENTS,
    PASSWORD,
    USERS,
    login,
    logout,
    make_component,
    new_client,
)
from xmpp_queue.servers import PrivateEjabberd, PrivateProsody  # noqa: E402


async def measure(server_name: str, rounds: int, mode: str, lease: int) -> list[float]:
    server_cls = PrivateProsody if server_name == "prosody" else PrivateEjabberd
    server = server_cls(COMPONENTS, dict.fromkeys(USERS, PASSWORD), domain="localhost")
    database = f"xq_takeover_{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(server.start)
    await asyncio.to_thread(recreate_postgres_db, database)
    url = f"postgresql://postgres@127.0.0.1:5432/{database}"
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="xq-takeover-") as tmp:
        base = make_component(server, url, Path(tmp))
        text = base.config_path.read_text()
        base.config_path.write_text(
            text.replace(f'url = "{url}"', f'url = "{url}"\nlease_seconds = {lease}')
        )
        await asyncio.to_thread(base.migrate)
        cluster = Cluster(base)
        client = new_client("pub")
        try:
            cluster.add()
            await cluster.wait_active()
            await cluster.wait_standing_by(cluster.add())
            await login(client, server)
            node = await create_queue(client)
            for n in range(rounds):
                fail = cluster.kill if mode == "kill" else cluster.pause
                seconds = await timed_takeover(cluster, client, node, f"probe-{n}", fail)
                times.append(seconds)
                print(f"{server_name} {mode} {n + 1}/{rounds}: {seconds:.2f} s", flush=True)
                await cluster.wait_standing_by(cluster.add())  # back to one standby
        finally:
            await logout(client)
            await cluster.stop()
            await asyncio.to_thread(server.stop)
            await asyncio.to_thread(drop_postgres_db, database)
    return times


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--servers", default="prosody,ejabberd")
    p.add_argument("--mode", choices=("kill", "pause"), default="kill")
    p.add_argument("--lease", type=int, default=5, help="[database] lease_seconds")
    args = p.parse_args()
    results = {}
    for name in args.servers.split(","):
        results[name] = await measure(name, args.rounds, args.mode, args.lease)
    print()
    print("| server | failure | takeovers | median | worst |")
    print("| --- | --- | --- | --- | --- |")
    for name, times in results.items():
        print(
            f"| {name} | {args.mode} | {len(times)} | {statistics.median(times):.2f} s "
            f"| {max(times):.2f} s |"
        )


if __name__ == "__main__":
    asyncio.run(main())
