"""Three workers with queue_requests 1, 2 and 5 drain 500 items (issue 3, Tests).

Every item must be acked exactly once, delivered exactly once (nothing times
out here: the lock timeout is the default 300 s), and no worker may ever hold
more items than its window. Run on SQLite and on PostgreSQL (conftest's
``database_url``). Each worker "works" 0-10 ms on an item, so windows fill and
the limits are actually tested, not just never reached.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.integration.queue_helpers import (
    Publisher,
    QueueWorker,
    assert_acked_exactly_once,
    create_queue,
    item_ids,
    items,
    ledger_events,
    wait_until,
)

pytestmark = pytest.mark.integration

ITEMS = 500
LIMITS = {"w1": 1, "w2": 2, "w3": 5}


async def test_500_items_three_workers_each_acked_once_never_over_the_limit(
    component, client, database_url
):
    await component(database_url=database_url)
    owner = await client("pub")
    node = await create_queue(owner)
    workers = []
    for user, limit in LIMITS.items():
        worker = QueueWorker(await client(user), node, limit, work_time=(0.0, 0.01), name=user)
        await worker.start()
        workers.append(worker)

    published = [f"load-{i:04d}" for i in range(ITEMS)]
    publisher = Publisher(owner, node, window=32)
    await publisher.run(published)
    await wait_until(lambda: sum(len(w.acked) for w in workers) >= ITEMS, 90, f"{ITEMS} acks")
    for worker in workers:
        await worker.drain()

    assert sorted(publisher.confirmed) == published
    assert_acked_exactly_once(workers, published)
    deliveries = Counter()
    for worker in workers:
        deliveries.update(worker.deliveries)
        assert not worker.over_limit, (
            f"{worker.name} (queue_requests {worker.limit}) was sent more: {worker.over_limit[:3]}"
        )
        assert worker.max_held <= worker.limit
        assert not worker.ack_refused, f"{worker.name}: {worker.ack_refused[:5]}"
    assert set(deliveries) == set(published)
    assert max(deliveries.values()) == 1, "no lock expired, so no item may come twice"
    by_worker = {w.name: (len(w.acked), w.max_held) for w in workers}
    # every window was used: the 5-wide worker held several items at once
    assert workers[2].max_held > 1, by_worker
    assert all(acks > 0 for acks, _ in by_worker.values()), by_worker
    assert item_ids(await items(owner, node)) == []

    ledger = Counter((kind, item) for kind, item, _ in await ledger_events(database_url, node))
    for item in published:
        assert ledger["published", item] == 1, item
        assert ledger["delivered", item] == 1, item
        assert ledger["acked", item] == 1, item
    print(f"\nload on {database_url.split(':')[0]}: acks/held per worker {by_worker}")
