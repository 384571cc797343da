"""A shard's dashboard lists every queue of the deployment (``/api/deployment``).

The real listener over the in-memory service (tests/http/conftest.py), with a
deployment reader holding rows as the shared database would; the SQL behind the
reader runs in tests/storage/test_shard_store.py and the whole thing against
real processes in tests/integration/test_shards.py.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from tests.kit.http import Ops
from xmpp_queue.core.deployment import PlacedQueue
from xmpp_queue.http.deployment import DeploymentView

HERE, THERE = "p0.queue.test", "p1.queue.test"


class Rows:
    """The shared database's queues, as a shard's dashboard reads them."""

    def __init__(self, queues: list[PlacedQueue]) -> None:
        self.queues = queues
        self.reads = 0

    async def placed_queues(self, now: datetime) -> list[PlacedQueue]:
        self.reads += 1
        return list(self.queues)

    async def owner(self, node_id: str) -> str | None:
        return next((q.shard for q in self.queues if q.node == node_id), None)


async def test_an_unsharded_listener_has_no_deployment_view(ops: Ops) -> None:
    status, text = await ops.get("/api/deployment")
    assert status == 404 and "not a shard" in text
    status, text = await ops.get("/api/queues")
    assert status == 200 and json.loads(text)["sharded"] is False  # the page does not ask


async def test_every_queue_of_every_shard_with_its_shard_and_counts(ops: Ops) -> None:
    then = ops.clock() - timedelta(seconds=30)
    rows = Rows(
        [
            PlacedQueue("jobs", HERE, 3, 1, 2, 1, then),
            PlacedQueue("mail", THERE, 5, 0, 0, 0, None),
        ]
    )
    ops.server.deployment = DeploymentView(rows, HERE, ops.clock, max_age=60)
    status, text = await ops.get("/api/deployment")
    assert status == 200, text
    body = json.loads(text)
    assert json.loads((await ops.get("/api/queues"))[1])["sharded"] is True
    assert (body["shard"], body["shards"]) == (HERE, [HERE, THERE])
    assert (body["waiting"], body["in_flight"]) == (8, 2)
    assert body["queues"] == [
        {
            "node": "jobs",
            "shard": HERE,
            "here": True,
            "waiting": 3,
            "delayed": 1,
            "in_flight": 2,
            "subscribers": 1,
            "oldest_waiting_seconds": 30.0,
        },
        {
            "node": "mail",
            "shard": THERE,
            "here": False,
            "waiting": 5,
            "delayed": 0,
            "in_flight": 0,
            "subscribers": 0,
            "oldest_waiting_seconds": None,
        },
    ]
    # Polls within max_age share one database read.
    for _ in range(3):
        assert (await ops.get("/api/deployment"))[0] == 200
    assert rows.reads == 1
    # Another shard's queue has its page on that shard's dashboard: the 404 says where.
    status, text = await ops.get("/api/queue?node=mail")
    assert status == 404 and THERE in text, text
    status, text = await ops.get("/api/queue?node=ghost")
    assert status == 404 and THERE not in text, text


async def test_the_overview_page_carries_the_every_shard_section(ops: Ops) -> None:
    status, html = await ops.get("/")
    assert status == 200 and 'id="deployment"' in html
    status, script = await ops.get("/static/app.js")
    assert status == 200 and "/api/deployment" in script


class Unreachable(Rows):
    async def placed_queues(self, now: datetime) -> list[PlacedQueue]:
        raise ConnectionResetError("the database went away")


async def test_a_database_that_does_not_answer_is_a_503_not_a_crash(ops: Ops) -> None:
    ops.server.deployment = DeploymentView(Unreachable([]), HERE, ops.clock)
    status, text = await ops.get("/api/deployment")
    assert status == 503 and "did not answer" in text, text
    assert (await ops.get("/api/queues"))[0] == 200  # this shard's own page goes on
