"""A standby takes over in the middle of ordering keys (issue 20, point 5).

Behind Prosody and behind ejabberd, two processes of one component on one
PostgreSQL: an ordered queue (``pubsub#queue_ordered``) with three keys of five
items each; a frozen worker holds the head of one key while a second worker
works through the others, and the active process is killed (SIGKILL) in the
middle of that. After the standby has taken over, the held head is still
locked to its worker and its ack goes through the new process; items published
after the take-over join the end of their keys, and an item published with a
``Start`` just before the kill is handed out by the new process, not before
its time. Checked through what the workers receive: per key the first
deliveries come in publish order, never two items of one key are in flight at
once (notified and not yet acked, by any worker), and the service's ledger has
every item acked, per key in publish order, with nothing dead-lettered or left
locked.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from slixmpp.exceptions import IqError, IqTimeout

from tests.integration.cluster import Cluster, held_locks, make_cluster
from tests.integration.queue_helpers import (
    Event,
    QueueWorker,
    create_queue,
    ledger_events,
    send,
    wait_until,
)
from tests.integration.test_message_model_wire import publish_iq, zulu

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

KEYS = ("A", "B", "C")
BEFORE = 4  # items per key published before the take-over; one more after it
LOCK_TIMEOUT = 15  # outlasts the take-over; bounds the wait for a notice lost in the kill


@pytest.fixture
async def cluster(xmpp_server, pg_database, tmp_path):  # type: ignore[no-untyped-def]
    made = make_cluster(xmpp_server, pg_database, tmp_path)
    yield made
    await made.stop()


class KeyedWorker(QueueWorker):
    """A :class:`QueueWorker` that checks, on each item it receives, that no other
    item of the same ordering key is held by any worker of the test (held: notified
    and its ack not yet sent; the service cannot hand out a key's next item before
    it has read the ack of the one before), and notes each item's first delivery."""

    def __init__(
        self, peers: list[KeyedWorker], firsts: list[str], *args: Any, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.peers = peers
        self.firsts = firsts
        self.overlaps: list[tuple[str, set[str]]] = []
        self.keys: dict[str, str] = {}
        self.arrived: dict[str, float] = {}  # item id -> wall-clock time of its first notice
        peers.append(self)

    def _on_event(self, event: Event) -> None:
        if (
            event.node == self.node
            and event.kind == "item"
            and event.item_id
            and not self.repeats(event)
        ):
            key = event.headers.get("ordering-key", "")
            self.keys[event.item_id] = key
            self.arrived.setdefault(event.item_id, time.time())
            others = {
                i
                for worker in self.peers
                for i in worker.held
                if i != event.item_id and worker.keys.get(i) == key
            }
            if others:
                self.overlaps.append((event.item_id, others))
            if event.item_id not in self.firsts:
                self.firsts.append(event.item_id)
        super()._on_event(event)


async def put_until_stored(client: Any, node: str, item_id: str, key: str) -> None:
    """Publish with the key, again while the service is away (a retried id replaces
    the stored item and keeps its place, so a publish that did commit is not doubled)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            await send(publish_iq(client, node, item_id, **{"ordering-key": key}), 2.0)
            return
        except (IqError, IqTimeout):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def test_a_standby_takes_over_in_the_middle_of_a_key(
    cluster: Cluster, client: Any, pg_database: str
) -> None:
    first = cluster.add()
    assert await cluster.wait_active() is first
    second = cluster.add()
    await cluster.wait_standing_by(second)

    owner = await client("pub")
    node = await create_queue(
        owner, queue_ordered=True, queue_retry_delay=0, queue_lock_timeout=LOCK_TIMEOUT
    )
    published: dict[str, list[str]] = {key: [] for key in KEYS}
    for n in range(1, BEFORE + 1):  # A1 B1 C1 A2 B2 C2 ...: keys interleaved
        for key in KEYS:
            await put_until_stored(owner, node, f"{key}{n}", key)
            published[key].append(f"{key}{n}")

    peers: list[KeyedWorker] = []
    firsts: list[str] = []
    # w1 (window 1) subscribes first and takes the oldest head, A1, and holds it.
    holder = KeyedWorker(peers, firsts, await client("w1"), node, 1, name="w1")
    holder.frozen = True
    await holder.start()
    await wait_until(lambda: bool(holder.held), 10, "w1 to hold a head")
    (head,) = holder.held
    assert head == "A1", head
    # w2 works through B and C while A waits behind its held head.
    busy = KeyedWorker(peers, firsts, await client("w2"), node, 2, work_time=(0.05, 0.3), name="w2")
    await busy.start()
    await wait_until(lambda: len(busy.acked) >= 3, 20, "w2 in the middle of B and C")
    assert len(busy.acked) < 2 * BEFORE, "the kill should come before B and C are done"

    # A delayed item (issue 19: delayed items survive take-overs), due after the kill.
    start = datetime.now(UTC) + timedelta(seconds=3)
    await send(publish_iq(owner, node, "late", Start=zulu(start)))
    cluster.kill(await cluster.wait_active())
    assert await cluster.wait_active() is second
    locks = await held_locks(pg_database, node)
    assert locks[head][0] is not None and locks[head][0].startswith(f"w1@{owner.boundjid.domain}")

    for key in KEYS:  # after the take-over: the end of each key
        item_id = f"{key}{BEFORE + 1}"
        await put_until_stored(owner, node, item_id, key)
        published[key].append(item_id)
    # w1 finishes the head it held across the take-over; its ack reaches the new process.
    holder.frozen = False
    holder.held.discard(head)
    await holder.ack(head)
    assert head in holder.acked, (holder.ack_refused, holder.unacked)

    everything = {"late", *(i for ids in published.values() for i in ids)}

    async def all_acked() -> bool:
        for worker in peers:  # acks that the kill left without an answer are sent again
            if worker.unacked:
                await worker.retry_acks()
        rows = await ledger_events(pg_database, node)
        return {item for kind, item, _ in rows if kind == "acked"} >= everything

    deadline = time.monotonic() + LOCK_TIMEOUT * 3
    while not await all_acked():
        assert time.monotonic() < deadline, "not every published item was acked"
        await asyncio.sleep(0.3)
    for worker in peers:
        await worker.drain()
    rows = await ledger_events(pg_database, node)
    received = Counter(i for worker in peers for i in worker.deliveries.elements())
    lost = Counter(item for kind, item, _ in rows if kind == "delivered") - received
    refused = [r for worker in peers for r in worker.ack_refused]
    print(
        f"take-over mid-key: {len(everything)} items, {received.total()} received, "
        f"notices lost in the kill {dict(lost)}, acks refused while the service was "
        f"away (their items came back after the lock timeout) {refused}"
    )

    overlaps = [o for worker in peers for o in worker.overlaps]
    assert not overlaps, f"two items of one key in flight: {overlaps}"
    for key in KEYS:
        assert [i for i in firsts if i[0] == key] == published[key], (key, firsts)
    acked = [item for kind, item, _ in rows if kind == "acked"]
    for key in KEYS:  # the acks of a key, too, came in publish order
        order = [i for i in dict.fromkeys(acked) if i[0] == key]
        assert order == published[key], (key, acked)
    assert not any(kind == "dead_lettered" for kind, _, _ in rows)
    late = min(worker.arrived["late"] for worker in peers if "late" in worker.arrived)
    assert late >= start.timestamp() - 0.05, "the delayed item came before its Start"
    assert await held_locks(pg_database, node) == {}
    assert cluster.takeovers() == 1
