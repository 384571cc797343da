"""Aggregate throughput of a sharded deployment: 1 shard against 2 (docs/scaling.md).

One private Prosody, one PostgreSQL database, one `xmpp-queue run` process per shard
(`[shards] per_process = 1`; the first also holds the directory). Each shard gets one
queue (a name that hashes to it), one windowed publisher and `--workers` acking
workers, all driven by the light load generator of `queue_throughput.py` in this
process. The publisher creates its queue through the public name and follows the
redirect to the shard (one extra round trip, once); every publish and ack then goes to
the shard. Prints, per run, the aggregate items/s (acked) and the CPU per item of the
shard processes, Prosody, the generator and the rest of the machine (PostgreSQL).

Run from the repository root:
    python bench/shards.py                         # 1 and 2 shards, 3 runs each
    python bench/shards.py --shards 1 2 --items 20000 --batch 1 --publish-batch 1
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from load import (  # noqa: E402
    Publisher,
    Tracker,
    Worker,
    create_queue_node,
    is_result,
    subscribe_queue,
)
from processes import (  # noqa: E402
    cpu_seconds,
    drop_postgres_db,
    machine_busy_seconds,
    migrate,
    recreate_postgres_db,
    scratch_db_name,
    start_component,
)
from wire import LightClient  # noqa: E402

from tests.kit.integration import (  # noqa: E402
    COMPONENTS,
    PASSWORD,
    SHARD_JIDS,
    SHARDED_JID,
    SHARDS_SECRET,
    USERS,
)
from xmpp_queue.config import load_config  # noqa: E402
from xmpp_queue.core.placement import parse_node_uri, pick_shard  # noqa: E402
from xmpp_queue.servers import PrivateProsody  # noqa: E402
from xmpp_queue.sharding import shards_status  # noqa: E402

_REDIRECT = re.compile(rb"<redirect[^>]*>([^<]+)</redirect>")


def config_text(port: int, url: str, shards: int) -> str:
    domains = ", ".join(f'"{d}"' for d in SHARD_JIDS[:shards])
    return (
        f'[component]\njid = "{SHARDED_JID}"\nsecret = "{SHARDS_SECRET}"\n'
        f'server_host = "127.0.0.1"\nserver_port = {port}\n'
        f'\n[database]\nurl = "{url}"\nlease_seconds = 5\n'
        f"\n[shards]\ndomains = [{domains}]\nper_process = 1\n"
        '\n[access]\nqueue_access_model = "open"\n'
        "\n[limits]\npublish_rate = 0\n"
        '\n[logging]\nlevel = "WARNING"\n'
    )


def node_on(shard: str, shards: tuple[str, ...], run: int) -> str:
    n = 0
    while pick_shard(name := f"bench{run}-{n}", shards) != shard:
        n += 1
    return name


async def all_served(config: Path, within: float = 60.0) -> None:
    settings = load_config(config)
    deadline = time.monotonic() + within
    while True:
        text, serving = await shards_status(settings)
        if serving:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"not every shard is served:\n{text}")
        await asyncio.sleep(0.5)


async def create_via_directory(pub: LightClient, node: str) -> str:
    """Create *node* through the public name: the redirect names its shard."""
    answer = await until_not_waiting(pub, SHARDED_JID, node)
    found = _REDIRECT.search(answer)
    if found is None:
        raise RuntimeError(f"no redirect from the directory: {answer[:400]!r}")
    shard, _ = parse_node_uri(found.group(1).decode())
    answer = await until_not_waiting(pub, shard, node)
    if is_result(answer):
        return shard
    raise RuntimeError(f"create on {shard} failed: {answer[:400]!r}")


async def until_not_waiting(pub: LightClient, to: str, node: str) -> bytes:
    """The answer to a create sent to *to*, sent again while the server answers for a
    component not connected yet (its lease is held; its stream may still be opening)."""
    for _ in range(100):
        answer = await pub.request(create_queue_node(to, node), "create1")
        if b"type='wait'" not in answer:
            return answer
        await asyncio.sleep(0.2)
    return answer


async def one_run(
    args: argparse.Namespace, prosody: PrivateProsody, shards: int, run: int
) -> dict[str, float]:
    database = scratch_db_name("xq_shards")
    await asyncio.to_thread(recreate_postgres_db, database)
    url = f"postgresql://postgres@127.0.0.1:5432/{database}"
    used = SHARD_JIDS[:shards]
    with tempfile.TemporaryDirectory(prefix="xq-shards-") as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text(config_text(prosody.component_port, url, shards))
        migrate(config, Path(tmp) / "migrate.log")
        procs = [start_component(config, Path(tmp) / f"shard-{k}.log") for k in range(shards)]
        clients: list[LightClient] = []
        try:
            await all_served(config)
            pipelines = []
            for k, shard in enumerate(used):
                node = node_on(shard, used, run)
                pub = LightClient(
                    "127.0.0.1", prosody.c2s_port, "localhost", "pub", PASSWORD, f"p{k}"
                )
                workers = [
                    LightClient(
                        "127.0.0.1", prosody.c2s_port, "localhost", f"w{w + 1}", PASSWORD, f"s{k}"
                    )
                    for w in range(args.workers)
                ]
                clients += [pub, *workers]
                await asyncio.gather(pub.connect(), *(w.connect() for w in workers))
                assert await create_via_directory(pub, node) == shard
                for w in workers:
                    w.send(f"<presence/><presence to='{shard}'/>")
                    answer = await w.request(
                        subscribe_queue(shard, node, w.jid, args.queue_requests, args.batch), "sub1"
                    )
                    if not is_result(answer):
                        raise RuntimeError(f"subscribe failed: {answer[:400]!r}")
                tracker = Tracker(args.warmup + args.items)
                publisher = Publisher(pub, shard, node, tracker, args.publish_batch)
                pub.hand_over(publisher.handle)
                for w in workers:
                    role = Worker(w, shard, node, tracker, args.batch)
                    w.hand_over(role.handle)
                pipelines.append((tracker, publisher))

            async def phase(start: int, end: int) -> None:
                for tracker, publisher in pipelines:
                    tracker.expect(start, end, publish_results_only=False)
                    publisher.start_window(start, end, args.window)
                await asyncio.wait_for(
                    asyncio.gather(*(t.done.wait() for t, _ in pipelines)), args.timeout
                )

            await phase(0, args.warmup)
            pids = [p.pid for p in procs] + [prosody.pid or 0]
            before = [cpu_seconds(pid) for pid in pids]
            machine = machine_busy_seconds()[0]
            own = time.process_time()
            started = time.perf_counter()
            await phase(args.warmup, args.warmup + args.items)
            wall = time.perf_counter() - started
            spent = [cpu_seconds(pid) - b for pid, b in zip(pids, before, strict=True)]
            own = time.process_time() - own
            busy = machine_busy_seconds()[0] - machine
            total = args.items * shards
            per_item = 1e6 / total
            errors = sum(t.errors for t, _ in pipelines)
            return {
                "items_s": total / wall,
                "shards_us": sum(spent[:-1]) * per_item,
                "prosody_us": spent[-1] * per_item,
                "loadgen_us": own * per_item,
                "rest_us": max(0.0, busy - sum(spent) - own) * per_item,
                "errors": float(errors),
            }
        finally:
            await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
            for p in procs:
                p.stop()
            await asyncio.to_thread(drop_postgres_db, database)


async def main(args: argparse.Namespace) -> None:
    prosody = PrivateProsody(COMPONENTS, dict.fromkeys(USERS, PASSWORD), domain="localhost")
    await asyncio.to_thread(prosody.start)
    try:
        print(
            f"items/shard {args.items}, window {args.window}, publish batch "
            f"{args.publish_batch}, worker batch {args.batch}, {args.workers} workers/shard"
        )
        print("shards  items/s (runs)                 shards µs  prosody µs  loadgen µs  rest µs")
        for shards in args.shards:
            runs = [await one_run(args, prosody, shards, r) for r in range(args.runs)]
            rates = [r["items_s"] for r in runs]
            mid = sorted(runs, key=lambda r: r["items_s"])[len(runs) // 2]
            shown = ", ".join(f"{x:,.0f}" for x in rates)
            print(
                f"{shards:>6}  {statistics.median(rates):>7,.0f} ({shown}){'':>4}"
                f"{mid['shards_us']:>9.0f}  {mid['prosody_us']:>10.0f}  "
                f"{mid['loadgen_us']:>10.0f}  {mid['rest_us']:>7.0f}"
                + (f"  errors {mid['errors']:.0f}" if mid["errors"] else "")
            )
    finally:
        prosody.stop()


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shards", type=int, nargs="+", default=[1, 2])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--items", type=int, default=20000, help="measured items per shard")
    p.add_argument("--warmup", type=int, default=2000)
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--publish-batch", type=int, default=8)
    p.add_argument("--batch", type=int, default=8, help="items per notification and ack")
    p.add_argument("--workers", type=int, default=2, help="workers per shard")
    p.add_argument("--queue-requests", type=int, default=32)
    p.add_argument("--timeout", type=float, default=300.0)
    return p.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
