"""A partitioned queue behind Prosody and ejabberd, on PostgreSQL, over three shards.

One create on the public name with ``partitions=3`` makes ``orders#0..2``, one
on each shard; the directory answers the logical name as a collection of them.
A publisher names only ``orders``: items with an ordering key go to the key's
partition (per-key order holds: the queue is ordered), items without one go
round-robin. Two workers name only ``orders`` and spread their windows over the
partitions. Every item is processed, each key's items in publish order.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import pytest

from tests.integration.queue_helpers import unique
from tests.integration.test_shards import account
from tests.kit.integration import SHARD_JIDS
from tests.kit.shards import ShardedCluster, close_clients, ledger_of, placement_rows
from xmpp_queue.client import Job, Publisher, Worker, json_payload
from xmpp_queue.client.link import PubSubLink
from xmpp_queue.core.placement import partition_ids, pick_partition

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

TIMEOUT = 90.0
KEYS = [f"customer-{n}" for n in range(9)]
PER_KEY = 20
DISCO_ITEMS = "http://jabber.org/protocol/disco#items"


async def test_a_partitioned_queue_spreads_over_shards_and_keeps_per_key_order(
    sharded: ShardedCluster, xmpp_server: Any, accounts: Any, pg_database: str
) -> None:
    for _ in range(3):
        sharded.add()
    await sharded.wait_all_served()
    logical = unique("orders")
    parts = partition_ids(logical, 3)

    seen: dict[str, list[int]] = defaultdict(list)
    processed: set[str] = set()
    holding: list[int] = []  # the workers' in_flight, seen from inside a handler
    total = len(KEYS) * PER_KEY + 3

    async def handle(job: Job) -> None:
        body = job.json()
        if "key" in body:
            seen[body["key"]].append(body["n"])
        processed.add(job.item_id)
        holding.append(sum(w.in_flight for w in workers))
        await asyncio.sleep(0.001)

    pub = Publisher(account(xmpp_server, accounts, "pub"), window=16)
    workers = [
        Worker(account(xmpp_server, accounts, user), logical, handle, queue_requests=6)
        for user in ("w1", "w2")
    ]
    await pub.connect()
    try:
        assert await pub.create_queue(logical, partitions=3, ordered=True, lock_timeout=30)
        assert await pub.create_queue(logical, partitions=3) is False  # exists
        placed = await placement_rows(pg_database)
        shards = [placed[p][0] for p in parts]
        assert sorted(shards) == sorted(SHARD_JIDS), "one partition on each shard"

        link = await PubSubLink.connect(account(xmpp_server, accounts, "alice"))
        try:  # the directory lists the logical name's partitions with their shards
            listing = await link.call(f"<query xmlns='{DISCO_ITEMS}' node='{logical}'/>", "get")
            items = [(i.get("node"), i.get("jid")) for i in listing.iter(f"{{{DISCO_ITEMS}}}item")]
            assert items == list(zip(parts, shards, strict=True))
        finally:
            await link.close()

        for w in workers:
            await w.start()

        async def publish_key(key: str) -> None:
            for n in range(PER_KEY):  # each after the previous one's answer: in order
                await pub.publish(
                    logical, json_payload({"key": key, "n": n}), f"{key}-{n}", ordering_key=key
                )

        await asyncio.gather(*(publish_key(k) for k in KEYS))
        for n in range(3):  # no key: round-robin, one per partition
            await pub.publish(logical, json_payload({"rr": n}), f"rr-{n}")
        async with asyncio.timeout(TIMEOUT):
            while len(processed) < total:  # noqa: ASYNC110
                await asyncio.sleep(0.1)
    finally:
        await close_clients(workers, pub, grace=2)

    for key in KEYS:
        firsts = list(dict.fromkeys(seen[key]))  # at-least-once: first sightings
        assert firsts == list(range(PER_KEY)), (key, seen[key])
    # Each key's items are on its partition; the keyless ones one per partition.
    for part in parts:
        events = await ledger_of(pg_database, part)
        published = {i for k, i in events if k == "published"}
        mine = {k for k in KEYS if pick_partition(parts, k) == part}
        assert {i.rsplit("-", 1)[0] for i in published if not i.startswith("rr-")} == mine
        assert len([i for i in published if i.startswith("rr-")]) == 1
        acked = {i for k, i in events if k == "acked"}
        assert acked == published, "every item of the partition acked"
    assert sum(w.stats.acked for w in workers) >= total
    # A logical worker's in_flight is its partitions' locks: at least the job whose
    # handler looked, at most the two windows; nothing held once they stopped.
    assert 1 <= min(holding) and max(holding) <= 2 * 6, (min(holding), max(holding))
    assert [w.in_flight for w in workers] == [0, 0]
