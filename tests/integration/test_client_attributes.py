"""Item attributes through the client library, Prosody and the component (issue 19).

A :class:`Publisher` publishes with ``attributes=``, ``delay=``, ``priority=`` and
``ttl=`` (single and batched publishes); a :class:`Worker` reads
``job.attributes`` from single notifications (``max_batch`` 1) and from batched
ones (``max_batch`` 3); the delayed item arrives only after its ``Start``; a dead
letter keeps the publisher's attributes, read back with ``Publisher.items``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.integration.queue_helpers import unique
from xmpp_queue.client import Job, Publisher, PublishError, PublishItem, Worker, json_payload

pytestmark = pytest.mark.integration

TIMEOUT = 20.0


@pytest.fixture(scope="module")
def attr_component(prosody: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.integration.queue_helpers import module_component
    from tests.kit.integration import make_component

    workdir = tmp_path_factory.mktemp("attributes-component")
    proc = module_component(make_component, prosody, workdir, access={"queue_access_model": "open"})
    yield proc
    proc.stop()


@pytest.fixture
async def publisher(prosody: Any, attr_component: Any, accounts: Any) -> AsyncIterator[Publisher]:
    pub = Publisher(
        f"pub@{prosody.domain}",
        accounts.password,
        accounts.component_jid,
        host=prosody.host,
        port=prosody.c2s_port,
        allow_plain=True,
    )
    await pub.connect()
    yield pub
    try:
        await asyncio.wait_for(pub.close(), 10)
    except (TimeoutError, PublishError):
        pub.abort()


@pytest.mark.parametrize("max_batch", [1, 3])
async def test_attributes_delay_priority_and_ttl_reach_the_worker_and_the_dead_letters(
    prosody: Any, accounts: Any, publisher: Publisher, max_batch: int
) -> None:
    node, dead = unique("attrs"), unique("attrs-dead")
    await publisher.create_queue(dead)
    await publisher.create_queue(node, lock_timeout=60, max_deliveries=5, dead_letter=dead)

    # Waiting before any worker is there: one delayed item, then a batch of three
    # ready ones (the worker's first dispatch can hand those over together).
    published_at = datetime.now(UTC)
    await publisher.publish(
        node,
        json_payload({"n": "later"}),
        "later",
        attributes={"tenant": "acme", "trace": "t-1"},
        delay=1,
        priority="high",
        ttl=300,
    )
    await publisher.publish_batch(
        node,
        [
            PublishItem(json_payload({"n": 1}), "b1", {"tenant": "acme", "row": "1"}),
            PublishItem(json_payload({"n": 2}), "b2", {"tenant": "beta", "row": "2"}, ttl=300),
            (json_payload({"n": 3}), "b3"),  # the old tuple form: no attributes
        ],
    )

    seen: dict[str, tuple[dict[str, str], str, datetime | None, int | None, float]] = {}
    done = asyncio.Event()

    async def handle(job: Job) -> None:
        seen[job.item_id] = (job.attributes, job.priority, job.deliver_at, job.ttl, time.time())
        if job.item_id == "poison":
            await job.dead_letter("cannot parse")
        if len(seen) == 5:
            done.set()

    worker = Worker(
        f"w1@{prosody.domain}",
        accounts.password,
        accounts.component_jid,
        node,
        handle,
        host=prosody.host,
        port=prosody.c2s_port,
        allow_plain=True,
        name="w1",
        queue_requests=3,
        max_batch=max_batch,
    )
    await worker.start()
    try:
        await publisher.publish(
            node, json_payload({"n": "poison"}), "poison", attributes={"tenant": "zeta"}
        )
        await asyncio.wait_for(done.wait(), TIMEOUT)
    finally:
        await asyncio.wait_for(worker.stop(grace=1), 10)

    attributes, priority, deliver_at, ttl, received_at = seen["later"]
    assert attributes["tenant"] == "acme" and attributes["trace"] == "t-1"
    assert (priority, ttl) == ("high", 300)
    assert deliver_at is not None
    assert 0.5 <= (deliver_at - published_at).total_seconds() <= 2.0
    assert received_at >= deliver_at.timestamp(), "a delayed item never comes before its Start"
    assert seen["b1"][0] == {"tenant": "acme", "row": "1"}
    assert seen["b2"][0] == {"tenant": "beta", "row": "2", "TTL": "300"}
    assert seen["b3"][0] == {} and seen["b3"][1] == "medium"
    assert all("delivery-attempt" not in s[0] and "SubID" not in s[0] for s in seen.values())
    if max_batch > 1:
        assert worker.stats.notifications < worker.stats.received, "a batched notice came"
    else:
        assert worker.stats.notifications == worker.stats.received

    # The dead letter keeps the publisher's attributes next to the service's own.
    (letter,) = await publisher.items(dead)
    assert letter.item_id == "poison"
    assert letter.attributes == {"tenant": "zeta"}
    assert letter.headers["reason"] == "cannot parse"
    assert letter.headers["origin-node"] == node


async def test_the_service_refuses_a_delay_past_the_node_bound(publisher: Publisher) -> None:
    node = unique("attrs-bound")
    await publisher.create_queue(node, max_delay=10)
    with pytest.raises(PublishError) as refused:
        await publisher.publish(node, json_payload(1), delay=60)
    assert refused.value.condition == "not-acceptable"
