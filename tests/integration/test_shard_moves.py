"""Moving a queue between shards under load, behind Prosody and ejabberd, on PostgreSQL.

Three processes serve the three shards of one config. A queue (with its
dead-letter node, same family) is created through the public name; a publisher
and two workers run on it; meanwhile the admin CLI moves it to another shard
(``xmpp-queue admin move-node``, which the old shard runs). Then:

- every publish was answered (in flight ones completed on the old shard or were
  redirected and sent again) and every answered item was processed;
- the ledger is continuous: each item published once and acked exactly once
  (no ack lost, none applied twice), across both shards' commits;
- the placement rows of the whole family name the new shard, epoch 2;
- the workers talk to the new shard now (their subscriptions moved with the node).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from tests.integration.queue_helpers import unique
from tests.integration.test_shards import account
from tests.kit.integration import SHARD_JIDS, xmpp_queue_cli
from tests.kit.shards import ShardedCluster, admin_config, close_clients, ledger_of, placement_rows
from xmpp_queue.client import Job, Publisher, StanzaError, Worker, json_payload
from xmpp_queue.core.placement import pick_shard

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

TIMEOUT = 90.0
COUNT = 400


async def test_a_queue_moved_under_load_loses_nothing_and_workers_follow(
    sharded: ShardedCluster, xmpp_server: Any, accounts: Any, pg_database: str
) -> None:
    for _ in range(3):
        sharded.add()
    await sharded.wait_all_served()
    node = unique("moving")
    dead = f"{node}/dead-letter"
    home = pick_shard(node, SHARD_JIDS)
    target = next(s for s in SHARD_JIDS if s != home)

    got: Counter[str] = Counter()

    async def handle(job: Job) -> None:
        got[job.item_id] += 1
        await asyncio.sleep(0.002)

    pub = Publisher(account(xmpp_server, accounts, "pub"), window=16)
    workers = [
        Worker(account(xmpp_server, accounts, user), node, handle, queue_requests=4)
        for user in ("w1", "w2")
    ]
    answered: set[str] = set()
    refused: list[str] = []
    await pub.connect()
    try:
        assert await pub.create_queue(node, lock_timeout=30) is True
        assert await pub.create_queue(dead, lock_timeout=30) is True
        for w in workers:
            await w.start()
        assert {w.service_jid for w in workers} == {home}

        async def keep_publishing() -> None:
            for i in range(COUNT):
                item_id = f"{node}-{i}"
                try:
                    await pub.publish(node, json_payload({"i": i}), item_id)
                    answered.add(item_id)
                except StanzaError as exc:  # kept for the assertion below
                    refused.append(f"{item_id}: {exc}")
                await asyncio.sleep(0.005)

        load = asyncio.ensure_future(keep_publishing())
        await asyncio.sleep(1.0)
        assert 0 < len(answered) < COUNT, "the move must happen under load"
        admin = admin_config(sharded, xmpp_server, accounts)
        moved = await asyncio.to_thread(
            xmpp_queue_cli, "admin", "-c", str(admin), "move-node", node, target
        )
        assert moved.returncode == 0, moved.stdout + moved.stderr
        assert node in moved.stdout and target in moved.stdout, moved.stdout
        await asyncio.wait_for(load, TIMEOUT)
        async with asyncio.timeout(TIMEOUT):
            while not answered <= set(got):  # noqa: ASYNC110
                await asyncio.sleep(0.1)
        assert {w.service_jid for w in workers} == {target}, "the workers followed"
        assert pub.placements.known(node) == target
    finally:
        await close_clients(workers, pub, grace=2)

    assert refused == [], refused[:5]
    assert len(answered) == COUNT
    assert answered <= set(got), "every answered publish was processed"
    placed = await placement_rows(pg_database)
    assert placed[node] == (target, 2)
    assert placed[dead] == (target, 2), "the dead-letter node moved with its queue"
    events = await ledger_of(pg_database, node)
    published = Counter(i for k, i in events if k == "published")
    acked = Counter(i for k, i in events if k == "acked")
    assert set(published) == answered and set(published.values()) == {1}
    assert set(acked) == answered, "every item acked, on one shard or the other"
    assert set(acked.values()) == {1}, "no ack applied twice"


async def test_a_move_to_a_wrong_shard_or_of_a_foreign_node_is_refused(
    sharded: ShardedCluster, xmpp_server: Any, accounts: Any, pg_database: str
) -> None:
    for _ in range(3):
        sharded.add()
    await sharded.wait_all_served()
    node = unique("staying")
    home = pick_shard(node, SHARD_JIDS)
    admin = admin_config(sharded, xmpp_server, accounts)
    made = await asyncio.to_thread(xmpp_queue_cli, "admin", "-c", str(admin), "create-node", node)
    assert made.returncode == 0, made.stdout + made.stderr
    for wrong in (home, "nowhere.example.org"):
        refused = await asyncio.to_thread(
            xmpp_queue_cli, "admin", "-c", str(admin), "move-node", node, wrong
        )
        assert refused.returncode == 1, refused.stdout + refused.stderr
    assert (await placement_rows(pg_database))[node] == (home, 1)
