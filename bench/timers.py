"""What the deadline timer costs per tick as the number of idle queues grows.

Why: a tick runs inside the one commit batcher, so every stanza waits behind it. It
used to settle every node (each queue dispatched on every tick): 23-77 ms per tick
with 10,000 idle queues. A tick now settles only the nodes the store's time indexes
name as due (issue 22, point 2). This builds N queues in one process on the memory
store, each with one worker subscribed and nothing waiting (idle), plus one busy queue
whose lock times out on every tick, then times:

- ``due only``: ``service.sweep()`` as the timer runs it (the busy queue's lock is due);
- ``every node``: ``service.sweep(every_node=True)``, the catch-up after a failed tick,
  which settles every node as every tick used to.

Each figure is the median (and p90) of --ticks ticks, in milliseconds, on the clock a
fake that moves 1 s per tick. Run from the repository root:
    python bench/timers.py                            # 10, 1,000, 10,000, 100,000 nodes
    python bench/timers.py --nodes 10000 --ticks 50
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from xmpp_queue.core.limits import Limits  # noqa: E402
from xmpp_queue.core.model import Actor  # noqa: E402
from xmpp_queue.core.service import PubSubService, ServiceSettings  # noqa: E402
from xmpp_queue.core.service_access import ServiceAccess  # noqa: E402
from xmpp_queue.storage.store import StateStore  # noqa: E402

ADMIN = Actor("admin@localhost/bench")
QUEUE = {
    "pubsub#queue": ["1"],
    "pubsub#access_model": ["open"],
    "pubsub#queue_lock_timeout": ["1"],
    "pubsub#queue_retry_delay": ["0"],
    "pubsub#queue_max_deliveries": ["0"],  # the busy lock expires forever
}
SUBSCRIBE = {"pubsub#queue_requests": ["1"]}
CHUNK = 500  # operations in flight while building (they share commits)


def worker(node: str) -> Actor:
    return Actor(f"{node}-worker@localhost/w")


class StepClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


async def build(service: PubSubService, nodes: int) -> None:
    """*nodes* idle queues with a worker each, and the busy queue ``busy``."""
    names = [f"q{n}" for n in range(nodes)]
    for start in range(0, nodes, CHUNK):
        chunk = names[start : start + CHUNK]
        await asyncio.gather(*(service.create_node(ADMIN, n, QUEUE) for n in chunk))
        # one worker per queue (one worker on 100,000 queues is not what is measured)
        await asyncio.gather(
            *(service.subscribe(worker(n), n, worker(n).jid, SUBSCRIBE) for n in chunk)
        )
    await service.create_node(ADMIN, "busy", QUEUE)
    await service.subscribe(worker("busy"), "busy", worker("busy").jid, SUBSCRIBE)
    await service.publish(ADMIN, "busy", "job", "<job/>", 6)


async def timed(service: PubSubService, clock: StepClock, ticks: int, every: bool) -> list[float]:
    took = []
    for _ in range(ticks):
        clock.now += timedelta(seconds=1)  # the busy queue's lock is due each time
        t0 = time.perf_counter()
        outcome = await service.sweep(every_node=every)
        took.append((time.perf_counter() - t0) * 1000)
        assert outcome.value.expired_locks == 1, outcome.value
    return took


def summary(ms: list[float]) -> str:
    ordered = sorted(ms)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return f"median {statistics.median(ms):8.3f} ms  p90 {p90:8.3f} ms"


async def run(nodes: int, ticks: int) -> None:
    clock = StepClock()
    settings = ServiceSettings(
        admins=frozenset({ADMIN.bare}),
        access=ServiceAccess.for_domain("localhost"),
        limits=Limits(publish_rate=0),
    )
    service = PubSubService(StateStore.in_memory(), clock, lambda: "x", settings)
    await service.start()
    try:
        t0 = time.perf_counter()
        await build(service, nodes)
        built = time.perf_counter() - t0
        gc.collect()
        await timed(service, clock, 3, False)  # warm up
        due = await timed(service, clock, ticks, False)
        every = await timed(service, clock, max(3, ticks // 5), True)
        print(
            f"nodes={nodes:>7,} (built in {built:5.1f} s)\n"
            f"  due only  : {summary(due)}\n"
            f"  every node: {summary(every)}",
            flush=True,
        )
    finally:
        await service.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, nargs="+", default=[10, 1_000, 10_000, 100_000])
    p.add_argument("--ticks", type=int, default=30)
    args = p.parse_args()
    print(f"python {sys.version.split()[0]}, memory store, {args.ticks} ticks per figure")
    for n in args.nodes:
        asyncio.run(run(n, args.ticks))


if __name__ == "__main__":
    main()
