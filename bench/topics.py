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
2. **Filters.** A topic whose 5 bound queues' filters keep 10 % of the items (the
   `region` attribute takes 10 values; each filter wants one), workers acking what
   arrives, against an unbound topic: the publisher's rate (publishes answered per
   second). Target: within 10 %. Printed twice: with the workers acking in the same
   process (they share its one CPU and the commit batches with the publisher), and
   with no subscriber on the bound queues (the filtering and copying alone).

Run from the repository root:
    python bench/topics.py --items 4000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

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


async def single_queue(items: int, lanes: int) -> float:
    service = await new_service()
    try:
        await queue(service, "q")
        run = Run(service, "q", lanes)
        run.expected = items
        start = time.perf_counter()
        await run.publish_all(items)
        await run.done.wait()
        return run.acked / (time.perf_counter() - start)
    finally:
        await service.stop()


async def fan_out(items: int, lanes: int) -> tuple[float, float]:
    """(copies acked per second, topic publishes per second)."""
    service = await new_service()
    try:
        await service.create_node(OWNER, "topic", {})
        for k in range(QUEUES):
            await queue(service, f"q{k}", "topic")
        run = Run(service, "topic", lanes)
        run.expected = items * QUEUES
        start = time.perf_counter()
        await run.publish_all(items)
        await run.done.wait()
        elapsed = time.perf_counter() - start
        return run.acked / elapsed, items / elapsed
    finally:
        await service.stop()


async def publisher_rate(items: int, lanes: int, bound: bool, workers: int = WORKERS) -> float:
    service = await new_service()
    try:
        await service.create_node(OWNER, "topic", {})
        run = Run(service, "topic", lanes)
        if bound:
            for k in range(QUEUES):
                await queue(service, f"q{k}", "topic", f'attributes.region = "r{k}"', workers)
            run.expected = sum(1 for i in range(items) if i % REGIONS < QUEUES) if workers else 0
        seconds = await run.publish_all(items)
        if bound and workers:
            await run.done.wait()  # the workers finish (not part of the publisher's time)
        return items / seconds
    finally:
        await service.stop()


async def main(args: argparse.Namespace) -> None:
    print(f"memory store, in process; {args.items} items, {args.lanes} publish lanes")
    print(f"{QUEUES} bound queues x {WORKERS} workers, window {WINDOW}, acking at once")
    ones, copies, topics, unbound, filtered, idle = [], [], [], [], [], []
    for _ in range(args.rounds):  # interleaved, so machine noise hits both sides alike
        ones.append(await single_queue(args.items, args.lanes))
        c, t = await fan_out(args.items, args.lanes)
        copies.append(c)
        topics.append(t)
        unbound.append(await publisher_rate(args.items, args.lanes, False))
        filtered.append(await publisher_rate(args.items, args.lanes, True))
        idle.append(await publisher_rate(args.items, args.lanes, True, workers=0))
    one, copy, topic = max(ones), max(copies), max(topics)
    print(f"one queue, a publish per item:   {one:9,.0f} items/s acked")
    print(f"topic -> {QUEUES} bound queues:       {copy:9,.0f} items/s acked (copies)")
    print(f"                                 {topic:9,.0f} topic publishes/s")
    print(f"fan-out ratio: {copy / one:.0%} (target >= 60 %)")
    plain, kept = max(unbound), max(filtered)
    print(f"unbound topic, publisher:        {plain:9,.0f} publishes/s")
    print(f"5 queues keeping 10 %, acked:    {kept:9,.0f} publishes/s")
    print(f"publisher's rate: {kept / plain:.0%} of unbound (target >= 90 %)")
    # The same filters with nobody acking: the cost of filtering and copying alone,
    # without the workers' acks sharing the process and the commit batches.
    alone = max(idle)
    print(f"5 queues keeping 10 %, no worker: {alone:8,.0f} publishes/s ({alone / plain:.0%})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=4000)
    parser.add_argument("--lanes", type=int, default=16, help="publishes outstanding")
    parser.add_argument("--rounds", type=int, default=3, help="best of, interleaved")
    asyncio.run(main(parser.parse_args()))
