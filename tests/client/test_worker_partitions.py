"""A worker on a partitioned queue reports what its partitions' workers hold.

The per-partition workers run on fake links (no server); the logical worker
stands in for them as ``spread_over_partitions`` sets it up. The wire version
(three shards behind Prosody and ejabberd) is
``tests/integration/test_shard_partitions.py``.
"""

from __future__ import annotations

import asyncio

from tests.client.test_client_stream import FakeLink
from xmpp_queue.client import Job, Worker
from xmpp_queue.client.wire import ItemEvent
from xmpp_queue.client.worker_partitions import PartitionWorkers


def on_link(node: str, link: FakeLink, handler, **kw: object) -> Worker:  # type: ignore[no-untyped-def]
    async def factory() -> FakeLink:
        return link

    return Worker(
        "bee@localhost/bee", "pw", "queue.localhost", node, handler, link_factory=factory, **kw
    )


def deliver(link: FakeLink, node: str, item_id: str) -> None:
    assert link.on_events is not None
    link.on_events([ItemEvent(node, item_id, None, {})])


async def test_in_flight_is_the_sum_over_the_partitions_and_drains_to_zero() -> None:
    release = asyncio.Event()
    running: list[str] = []

    async def handler(job: Job) -> None:
        running.append(job.item_id)
        await release.wait()

    links = [FakeLink(), FakeLink()]
    children = [
        on_link(f"orders#{i}", link, handler, queue_requests=3, lock_extend=0)
        for i, link in enumerate(links)
    ]
    logical = on_link("orders", FakeLink(), handler, queue_requests=6)
    group = PartitionWorkers(logical, children)
    await group.start()
    logical._parts = group  # what spread_over_partitions does once the children run
    assert logical.in_flight == 0

    deliver(links[0], "orders#0", "a")
    deliver(links[0], "orders#0", "b")
    deliver(links[1], "orders#1", "c")
    async with asyncio.timeout(2):
        while len(running) < 3:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
    assert [c.in_flight for c in children] == [2, 1]
    assert logical.in_flight == 3, "the logical worker counts every partition's locks"
    assert logical.reconnects == 0

    release.set()
    await logical.stop(grace=2)
    assert logical.in_flight == 0
    assert "retract a" in links[0].log and "retract c" in links[1].log
