"""The queue's core and storage alone: publish → dispatch → ack, no XMPP, in one process.

Why: `queue_throughput.py` measures the component as users run it, behind Prosody. When
that is slow, this says how much of the cost is the core plus storage (PubSubService
over the store, on SQLite, PostgreSQL or no database) and how much is the XMPP glue:
the same flow, one publisher task keeping a window of `publish` calls outstanding and workers that
`retract` every item of an ItemNotice effect at once, each call its own task (as
slixmpp runs each stanza's handler). `--profile` runs it under cProfile and prints the
functions with the most own and cumulative time.

Run from the repository root:
    python bench/service_throughput.py --store sqlite --items 3000
    python bench/service_throughput.py --store memory --profile
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import sys
import tempfile
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
from xmpp_queue.core.ports import Store  # noqa: E402
from xmpp_queue.core.service import PubSubService, ServiceSettings  # noqa: E402
from xmpp_queue.core.service_access import ServiceAccess  # noqa: E402

NODE = "bench-queue"
PUBLISHER = Actor("publisher@localhost/load")
QUEUE_FORM = {
    "FORM_TYPE": ["http://jabber.org/protocol/pubsub#node_config"],
    "pubsub#queue": ["1"],
}


async def open_store(kind: str, workdir: Path) -> Store:
    """The store `xmpp_queue.app` runs, over the backend *kind*."""
    from xmpp_queue.storage import migrations
    from xmpp_queue.storage.store import StateStore

    if kind == "memory":
        return StateStore.in_memory()

    if kind == "sqlite":
        url = f"sqlite:///{workdir / 'queue.db'}"
    else:
        from processes import recreate_postgres_db

        await asyncio.to_thread(recreate_postgres_db, "xq_bench")
        url = "postgresql://postgres@127.0.0.1:5432/xq_bench"
    await migrations.upgrade_async(url)
    return await StateStore.open(url)


class Flow:
    """The windowed publisher and the acking workers, as tasks over the service."""

    def __init__(self, service: PubSubService, workers: list[Actor], window: int) -> None:
        self.service, self.workers, self.window = service, workers, window
        self.sent: dict[str, float] = {}
        self.delivered: dict[str, float] = {}
        self.acked = 0
        self.errors = 0
        self.done = asyncio.Event()
        self._target = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._by_jid = {w.bare: w for w in workers} | {w.jid: w for w in workers}

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def run(self, first: int, count: int) -> None:
        self._target = self.acked + count
        self.done = asyncio.Event()
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(first, first + count):
            queue.put_nowait(i)

        async def lane() -> None:
            while not queue.empty():
                await self._publish(f"i{queue.get_nowait()}")

        for _ in range(self.window):
            self._spawn(lane())
        await self.done.wait()

    async def _publish(self, item_id: str) -> None:
        self.sent[item_id] = time.perf_counter()
        try:
            outcome = await self.service.publish(PUBLISHER, NODE, item_id, "<job/>", 6)
        except Exception:
            self.errors += 1
            return
        self._effects(outcome.effects)

    def _effects(self, effects: tuple[Any, ...]) -> None:
        now = time.perf_counter()
        for effect in effects:
            if isinstance(effect, ItemNotice):
                worker = self._by_jid[effect.to]
                for item in effect.items:
                    self.delivered.setdefault(item.item_id, now)
                    self._spawn(self._ack(worker, item.item_id))

    async def _ack(self, worker: Actor, item_id: str) -> None:
        try:
            outcome = await self.service.retract(worker, NODE, item_id)
        except Exception:
            self.errors += 1
            return
        self.acked += 1
        if self.acked >= self._target:
            self.done.set()
        self._effects(outcome.effects)


async def bench(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="xq-service-bench-") as tmp:
        store = await open_store(args.store, Path(tmp))
        # The service's capacity is measured: the per-JID publish rate limit is off.
        settings = ServiceSettings(
            access=ServiceAccess.for_domain("localhost"), limits=Limits(publish_rate=0)
        )
        service = PubSubService(store, utc_now, new_id, settings)
        await service.start()
        try:
            await service.create_node(PUBLISHER, NODE, QUEUE_FORM)
            workers = [Actor(f"worker{k}@localhost/load") for k in range(args.workers)]
            # New queues are whitelisted: the owner makes the workers members.
            members = [(w.bare, Affiliation.MEMBER) for w in workers]
            await service.set_node_affiliations(PUBLISHER, NODE, members)
            for w in workers:
                options = {
                    "FORM_TYPE": ["http://jabber.org/protocol/pubsub#subscribe_options"],
                    "pubsub#queue_requests": [str(args.queue_requests)],
                }
                await service.subscribe(w, NODE, w.bare, options)
            flow = Flow(service, workers, args.window)
            await flow.run(0, args.warmup)
            profiler = cProfile.Profile() if args.profile else None
            cpu0, wall0 = time.process_time(), time.perf_counter()
            if profiler:
                profiler.enable()
            await asyncio.wait_for(flow.run(args.warmup, args.items), args.timeout)
            if profiler:
                profiler.disable()
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        finally:
            await service.stop()
            await store.close()
            if args.store == "postgresql":
                from processes import drop_postgres_db

                await asyncio.to_thread(drop_postgres_db, "xq_bench")
    lat = sorted(
        flow.delivered[k] - flow.sent[k] for k in flow.delivered if int(k[1:]) >= args.warmup
    )
    p50 = lat[len(lat) // 2] * 1e3 if lat else 0.0
    p99 = lat[int(len(lat) * 0.99)] * 1e3 if lat else 0.0
    print(
        f"store={args.store} items={args.items} window={args.window} "
        f"workers={args.workers}x{args.queue_requests}: {args.items / wall:.0f} items/s, "
        f"CPU {cpu * 1e6 / args.items:.0f} µs/item (process, incl. driver threads), "
        f"publish→delivery p50 {p50:.1f} ms p99 {p99:.1f} ms, errors {flow.errors}"
    )
    if profiler:
        for key in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(args.top)
            print(f"--- cProfile by {key} (event-loop thread only)")
            print(out.getvalue().split("\n\n", 1)[-1].rstrip())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", choices=("memory", "sqlite", "postgresql"), default="sqlite")
    p.add_argument("--items", type=int, default=3000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--window", type=int, default=32)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--queue-requests", type=int, default=8)
    p.add_argument("--profile", action="store_true", help="cProfile the measured part")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--timeout", type=float, default=300.0)
    asyncio.run(bench(p.parse_args()))


if __name__ == "__main__":
    main()
