"""Ordered queues in-process: the service over the in-memory store, no XMPP.

Why in-process: what ordering changes is the core's dispatch and the store's
indexes; the XMPP path is the same stanzas either way (``queue_throughput.py``
measures that). Three figures (docs/benchmarks.md, "Ordering keys"):

1. items/s of publish → dispatch → ack, same run, for an unordered queue, an
   ordered queue with 10,000 keys and an ordered queue with 1 key (one item in
   flight: here bounded by one operation's cost; on the wire by the round trip);
2. the cost of dispatching one unkeyed item while 10 or 100,000 keys are blocked
   (each key's head locked, another item waiting behind it): time per
   publish → dispatch → ack cycle, and the size of the ready index it reads.

Run from the repository root:
    python bench/ordering.py --items 20000
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from xmpp_queue.app.core_inputs import utc_now  # noqa: E402
from xmpp_queue.core.effects import ItemNotice  # noqa: E402
from xmpp_queue.core.limits import Limits  # noqa: E402
from xmpp_queue.core.model import Actor, Affiliation, NewItem  # noqa: E402
from xmpp_queue.core.service import PubSubService, ServiceSettings  # noqa: E402
from xmpp_queue.core.service_access import ServiceAccess  # noqa: E402
from xmpp_queue.storage.store import StateStore  # noqa: E402

OWNER = Actor("owner@localhost/bench")
WORKERS = [Actor(f"w{n}@localhost/r") for n in range(12)]
BATCH = 1000


def service() -> PubSubService:
    ids = itertools.count()
    return PubSubService(
        StateStore.in_memory(),
        utc_now,
        lambda: f"s{next(ids)}",
        ServiceSettings(
            admins=frozenset({OWNER.jid.split("/")[0]}),
            access=ServiceAccess.for_domain("localhost"),
            limits=Limits(max_queue_items=0, publish_rate=0, publish_burst=0),
        ),
    )


async def queue(svc: PubSubService, node: str, ordered: bool) -> None:
    form = {"pubsub#queue": ["1"], "pubsub#queue_ordered": ["1" if ordered else "0"]}
    form["pubsub#max_items"] = ["max"]
    await svc.create_node(OWNER, node, form)
    members = [(w.jid.split("/")[0], Affiliation.MEMBER) for w in WORKERS]
    await svc.set_node_affiliations(OWNER, node, members)


def delivered(effects: tuple[object, ...]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for e in effects:
        if isinstance(e, ItemNotice):
            found.setdefault(e.to, []).extend(i.item_id for i in e.items)
    return found


async def publish(svc: PubSubService, node: str, ids: list[str], keys: list[str | None]) -> None:
    for start in range(0, len(ids), BATCH):
        batch = [
            NewItem(i, "<j/>", 4, {"ordering-key": k} if k else {})
            for i, k in zip(ids[start : start + BATCH], keys[start : start + BATCH], strict=True)
        ]
        await svc.publish_items(OWNER, node, batch)


async def throughput(items: int, ordered: bool, keys: int) -> float:
    """Publish *items* (batches of 1000), four workers (window 50) ack what they get
    (each ack is one operation that also dispatches): items/s of the whole run."""
    svc = service()
    await svc.start()
    node = "q"
    await queue(svc, node, ordered)
    ids = [f"i{n}" for n in range(items)]
    key_of = [f"k{n % keys}" if keys else None for n in range(items)]
    started = time.perf_counter()
    await publish(svc, node, ids, key_of)
    held: dict[str, list[str]] = {}
    workers = {w.jid: w for w in WORKERS[:4]}
    for w in workers.values():
        out = await svc.subscribe(w, node, w.jid, {"pubsub#queue_requests": ["50"]})
        for jid, got in delivered(out.effects).items():
            held.setdefault(jid, []).extend(got)
    acked = 0
    while acked < items:
        progressed = False
        for jid, pending in list(held.items()):
            if not pending:
                continue
            item_id = pending.pop(0)
            out = await svc.retract(workers[jid], node, item_id)
            acked += 1
            progressed = True
            for to, got in delivered(out.effects).items():
                held.setdefault(to, []).extend(got)
        if not progressed:
            raise RuntimeError(f"stuck after {acked} acks")
    elapsed = time.perf_counter() - started
    await svc.stop()
    return items / elapsed


async def blocked_dispatch(blocked: int, cycles: int, frozen: bool) -> tuple[float, int]:
    """*blocked* keys with a locked head and one item waiting behind it; then
    *cycles* unkeyed publish → dispatch → ack: µs per cycle, ready index size.
    *frozen*: the set-up's objects are frozen out of the garbage collector, so
    the figure is the dispatch's own cost, not the collector's walks over a
    bigger heap (which grow with every object in memory, keyed or not)."""
    svc = service()
    await svc.start()
    node = "q"
    await queue(svc, node, True)
    ids = [f"h{n}" for n in range(blocked)] + [f"t{n}" for n in range(blocked)]
    keys: list[str | None] = [f"k{n}" for n in range(blocked)] * 2
    await publish(svc, node, ids, keys)
    holders = WORKERS[:10]
    window = max(1, -(-blocked // len(holders)))
    for w in holders:  # they take every head and never ack
        await svc.subscribe(w, node, w.jid, {"pubsub#queue_requests": [str(min(window, 10000))]})
    measurer = WORKERS[10]
    await svc.subscribe(measurer, node, measurer.jid, {"pubsub#queue_requests": ["1"]})
    details = await svc.queue_details(OWNER, node)
    assert len(details.locks) == blocked, (len(details.locks), blocked)
    ns = svc._ctx.store._state.nodes[node]  # type: ignore[attr-defined]
    if frozen:
        gc.collect()
        gc.freeze()  # the set-up's objects out of the collector's reach
    started = time.perf_counter()
    for n in range(cycles):
        out = await svc.publish(OWNER, node, f"u{n}", "<j/>", 4)
        got = delivered(out.effects).get(measurer.jid)
        assert got == [f"u{n}"], (n, got)
        await svc.retract(measurer, node, f"u{n}")
    per_cycle = (time.perf_counter() - started) / cycles * 1e6
    ready = len(ns.queue.ready)
    gc.unfreeze()
    await svc.stop()
    return per_cycle, ready


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=20000)
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"throughput, {args.items} items, best of {args.rounds} (memory store, in-process)")
    for label, ordered, keys in (
        ("unordered", False, 0),
        ("ordered, 10,000 keys", True, 10000),
        ("unordered (again)", False, 0),
        ("ordered, 1 key", True, 1),
    ):
        n = args.items if keys != 1 else min(args.items, 5000)
        best = max([await throughput(n, ordered, keys) for _ in range(args.rounds)])
        print(f"  {label:<24} {best:10.0f} items/s")
    print(f"dispatch of an unkeyed item beside blocked keys ({args.cycles} cycles)")
    for blocked in (10, 100000):
        per_cycle, ready = await blocked_dispatch(blocked, args.cycles)
        print(
            f"  {blocked:>7} blocked keys: {per_cycle:8.1f} µs per publish+dispatch+ack, "
            f"ready index holds {ready}"
        )


if __name__ == "__main__":
    asyncio.run(main())
