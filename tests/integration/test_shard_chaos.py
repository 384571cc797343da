"""The chaos test across shards: shard processes killed and paused under load.

Three shards and two standbys in one pool, on one PostgreSQL, behind a real
Prosody and a real ejabberd. One queue on each shard (names that hash to each),
two publishers and two workers per queue of ``xmpp_queue.client``, all naming
only the public name (they follow its redirects). While they work, the process
serving a shard is killed (SIGKILL, a replacement started as systemd would) or
paused (SIGSTOP until a standby took its shard over, then SIGCONT), one shard
after the other in a seeded order, so take-overs hit more than one shard; in
between, maybe a blip: a pause of 0.3-2.5 s, around the 2 s lease (taken over
or not, and the resumed process fenced or not). Then:

- every publish got a success answer, and each was acked: the ledger acks each
  publication exactly once; the workers ran every confirmed item, and ran one
  twice only on a shard with a take-over before the second run (at-least-once;
  counted and printed);
- nothing was delivered after its ack (the ledger), nothing dead-lettered;
- no worker held more than its window: the service's locks per worker, sampled
  all along, and no item the worker had to hand back as over its window;
- every queue's backlog is empty (no item row left);
- each shard and the directory are served by exactly one process (the logs,
  the lease table and ``xmpp-queue status`` agree), the resumed ones stand by.

Bounded: ``EVENTS`` kills and pauses (3, one per shard; ``XMPP_QUEUE_SHARD_CHAOS_EVENTS``),
each waited out on a condition with a generous deadline. The schedule (which
shard, what, how long work flows between) comes from a seed, printed first;
``XMPP_QUEUE_CHAOS_SEED=<seed>`` replays it. ``bench/chaos.py --shards`` runs
it longer.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import time
from collections import Counter, defaultdict
from typing import Any

import pytest

from tests.integration.queue_helpers import unique
from tests.integration.test_shards import names_on_every_shard
from tests.kit.integration import SHARD_JIDS, SHARDED_JID, xmpp_queue_cli
from tests.kit.shards import (
    LEASE,
    ShardedCluster,
    close_clients,
    lease_holders,
    ledger_of,
    locks_per_holder,
    stored_items,
)
from xmpp_queue.client import Account, Job, Publisher, StanzaError, Worker, json_payload
from xmpp_queue.client.errors import ClientError
from xmpp_queue.config import load_config
from xmpp_queue.core.placement import pick_shard
from xmpp_queue.sharding import shards_status

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

EVENTS = int(os.environ.get("XMPP_QUEUE_SHARD_CHAOS_EVENTS", "3"))
WINDOW = 3  # each worker's queue_requests
# Seconds: well above a blip and a busy machine's delays (so a second run needs a
# take-over), and short enough that an item whose ack was lost comes back soon.
LOCK_TIMEOUT = 10
TAKEN_OVER = 30.0  # seconds for a standby to serve a failed process's names
DRAIN = 90.0  # seconds for every confirmed item to be acked after the load stops


class Handled:
    """The workers' view: every run of a handler, by item."""

    def __init__(self, seed: int) -> None:
        self.runs: dict[str, list[tuple[str, float]]] = defaultdict(list)
        self._rng = random.Random(seed)

    def handler(self, worker: str) -> Any:
        async def handle(job: Job) -> None:
            self.runs[job.item_id].append((worker, time.time()))  # the logs' clock
            await asyncio.sleep(self._rng.uniform(0.02, 0.15))

        return handle


def account(server: Any, accounts: Any, user: str, resource: str = "") -> Account:
    return Account(
        jid=f"{user}@{server.domain}" + (f"/{resource}" if resource else ""),
        password=accounts.password,
        service=SHARDED_JID,
        host=server.host,
        port=server.c2s_port,
        allow_plain=True,
        reply_timeout=10.0,
    )


