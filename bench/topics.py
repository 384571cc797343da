"""Topics with bound queues against plain queues: issue 21's two targets, in one run.

What this measures: the service level, in process, over the **memory store** (no
XMPP, no database): `PubSubService.publish` and `retract` calls as tasks, the way
`service_throughput.py` drives them. It says what fan-out and filters cost the core
and the in-memory state; the database's and the XMPP glue's costs come on top and are
measured by the other benchmarks.

1. **Fan-out.** One queue with 4 workers (window 8, acking each item at once), one
   publish per item, against a topic with 5 bound queues of 4 such workers each (a
   publish to the topic copies the item into all 5). Reported: items delivered and
   acked per second in each case (a copy counts as an item). Target: the topic's at
   least 60 % of the single queue's.
2. **Filters.** The publisher's rate (publishes answered per second) on a topic
   whose bound queues' filters drop 90 % of its items, against an unbound topic.
   Target: within 10 %. The `region` attribute takes 10 values, so a filter that
   wants one region keeps 10 % of the items. Three shapes, each with and without
   workers acking in the same process (they share its one CPU and the commit
   batches with the publisher):
   - **1 queue keeping 10 %**: the topic's items are 90 % dropped (0.1 copies per
     publish);
   - **5 queues keeping 10 % each** (each a different region): every filter drops
     90 %, but together they keep half the items (0.5 copies per publish, each a
     full queue publish);
   - **5 queues keeping nothing**: what a non-matching subscription costs alone.

Before/after: `--compare-src DIR` (another checkout, e.g. `git archive HEAD~1 | tar -x
-C /tmp/prev`) runs each round in a child process, alternating this checkout and DIR
(this script, its package imported from the checkout named by `XQ_BENCH_SRC`), so
both sides meet the machine's load of the moment. The other load on the machine
during the run (busy cores not used by the benchmark) is printed at the end.

Run from the repository root:
    python bench/topics.py --items 4000
    python bench/topics.py --items 4000 --rounds 7 --compare-src /tmp/prev
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from processes import machine_busy_seconds

REPO = Path(__file__).resolve().parent.parent
SRC = Path(os.environ.get("XQ_BENCH_SRC", REPO))  # the checkout whose package is measured
sys.path.insert(0, str(SRC))

from xmpp_queue.app.core_inputs import new_id, utc_now  # noqa: E402
from xmpp_queue.core.effects import ItemNotice  # noqa: E402
from xmpp_queue.core.limits import Limits  # noqa: E402
from xmpp_queue.core.model import Actor, Affiliation  # noqa: E402
from xmpp_queue.core.service import PubSubService, ServiceSettings  # noqa: E402
from xmpp_queue.core.service_access import ServiceAccess  # noqa: E402
from xmpp_queue.storage.store import StateStore  # noqa: E402

OWNER = Actor("owner@localhost/load")
QUEUES = 5
WORKERS = 4
WINDOW = 8
REGIONS = 10


class Run:
    """A windowed publisher and workers that ack every delivered item at once."""

    def __init__(self, service: PubSubService, node: str, lanes: int) -> None:
        self.service, self.node, self.lanes = service, node, lanes
        self.acked = 0
        self.errors = 0
        self.expected = 0
        self.done = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def publish_all(self, count: int) -> float:
        """Publish *count* items; returns the seconds until the last was answered."""
        todo = iter(range(count))
        start = time.perf_counter()

        async def lane() -> None:
            for i in todo:
                try:
                    out = await self.service.publish(
                        OWNER,
                        self.node,
                        f"i{i}",
                        "<job/>",
                        6,
                        attributes={"region": f"r{i % REGIONS}"},
                    )
                except Exception:
                    self.errors += 1
                    continue
                self.effects(out.effects)

        await asyncio.gather(*(lane() for _ in range(self.lanes)))
        return time.perf_counter() - start

    def effects(self, effects: tuple[Any, ...]) -> None:
        for e in effects:
            if isinstance(e, ItemNotice):
                for item in e.items:
                    self._spawn(self._ack(Actor(e.to), e.node, item.item_id))

    async def _ack(self, worker: Actor, node: str, item_id: str) -> None:
        try:
            out = await self.service.retract(worker, node, item_id)
        except Exception:
            self.errors += 1
            return
        self.acked += 1
        if self.acked >= self.expected:
            self.done.set()
        self.effects(out.effects)


async def new_service() -> PubSubService:
    settings = ServiceSettings(
        access=ServiceAccess.for_domain("localhost"), limits=Limits(publish_rate=0)
    )
    service = PubSubService(StateStore.in_memory(), utc_now, new_id, settings)
    await service.start()
    return service


async def queue(
    service: PubSubService, node: str, topic: str = "", filt: str = "", workers: int = WORKERS
) -> None:
    form = {"pubsub#queue": ["1"]}
    if topic:
        form |= {"pubsub#queue_topic": [topic], "pubsub#queue_filter": [filt]}
    await service.create_node(OWNER, node, form)
    actors = [Actor(f"{node}-w{k}@localhost/load") for k in range(workers)]
    await service.set_node_affiliations(OWNER, node, [(w.bare, Affiliation.MEMBER) for w in actors])
    for w in actors:
        await service.subscribe(w, node, w.jid, {"pubsub#queue_requests": [str(WINDOW)]})


Rates = tuple[float, float]
"""(per wall-clock second, per CPU second of this process)."""


class Span:
    """Wall-clock and CPU time of one measured stretch. The benchmark is one process on
    one CPU; on a shared machine other work stretches its wall-clock time but not its
    CPU time, so the ratios are read per CPU second (wall-clock figures beside)."""

    def __init__(self) -> None:
        gc.collect()
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def rates(self, count: float) -> Rates:
        wall = time.perf_counter() - self._wall
        cpu = time.process_time() - self._cpu
        return count / wall, count / max(cpu, 1e-9)


async def single_queue(items: int, lanes: int) -> Rates:
    """Items acked per second: one queue, a publish per item."""
    service = await new_service()
    try:
        await queue(service, "q")
        run = Run(service, "q", lanes)
        run.expected = items
        span = Span()
        await run.publish_all(items)
        await run.done.wait()
        return span.rates(run.acked)
    finally:
        await service.stop()


async def fan_out(items: int, lanes: int) -> Rates:
    """Copies acked per second: a topic with 5 bound queues."""
    service = await new_service()
    try:
        await service.create_node(OWNER, "topic", {})
        for k in range(QUEUES):
            await queue(service, f"q{k}", "topic")
        run = Run(service, "topic", lanes)
        run.expected = items * QUEUES
        span = Span()
        await run.publish_all(items)
        await run.done.wait()
        return span.rates(run.acked)
    finally:
        await service.stop()


SHAPES = {
    "1 queue keeping 10 %": ('attributes.region = "r0"',),
    "5 queues keeping 10 % each": tuple(f'attributes.region = "r{k}"' for k in range(QUEUES)),
    "5 queues keeping nothing": tuple(f'attributes.region = "x{k}"' for k in range(QUEUES)),
}
"""The bound queues' filters of each filtered shape."""


