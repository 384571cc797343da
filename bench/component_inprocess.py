"""The whole component in one process, no XMPP server: its own CPU per lone operation.

Why: issue 26's latency gap is the component's own work per lone operation, and the
wire benchmark (`queue_throughput.py`) reads it through Prosody, two load clients and a
shared machine, where rounds of the same code differ by 10-20 %. Here the real
`QueueComponent` (slixmpp's stream parser, the request router, the core, the store and
its backend, the text renderers, the coalescing transport) runs over a transport that
records what it writes, and the script plays Prosody: it feeds the stream the bytes of a
publish, waits for the notification the component writes, feeds the worker's ack and
waits for its answer. So CPU per item is the component's alone, with the socket's system
calls and the server's hops left out, and a change of a few percent shows.

`--burst K` sends K publishes in one read, then the K acks in one read (batches of K);
the default 1 is the lone-operation path the 500/s latency target runs. `--window W`
keeps W publishes outstanding instead and acks each notification as it is written, like
the wire benchmark's window mode (`--batch B`: B items per publish and per notification,
acked with one retract; `--commit-ops N`: the service's cap on operations per commit).
Everything the script sends in one go is one read, so a window's publishes meet in large
batches, larger than through a server that spreads them over many reads. `--store memory`
is the same flow with no database: what the XMPP glue and the core cost without commits.
`--compare-src DIR` runs a checkout of another commit too, a fresh process per round,
interleaved (the script itself runs from this checkout: `--src` only puts DIR first on
the import path). `--profile` prints a cProfile of one run (its times are inflated by the
profiler; read call counts and shares).

Run from the repository root:
    python bench/component_inprocess.py --store sqlite --repeat 3
    python bench/component_inprocess.py --store sqlite --compare-src /tmp/prev --repeat 4
    python bench/component_inprocess.py --store memory --profile
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DOMAIN = "queue.example.org"
PUBLISHER = "pub@example.org/load"
WORKER = "worker@example.org/load"
PUBSUB = "http://jabber.org/protocol/pubsub"
OWNER = "http://jabber.org/protocol/pubsub#owner"
PAYLOAD = "<job xmlns='urn:example:bench'>{}</job>"  # with --payload-text characters


class Recorder:
    """The transport asyncio would hand the component: keeps nothing, wakes the
    driver when the stanza it waits for is written."""

    def __init__(self) -> None:
        self.want: tuple[bytes, ...] = ()
        self.seen: asyncio.Future[None] | None = None
        self.watch: Callable[[bytes], None] | None = None  # the windowed flow's reader

    def expect(self, marker: str) -> asyncio.Future[None]:
        """Wait for *marker* (written with ' quotes) in either quote style."""
        self.want = (marker.encode(), marker.replace("'", '"').encode())
        self.seen = asyncio.get_running_loop().create_future()
        return self.seen

    def write(self, data: bytes) -> None:
        if self.watch is not None:
            self.watch(data)
        if self.seen is not None and any(w in data for w in self.want):
            self.want = ()
            self.seen.set_result(None)

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


def iq(kind: str, sender: str, iq_id: str, body: str, ns: str = PUBSUB) -> str:
    return (
        f"<iq type='{kind}' id='{iq_id}' from='{sender}' to='{DOMAIN}'>"
        f"<pubsub xmlns='{ns}'>{body}</pubsub></iq>"
    )


PAYLOAD_TEXT = ["x" * 100]  # set from --payload-text in the measuring process


def publish(*ids: int) -> str:
    """One publish of the items *ids* (several: XEP-0060 §13.11's batch)."""
    payload = PAYLOAD.format(PAYLOAD_TEXT[0])
    items = "".join(f"<item id='i{i}'>{payload}</item>" for i in ids)
    return iq("set", PUBLISHER, f"p{ids[0]}", f"<publish node='jobs'>{items}</publish>")


def ack(*ids: int) -> str:
    items = "".join(f"<item id='i{i}'/>" for i in ids)
    return iq("set", WORKER, f"r{ids[0]}", f"<retract node='jobs'>{items}</retract>")


class Driver:
    """Plays the XMPP server's side of the component's stream."""

    def __init__(self, comp: Any, wire: Recorder) -> None:
        self.comp, self.wire = comp, wire

    async def call(self, stanza: str, marker: str) -> None:
        seen = self.wire.expect(marker)
        self.comp.data_received(stanza)
        await asyncio.wait_for(seen, 10)

    async def set_up(self, max_batch: int = 1) -> None:
        from tests.kit.stanzas import submit  # the protocol tests' data forms

        config = submit("http://jabber.org/protocol/pubsub#node_config", pubsub__queue="1")
        await self.call(
            iq("set", PUBLISHER, "c1", f"<create node='jobs'/><configure>{config}</configure>"),
            "id='c1'",
        )
        members = "<affiliation jid='worker@example.org' affiliation='member'/>"
        await self.call(
            iq(
                "set", PUBLISHER, "a1", f"<affiliations node='jobs'>{members}</affiliations>", OWNER
            ),
            "id='a1'",
        )
        options = submit(
            "http://jabber.org/protocol/pubsub#subscribe_options",
            pubsub__queue_requests="1000",
            pubsub__queue_max_batch=str(max_batch),
        )
        await self.call(
            iq(
                "set",
                WORKER,
                "s1",
                f"<subscribe node='jobs' jid='{WORKER}'/><options>{options}</options>",
            ),
            "id='s1'",
        )

    async def items(self, first: int, count: int, burst: int) -> None:
        for start in range(first, first + count, burst):
            ids = range(start, min(start + burst, first + count))
            await self.call("".join(publish(i) for i in ids), f"<item id='i{ids[-1]}'>")
            await self.call("".join(ack(i) for i in ids), f"id='r{ids[-1]}'")


NOTIFIED = re.compile(rb"<message[^>]*>.*?</message>", re.S)
ITEM = re.compile(rb"<item id=['\"]i(\d+)['\"]")
ACKED = re.compile(rb"<retract id=")
PUBLISHED = re.compile(rb"<iq[^>]*\bid=['\"]p\d+['\"]")


class Window:
    """The wire benchmark's window mode in one process: *window* publishes of *batch*
    items outstanding, every notification acked at once with one retract (the acks of
    one write in one read); the worker takes up to *batch* items per notification."""

    def __init__(self, driver: Driver, window: int, batch: int) -> None:
        self.driver, self.window, self.batch = driver, window, batch
        self.loop = asyncio.get_running_loop()
        self.outstanding = self.next = self.acked = self.target = 0
        self.done: asyncio.Future[None] = self.loop.create_future()

    def seen(self, data: bytes) -> None:
        messages = NOTIFIED.findall(data)
        self.outstanding -= len(PUBLISHED.findall(data))
        self.acked += sum(len(ACKED.findall(m)) for m in messages)
        notified = [[int(i) for i in ITEM.findall(m)] for m in messages]
        acks = "".join(ack(*ids) for ids in notified if ids)
        if acks:
            self.loop.call_soon(self.driver.comp.data_received, acks)
        if self.acked >= self.target and not self.done.done():
            self.done.set_result(None)
        else:
            self.loop.call_soon(self.top_up)

    def top_up(self) -> None:
        publishes = []
        while self.outstanding < self.window and self.next < self.target:
            ids = range(self.next, min(self.next + self.batch, self.target))
            publishes.append(publish(*ids))
            self.next += len(ids)
            self.outstanding += 1
        if publishes:
            self.driver.comp.data_received("".join(publishes))

    async def items(self, count: int) -> None:
        self.target += count
        self.done = self.loop.create_future()
        self.driver.wire.watch = self.seen
        self.top_up()
        await asyncio.wait_for(self.done, 120)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from service_throughput import open_store

    from xmpp_queue.app.core_inputs import new_id, utc_now
    from xmpp_queue.core.limits import Limits
    from xmpp_queue.core.service import PubSubService, ServiceSettings
    from xmpp_queue.core.service_access import ServiceAccess
    from xmpp_queue.xmpp.component import QueueComponent

    batches = [0]
    with tempfile.TemporaryDirectory(prefix="xq-inprocess-") as tmp:
        store = await open_store(args.store, Path(tmp))  # service_throughput's
        settings = ServiceSettings(
            access=ServiceAccess.for_domain("example.org"),
            limits=Limits(publish_rate=0),
            max_batch=args.commit_ops,
        )
        service = PubSubService(store, utc_now, new_id, settings)
        service.on_batch_committed(lambda n: batches.__setitem__(0, batches[0] + 1))
        await service.start()
        comp = QueueComponent(DOMAIN, "secret", "127.0.0.1", 5347, service)
        wire = Recorder()
        comp.init_plugins()
        drain = asyncio.ensure_future(comp.run_filters())
        comp.connection_made(wire)
        comp.data_received(
            "<stream:stream xmlns='jabber:component:accept' "
            f"xmlns:stream='http://etherx.jabber.org/streams' from='{DOMAIN}' id='s'>"
        )
        comp.data_received("<handshake/>")
        for _ in range(20):
            await asyncio.sleep(0)
        driver = Driver(comp, wire)
        try:
            await driver.set_up(args.batch)
            flow = Window(driver, args.window, args.batch) if args.window else None
            if flow is not None:
                await flow.items(args.warmup)
            else:
                await driver.items(0, args.warmup, args.burst)
            profiler = cProfile.Profile() if args.profile else None
            usage0, wall0, batches0 = (
                resource.getrusage(resource.RUSAGE_SELF),
                time.perf_counter(),
                batches[0],
            )
            if profiler:
                profiler.enable()
            if flow is not None:
                await flow.items(args.items)
            else:
                await driver.items(args.warmup, args.items, args.burst)
            if profiler:
                profiler.disable()
            wall = time.perf_counter() - wall0
            usage = resource.getrusage(resource.RUSAGE_SELF)
            commits = batches[0] - batches0
        finally:
            drain.cancel()
            await service.stop()
            await store.close()
            if args.store == "postgresql":
                from processes import drop_postgres_db

                await asyncio.to_thread(drop_postgres_db, "xq_bench")
    n = args.items
    result = {
        "user_us": (usage.ru_utime - usage0.ru_utime) / n * 1e6,
        "sys_us": (usage.ru_stime - usage0.ru_stime) / n * 1e6,
        "wall_us": wall / n * 1e6,
        "commits": commits / n,
        "items_s": n / wall,
    }
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(args.top)
        result["profile"] = out.getvalue().split("\n\n", 1)[-1].rstrip()
    return result


def one_round(args: argparse.Namespace, src: Path | None) -> dict[str, Any]:
    """A run in a fresh process, of this checkout or of *src*."""
    cmd = [sys.executable, __file__, "--child", "--store", args.store, "--items", str(args.items)]
    cmd += ["--warmup", str(args.warmup), "--burst", str(args.burst)]
    cmd += ["--window", str(args.window), "--batch", str(args.batch)]
    cmd += ["--commit-ops", str(args.commit_ops), "--payload-text", str(args.payload_text)]
    if src is not None:
        cmd += ["--src", str(src)]
    if args.profile:
        cmd += ["--profile", "--top", str(args.top)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"run failed ({' '.join(cmd)}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    expected = (src or REPO).resolve()
    if Path(result["tree"]) != expected:
        raise SystemExit(f"the run measured {result['tree']}, not {expected}")
    return result


def show(label: str, runs: list[dict[str, Any]]) -> None:
    def median(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    cpu = [r["user_us"] + r["sys_us"] for r in runs]
    print(
        f"{label:<18} CPU µs/item {' / '.join(f'{c:,.0f}' for c in cpu)}"
        f" (median {statistics.median(cpu):,.0f}; user {median('user_us'):,.0f},"
        f" system {median('sys_us'):,.0f}), wall µs/item {median('wall_us'):,.0f},"
        f" commits/item {median('commits'):.3g}, items/s {median('items_s'):,.0f}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", choices=("memory", "sqlite", "postgresql"), default="sqlite")
    p.add_argument("--items", type=int, default=3000)
    p.add_argument("--warmup", type=int, default=300)
    p.add_argument("--burst", type=int, default=1, help="publishes (then acks) per read")
    p.add_argument("--window", type=int, default=0, help="publishes outstanding (0: --burst)")
    p.add_argument(
        "--batch", type=int, default=1, help="with --window: items per publish and notification"
    )
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--payload-text", type=int, default=100, help="characters of each payload")
    p.add_argument(
        "--commit-ops", type=int, default=128, help="most operations per commit (max_batch)"
    )
    p.add_argument("--compare-src", type=Path, help="a checkout of another commit")
    p.add_argument("--profile", action="store_true", help="cProfile one run")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--src", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        PAYLOAD_TEXT[0] = "x" * args.payload_text
        tree = args.src or REPO
        sys.path[:0] = [str(tree), str(REPO / "bench")]
        # Bind the package to *tree* now: the bench modules imported later put this
        # checkout first on the path, and would otherwise load its copy instead.
        import xmpp_queue

        result = asyncio.run(run(args))
        result["tree"] = str(Path(xmpp_queue.__file__).resolve().parent.parent)
        print(json.dumps(result))
        return
    if args.profile:
        print(one_round(args, args.compare_src)["profile"])
        return
    print(
        f"store={args.store} items={args.items} burst={args.burst} window={args.window}"
        f" batch={args.batch} python={sys.version.split()[0]}"
    )
    ours: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        ours.append(one_round(args, None))
        if args.compare_src is not None:
            theirs.append(one_round(args, args.compare_src))
    show("this checkout", ours)
    if theirs:
        show("compared", theirs)


if __name__ == "__main__":
    main()