async def until(check: Any, within: float, what: str) -> None:
    """Until ``check()`` is true (sync or async); an AssertionError after *within*."""
    deadline = time.monotonic() + within
    while True:
        ok = check()
        if asyncio.iscoroutine(ok):
            ok = await ok
        if ok:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:.0f}s: {what}")
        await asyncio.sleep(0.1)


async def disrupt(cluster: ShardedCluster, shard: str, kind: str, seconds: float) -> str:
    """Kill, pause or blip the process serving *shard*; return once every name is
    served by exactly one process again. A kill starts a replacement (as a
    supervisor would); a pause lasts until others serve what the victim served; a
    blip lasts *seconds* (below the lease or a little above: taken over or not)."""
    victim = (await cluster.wait_all_served(settled=True))[shard]
    names = sorted(cluster.serves(victim))
    if kind == "kill":
        cluster.kill(victim)
        cluster.add()
    elif kind == "pause":
        cluster.pause(victim)

        def taken_over() -> bool:
            serving = cluster.serving()
            return all(name in serving for name in names)

        await until(taken_over, TAKEN_OVER, f"{names} taken over from a paused process")
        cluster.resume(victim)
    else:
        cluster.pause(victim)
        await asyncio.sleep(seconds)
        cluster.resume(victim)
    # Fenced if it lost its leases: it notices and stands by (one server per name).
    await cluster.wait_all_served(TAKEN_OVER, settled=True)
    return f"{kind} {shard.split('.')[0]}" + (f" {seconds:.1f}s" if kind == "blip" else "")


def schedule(rng: random.Random, events: int) -> list[tuple[str, str, float]]:
    """(shard, kind, seconds) per event. *events* kills and pauses (a kill and a
    pause among the first two), of the shards in a seeded order, round and round
    (so take-overs hit several shards); before each, maybe a blip of a random
    shard (a pause of 0.3-2.5 s: around the lease, so taken over or not)."""
    order = rng.sample(SHARD_JIDS, len(SHARD_JIDS))
    kinds = ["kill", "pause"]
    rng.shuffle(kinds)
    kinds += [rng.choice(("kill", "pause")) for _ in range(max(0, events - 2))]
    plan: list[tuple[str, str, float]] = []
    for n in range(events):
        if rng.random() < 0.5:
            plan.append((rng.choice(SHARD_JIDS), "blip", rng.uniform(0.3, 2.5)))
        plan.append((order[n % len(order)], kinds[n], 0.0))
    return plan