def kept(filters: tuple[str, ...], items: int) -> int:
    """How many copies the filters keep of *items* publishes (region r{i % 10})."""
    wanted = [f.split('"')[1] for f in filters]
    return sum(sum(1 for w in wanted if w == f"r{i % REGIONS}") for i in range(items))


async def publisher_rate(
    items: int, lanes: int, filters: tuple[str, ...] = (), workers: int = WORKERS
) -> Rates:
    """Publishes answered per second on a topic with a bound queue per filter (the
    workers' acks that happen meanwhile share the process, as in the component)."""
    service = await new_service()
    try:
        await service.create_node(OWNER, "topic", {})
        run = Run(service, "topic", lanes)
        for k, filt in enumerate(filters):
            await queue(service, f"q{k}", "topic", filt, workers)
        run.expected = kept(filters, items) if workers else 0
        span = Span()
        await run.publish_all(items)
        rates = span.rates(items)
        if run.expected:
            await run.done.wait()  # the workers finish (not part of the publisher's time)
        return rates
    finally:
        await service.stop()


async def fan_out_cost(filters: tuple[str, ...], calls: int = 20000) -> Rates:
    """CPU µs of one fan-out (``Topics.fan_out``: finding the topic's bound queues and
    calling their filters) for an item none of them keeps, alone: the part of a
    publish that filtering adds, without the rest of the publish's noise. Best of
    5 stretches of *calls* (the figure is given twice, to fit the rounds' table)."""
    from xmpp_queue.core.batcher import Work
    from xmpp_queue.core.model import NewItem

    service = await new_service()
    try:
        await service.create_node(OWNER, "topic", {})
        for k, filt in enumerate(filters):
            await queue(service, f"q{k}", "topic", filt, 0)
        item = NewItem("i", "<job/>", 6, {"region": "r3"})
        fan_out = service._topics.fan_out
        fastest = float("inf")
        async with service.store.transaction() as tx:
            topic = await tx.nodes.get("topic")
            assert topic is not None
            work = Work(tx=tx, now=utc_now())
            for _ in range(5):
                start = time.process_time()
                for _ in range(calls):
                    await fan_out(work, topic, "i", item, OWNER.jid)
                fastest = min(fastest, (time.process_time() - start) / calls * 1e6)
        return fastest, fastest
    finally:
        await service.stop()


COSTS = {
    "fan-out µs, no bound queue": (),
    "fan-out µs, 5 queues keeping nothing": SHAPES["5 queues keeping nothing"],
}
"""The fan-out cost cases (``fan_out_cost``)."""


