"""What the [http] metrics add to the component's CPU, measured where it is spent.

Why not only end to end: `queue_throughput.py --metrics both` runs the component with
and without metrics behind Prosody, but on a shared 2-core machine its CPU per item
moves by ±15 % from run to run, far more than the few percent to resolve. Here the
two costs metrics add are measured in one process, alternating rounds:

1. per item: the store decorator (core/observe.py) and the counters and histograms
   fed from each commit, measured as the service's publish -> dispatch -> ack flow
   (bench/service_throughput.py's driver) over the write-behind SQLite store the
   component runs on, with and without the observer, CPU time per item;
2. per scrape: `/metrics` as the listener serves it (queue_overview + the text
   exposition), for `--queues` queue nodes, CPU time per scrape.

The share at a given rate is then (per-item cost x rate + per-scrape cost / scrape
interval) / (the component's CPU per item at that rate x rate); pass that CPU figure
from `queue_throughput.py` with `--component-us`.

    python bench/metrics_cost.py --items 3000 --rounds 7 --component-us 700
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from service_throughput import NODE, PUBLISHER, QUEUE_FORM, Flow, open_store  # noqa: E402

from xmpp_queue.app.core_inputs import new_id, utc_now  # noqa: E402
from xmpp_queue.core.model import SYSTEM, AccessModel, Actor  # noqa: E402
from xmpp_queue.core.observe import ObservedStore  # noqa: E402
from xmpp_queue.core.service import PubSubService, ServiceSettings  # noqa: E402
from xmpp_queue.core.service_access import ServiceAccess  # noqa: E402
from xmpp_queue.http.metrics import QueueMetrics  # noqa: E402


async def flow_cpu(observed: bool, args: argparse.Namespace, workdir: Path) -> float:
    """CPU µs per item of the publish -> ack flow, with or without the observer."""
    store = await open_store("sqlite", "app", workdir)
    metrics = QueueMetrics(100) if observed else None
    if metrics is not None:
        store = ObservedStore(store, metrics)
    service = PubSubService(
        store,
        utc_now,
        new_id,
        ServiceSettings(access=ServiceAccess.everyone(), queue_access_model=AccessModel.OPEN),
    )
    if metrics is not None:
        service.on_batch_committed(metrics.batch_committed)
    await service.start()
    try:
        await service.create_node(PUBLISHER, NODE, QUEUE_FORM)
        workers = [Actor(f"worker{k}@localhost/load") for k in range(4)]
        for w in workers:
            options = {
                "FORM_TYPE": ["http://jabber.org/protocol/pubsub#subscribe_options"],
                "pubsub#queue_requests": ["8"],
            }
            await service.subscribe(w, NODE, w.bare, options)
        flow = Flow(service, workers, 32)
        await flow.run(0, 200)
        cpu0 = time.process_time()
        await flow.run(200, args.items)
        cpu = time.process_time() - cpu0
    finally:
        await service.stop()
        await store.close()
    return cpu * 1e6 / args.items


async def scrape_cpu(args: argparse.Namespace) -> float:
    """CPU µs of one /metrics body (overview read + exposition) with --queues queues."""
    from xmpp_queue.storage.store import StateStore

    metrics = QueueMetrics(100)
    service = PubSubService(
        ObservedStore(StateStore.in_memory(), metrics),
        utc_now,
        new_id,
        ServiceSettings(access=ServiceAccess.everyone(), queue_access_model=AccessModel.OPEN),
    )
    await service.start()
    try:
        for q in range(args.queues):
            node = f"queue-{q}"
            await service.create_node(PUBLISHER, node, QUEUE_FORM)
            for i in range(20):
                await service.publish(PUBLISHER, node, f"i{i}", "<job/>", 6)
        for _ in range(5):
            metrics.render(await service.queue_overview(SYSTEM))
        cpu0 = time.process_time()
        for _ in range(args.scrapes):
            metrics.render(await service.queue_overview(SYSTEM))
        return (time.process_time() - cpu0) * 1e6 / args.scrapes
    finally:
        await service.stop()


async def main(args: argparse.Namespace) -> None:
    plain: list[float] = []
    observed: list[float] = []
    with tempfile.TemporaryDirectory(prefix="xq-metrics-cost-") as tmp:
        for r in range(args.rounds):
            for flag, out in (
                ((False, plain), (True, observed))
                if r % 2
                else (
                    (True, observed),
                    (False, plain),
                )
            ):
                workdir = Path(tmp) / f"r{r}-{flag}"
                workdir.mkdir()
                out.append(await flow_cpu(flag, args, workdir))
            print(f"round {r + 1}: plain {plain[-1]:.0f} µs/item, observed {observed[-1]:.0f}")
    diffs = [o - p for o, p in zip(observed, plain, strict=True)]
    per_item = statistics.median(diffs)
    per_scrape = await scrape_cpu(args)
    print(
        f"\nflow CPU per item, median of {args.rounds}: plain {statistics.median(plain):.0f} µs, "
        f"observed {statistics.median(observed):.0f} µs; paired difference median "
        f"{per_item:.1f} µs (min {min(diffs):.1f}, max {max(diffs):.1f})"
    )
    print(f"one /metrics body with {args.queues} queues: {per_scrape:.0f} µs CPU")
    if args.component_us:
        rate = args.rate
        added = per_item * rate + per_scrape / args.interval
        base = args.component_us * rate
        print(
            f"at {rate:g} items/s, scraped every {args.interval:g} s: "
            f"{added / 1e3:.1f} ms CPU per second added to {base / 1e3:.0f} ms "
            f"= {100 * added / base:.2f} %"
        )


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=7, help="paired rounds (alternating order)")
    p.add_argument("--queues", type=int, default=10, help="queue nodes in a scrape")
    p.add_argument("--scrapes", type=int, default=200)
    p.add_argument("--rate", type=float, default=500.0)
    p.add_argument("--interval", type=float, default=15.0, help="scrape interval, seconds")
    p.add_argument("--component-us", type=float, default=0.0, help="component µs/item")
    asyncio.run(main(p.parse_args()))
