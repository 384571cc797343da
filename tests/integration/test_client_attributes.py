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


async def test_the_client_guide_example_runs_as_written(
    prosody: Any, attr_component: Any, accounts: Any, tmp_path: Any
) -> None:
    """docs/client.md's attributes script, its four settings pointed at Prosody."""
    import re
    import sys

    from tests.kit.integration import REPO_ROOT, subprocess_env

    guide = (REPO_ROOT / "docs" / "client.md").read_text(encoding="utf-8")
    section = guide.split("## Attributes, delays, expiry and priority", 1)[1]
    script = section.split("```python\n", 1)[1].split("```", 1)[0]
    settings = {
        "SERVICE": repr(accounts.component_jid),
        "PUBLISHER": repr((f"pub@{prosody.domain}", accounts.password)),
        "WORKER": repr((f"w1@{prosody.domain}", accounts.password)),
        "CONNECT": repr({"host": prosody.host, "port": prosody.c2s_port, "allow_plain": True}),
    }
    for name, value in settings.items():
        script, n = re.subn(rf"^{name} = .*$", f"{name} = {value}", script, flags=re.M)
        assert n == 1, f"the example sets {name} once"
    path = tmp_path / "attributes_example.py"
    path.write_text(script, encoding="utf-8")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(path),
        env=subprocess_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    order = [line.split()[0] for line in lines]
    assert sorted(order) == ["e1", "e2", "e3", "e4", "e5", "e6"]
    assert order[0] == "e4", "the high-priority item first"
    assert order.index("e5") < order.index("e2") and order.index("e5") < order.index("e3")
    assert order.index("e1") < order.index("e5"), "low after medium"
    by_id = {line.split()[0]: line for line in lines}
    assert "{'tenant': 'acme'}" in by_id["e1"]
    assert by_id["e4"].startswith("e4 high {'TTL': '600', 'Urgency': 'high'} None 600")


async def test_the_queueing_guide_example_runs_as_written(
    prosody: Any, attr_component: Any, accounts: Any, tmp_path: Any
) -> None:
    """docs/queueing.md's dedup/truncation script, its four settings pointed at Prosody."""
    import re
    import sys

    from tests.kit.integration import REPO_ROOT, subprocess_env

    guide = (REPO_ROOT / "docs" / "queueing.md").read_text(encoding="utf-8")
    section = guide.split("## Items with attributes", 1)[1]
    script = section.split("```python\n", 1)[1].split("```", 1)[0]
    settings = {
        "SERVICE": repr(accounts.component_jid),
        "PUBLISHER": repr((f"pub@{prosody.domain}", accounts.password)),
        "WORKER": repr((f"w2@{prosody.domain}", accounts.password)),
        "CONNECT": repr({"host": prosody.host, "port": prosody.c2s_port, "allow_plain": True}),
    }
    for name, value in settings.items():
        script, n = re.subn(rf"^{name} = .*$", f"{name} = {value}", script, flags=re.M)
        assert n == 1, f"the example sets {name} once"
    path = tmp_path / "queueing_example.py"
    path.write_text(script, encoding="utf-8")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(path),
        env=subprocess_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    assert out.decode().strip().splitlines()[-1] == "['urgent', 'r3', 'r4']"


async def test_the_topics_example_runs_as_written(
    prosody: Any, attr_component: Any, accounts: Any, tmp_path: Any
) -> None:
    """docs/queueing.md's billing topic with three subscriptions, one filtered."""
    import re
    import sys

    from tests.kit.integration import REPO_ROOT, subprocess_env

    guide = (REPO_ROOT / "docs" / "queueing.md").read_text(encoding="utf-8")
    section = guide.split("## Topics and subscriptions", 1)[1]
    script = section.split("```python\n", 1)[1].split("```", 1)[0]
    printed = section.split("It prints:\n\n```\n", 1)[1].split("```", 1)[0]
    settings = {
        "SERVICE": repr(accounts.component_jid),
        "PUBLISHER": repr((f"pub@{prosody.domain}", accounts.password)),
        "WORKER": repr((f"w3@{prosody.domain}", accounts.password)),
        "CONNECT": repr({"host": prosody.host, "port": prosody.c2s_port, "allow_plain": True}),
    }
    for name, value in settings.items():
        script, n = re.subn(rf"^{name} = .*$", f"{name} = {value}", script, flags=re.M)
        assert n == 1, f"the example sets {name} once"
    path = tmp_path / "topics_example.py"
    path.write_text(script, encoding="utf-8")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(path),
        env=subprocess_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    assert out.decode() == printed