def best(runs: list[Rates]) -> Rates:
    """The fastest round of a case, on each clock: other work on the machine only ever
    slows a round (stretching wall-clock time, and CPU time through shared caches and
    cores), so the best round is the least disturbed one."""
    return max(r[0] for r in runs), max(r[1] for r in runs)


ONE, COPIES, UNBOUND = "one queue", "fan-out", "unbound"


def shaped_case(name: str, workers: int) -> str:
    who = f"{WORKERS} workers per queue acking" if workers else "no worker"
    return f"{name}, {who}"


async def one_round(items: int, lanes: int) -> dict[str, Rates]:
    """Every case once, in this order (the same in every round)."""
    out = {
        ONE: await single_queue(items, lanes),
        COPIES: await fan_out(items, lanes),
        UNBOUND: await publisher_rate(items, lanes),
    }
    for name, filters in SHAPES.items():
        for workers in (WORKERS, 0):
            out[shaped_case(name, workers)] = await publisher_rate(items, lanes, filters, workers)
    for name, filters in COSTS.items():
        out[name] = await fan_out_cost(filters)
    return out


def child_round(src: Path, args: argparse.Namespace) -> dict[str, Rates]:
    """One round in a child process measuring the package of checkout *src*."""
    argv = [sys.executable, __file__, "--items", str(args.items), "--lanes", str(args.lanes)]
    env = os.environ | {"XQ_BENCH_SRC": str(src)}
    done = subprocess.run(
        [*argv, "--rounds", "1", "--json"], env=env, capture_output=True, text=True, check=True
    )
    rounds: dict[str, list[Rates]] = json.loads(done.stdout.splitlines()[-1])
    return {case: tuple(runs[0]) for case, runs in rounds.items()}  # type: ignore[misc]


def report(label: str, runs: dict[str, list[Rates]]) -> None:
    def line(case: str, r: Rates, unit: str, base: Rates | None = None) -> None:
        share = f"  ({r[0] / base[0]:.0%} / {r[1] / base[1]:.0%})" if base else ""
        print(f"  {case:<52} {r[0]:9,.0f} / {r[1]:9,.0f} {unit}{share}")

    print(label)
    one, copy = best(runs[ONE]), best(runs[COPIES])
    line("one queue, a publish per item", one, "items/s acked")
    line(f"topic -> {QUEUES} bound queues (copies)", copy, "items/s acked", one)
    print("  fan-out ratio: the share above (target >= 60 %)")
    plain = best(runs[UNBOUND])
    line("unbound topic, the publisher", plain, "publishes/s")
    print("  filtered topics, the publisher's rate against unbound (target >= 90 %):")
    for case, rates in runs.items():
        if case not in (ONE, COPIES, UNBOUND, *COSTS):
            line(case, best(rates), "publishes/s", plain)
    print("  one fan-out of an item no queue keeps, CPU µs (least of the rounds):")
    for case in COSTS:
        print(f"  {case:<52} {min(r[1] for r in runs[case]):9.2f}")


async def main(args: argparse.Namespace) -> None:
    sides = {"this checkout": SRC}
    if args.compare_src is not None:
        sides["previous (--compare-src)"] = args.compare_src.resolve()
    runs: dict[str, dict[str, list[Rates]]] = {label: {} for label in sides}
    busy0, _ = machine_busy_seconds()
    wall0, own0 = time.perf_counter(), own_cpu()
    for _ in range(args.rounds):  # interleaved, so machine noise hits every case alike
        for label, src in sides.items():
            if args.compare_src is None:
                got = await one_round(args.items, args.lanes)
            else:
                got = await asyncio.to_thread(child_round, src, args)
            for case, rates in got.items():
                runs[label].setdefault(case, []).append(rates)
    if args.json:
        print(json.dumps(runs["this checkout"]))
        return
    busy1, _ = machine_busy_seconds()
    wall = time.perf_counter() - wall0
    others = max(0.0, (busy1 - busy0) - (own_cpu() - own0)) / wall
    print(f"memory store, in process; {args.items} items, {args.lanes} publish lanes")
    print(f"{QUEUES} bound queues x {WORKERS} workers, window {WINDOW}, acking at once")
    print(f"best of {args.rounds} interleaved rounds; per wall-clock second / per CPU second")
    for label, by_case in runs.items():
        report(f"{label} ({sides[label]}):", by_case)
    print(f"other load on the machine during the run: {others:.2f} cores (of {os.cpu_count()})")


def own_cpu() -> float:
    """CPU seconds of this process and its finished children (the rounds)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=4000)
    parser.add_argument("--lanes", type=int, default=16, help="publishes outstanding")
    parser.add_argument("--rounds", type=int, default=5, help="best of, interleaved")
    parser.add_argument(
        "--compare-src", type=Path, default=None, help="another checkout, measured alternately"
    )
    parser.add_argument("--json", action="store_true", help="print the rounds as JSON (a child)")
    asyncio.run(main(parser.parse_args()))