async def test_chaos_across_shards_loses_nothing_and_ends_with_one_process_per_shard(
    sharded: ShardedCluster, xmpp_server: Any, accounts: Any, pg_database: str
) -> None:
    seed = int(os.environ.get("XMPP_QUEUE_CHAOS_SEED") or random.randrange(1, 10**6))
    print(f"\nshard chaos: seed {seed} (XMPP_QUEUE_CHAOS_SEED={seed} replays the schedule)")
    rng = random.Random(seed)
    plan = schedule(rng, EVENTS)
    started = time.monotonic()
    for _ in range(len(SHARD_JIDS) + 2):  # three serving, two standing by
        sharded.add()
    await sharded.wait_all_served()

    nodes = names_on_every_shard(unique("chaos"))
    shard_of = {node: pick_shard(node, SHARD_JIDS) for node in nodes}
    handled = Handled(seed)
    publishers = [
        Publisher(account(xmpp_server, accounts, "pub", f"chaos-{tag}"), window=8) for tag in "ab"
    ]
    workers = [
        Worker(
            account(xmpp_server, accounts, user),
            node,
            handled.handler(f"{user}:{node}"),
            queue_requests=WINDOW,
            name=f"{node}-{user}",
        )
        for node in nodes
        for user in ("w1", "w2")
    ]
    confirmed: set[str] = set()
    refused: list[str] = []
    most_locked: Counter[str] = Counter()
    publishing = asyncio.Event()
    publishing.set()

    async def keep_publishing(pub: Publisher, tag: str, node: str) -> None:
        n = 0
        while publishing.is_set():
            item_id = f"{node}.{tag}.{n}"
            n += 1
            try:
                await pub.publish(node, json_payload({"n": n}), item_id)
                confirmed.add(item_id)
            except (StanzaError, ClientError) as exc:  # kept for the assertion below
                refused.append(f"{item_id}: {exc}")
            await asyncio.sleep(0.05)

    samples = 0

    async def sample_locks() -> None:
        nonlocal samples
        while True:
            for holder, count in (await locks_per_holder(pg_database, nodes)).items():
                most_locked[holder] = max(most_locked[holder], count)
            samples += 1
            await asyncio.sleep(0.25)

    done: list[str] = []
    load: list[asyncio.Future[None]] = []
    sampler = asyncio.ensure_future(sample_locks())
    try:
        for pub in publishers:
            await pub.connect()
        for node in nodes:
            assert await publishers[0].create_queue(node, lock_timeout=LOCK_TIMEOUT) is True
        for worker in workers:
            await worker.start()
        load = [
            asyncio.ensure_future(keep_publishing(pub, tag, node))
            for pub, tag in zip(publishers, "ab", strict=True)
            for node in nodes
        ]
        await until(
            lambda: all(any(i.startswith(f"{n}.") for i in handled.runs) for n in nodes),
            30,
            "work flowing on every shard",
        )
        for shard, kind, seconds in plan:
            await asyncio.sleep(rng.uniform(0.5, 1.5))  # work flows for a while
            done.append(await disrupt(sharded, shard, kind, seconds))
        await asyncio.sleep(1.0)  # and on, after the last take-over
        publishing.clear()
        await asyncio.wait_for(asyncio.gather(*load), 60)

        async def all_acked() -> bool:
            if not confirmed <= set(handled.runs):
                return False
            return not await stored_items(pg_database, nodes)

        await until(all_acked, DRAIN, "every confirmed item handled and no item left stored")
        if sampler.done():
            sampler.result()  # the lock sampler failed: raise why
        returned = {w.name: w.stats.returned for w in workers if w.stats.returned}
        # The clients followed the redirects: each talks to its queue's shard.
        assert all(w.service_jid == shard_of[w.node] for w in workers)
        assert all(p.placements.known(n) == shard_of[n] for p in publishers for n in nodes)
        resent_ignored = sum(w.stats.resent_ignored for w in workers)
    finally:
        sampler.cancel()
        for task in load:
            task.cancel()
        await close_clients(workers, publishers[0], grace=2)
        await close_clients([], publishers[1], grace=2)
    elapsed = time.monotonic() - started

    # What the ledger says: each publication and its acks, deliveries after an ack.
    never_stored: set[str] = set()
    ack_counts: dict[str, tuple[int, int]] = {}  # item -> (published, acked) where they differ
    republished: dict[str, int] = {}
    came_back: list[str] = []
    dead = 0
    for node in nodes:
        events = await ledger_of(pg_database, node)
        published = Counter(i for k, i in events if k == "published")
        acked = Counter(i for k, i in events if k == "acked")
        never_stored |= {i for i in confirmed if i.startswith(f"{node}.")} - set(published)
        ack_counts.update({i: (n, acked[i]) for i, n in published.items() if acked[i] != n})
        republished.update({i: n for i, n in published.items() if n > 1})
        dead += sum(1 for k, _ in events if k == "dead_lettered")
        gone: set[str] = set()
        for kind, item in events:
            if kind == "acked":
                gone.add(item)
            elif kind == "published":
                gone.discard(item)
            elif kind == "delivered" and item in gone:
                came_back.append(item)

    # The workers' view: a second run only on a shard taken over before it (by the
    # logs' clock, whole seconds: a take-over in the same second counts).
    takeovers_at = {shard: sharded.terms(shard)[1:] for shard in SHARD_JIDS}
    duplicates: Counter[str] = Counter()
    unexplained = []
    for item, runs in handled.runs.items():
        shard = shard_of[item.split(".", 1)[0]]
        for _, at in runs[1:]:
            duplicates[shard] += 1
            if not any(t <= at for t in takeovers_at[shard]):
                unexplained.append((item, runs))

    takeovers = {shard.split(".")[0]: len(at) for shard, at in takeovers_at.items()}
    print(
        f"shard chaos: seed {seed}, {elapsed:.0f}s; " + ", ".join(done) + f"; take-overs "
        f"{takeovers}, directory {sharded.takeovers(SHARDED_JID)}; {len(confirmed)} items "
        f"confirmed; run twice {sum(duplicates.values())} {dict(duplicates)}; "
        f"{len(republished)} published twice; "
        f"{sum(p.resent + p.retries for p in publishers)} publishes sent again; "
        f"{resent_ignored} re-sent notices ignored; most locks per worker "
        f"{max(most_locked.values(), default=0)} ({samples} samples)"
    )
    assert refused == [], f"seed {seed}: publishes refused: {refused[:5]}"
    assert not never_stored, f"seed {seed}: confirmed, never stored: {sorted(never_stored)[:5]}"
    assert not ack_counts, f"seed {seed}: (published, acked) differ: {ack_counts}"
    assert not came_back, f"seed {seed}: delivered after their ack: {came_back[:10]}"
    assert dead == 0, f"seed {seed}: {dead} dead letters"
    assert not unexplained, f"seed {seed}: run twice with no take-over before: {unexplained[:5]}"

    # No worker over its window, by the service's locks and by what workers handed back.
    assert samples >= 20 and 0 < max(most_locked.values(), default=0) <= WINDOW, (
        samples,
        most_locked,
    )
    assert not returned, f"seed {seed}: items handed back as over the window: {returned}"
    assert await stored_items(pg_database, nodes) == {}, "every backlog empty"

    # Each name served by exactly one process, as the logs, leases and status say;
    # the others (resumed, replacements) stand by, and status lists them, no dead one.
    served = await sharded.wait_all_served(settled=True)
    host = socket.gethostname()
    idle = {
        f"{host}:{p.process.pid}"
        for p in sharded.procs
        if p.running and p.process is not None and not sharded.serves(p) & set(SHARD_JIDS)
    }
    assert len(idle) == 2, idle  # five processes (a killed one replaced), three shards
    settings = load_config(sharded.base.config_path)

    async def pool_listed() -> bool:
        text, _ = await shards_status(settings)
        listed = {x.split()[0] for x in text.splitlines() if x.endswith("for any shard")}
        return listed == idle

    await until(pool_listed, 4 * LEASE + 10, f"status to list the standbys {sorted(idle)}")
    holders = await lease_holders(pg_database)
    status = await asyncio.to_thread(xmpp_queue_cli, "status", "-c", str(sharded.base.config_path))
    assert status.returncode == 0, status.stdout + status.stderr
    print(status.stdout)
    for name in (SHARDED_JID, *SHARD_JIDS):
        claimants = sharded.claims(name)
        assert claimants == [served[name]], f"{name} claimed by {len(claimants)} processes"
        pid = served[name].process.pid  # type: ignore[union-attr]
        assert holders[name] == f"{host}:{pid}", (name, holders)
        line = next(x for x in status.stdout.splitlines() if x.startswith(f"{name} ("))
        assert f"active {host}:{pid} since" in line, status.stdout

    # Take-overs as planned, on more than one shard (a blip may add some).
    for shard, planned in Counter(s for s, kind, _ in plan if kind != "blip").items():
        assert len(takeovers_at[shard]) >= planned, (shard, planned, takeovers)
    assert sum(1 for n in takeovers.values() if n) >= min(2, EVENTS), takeovers
