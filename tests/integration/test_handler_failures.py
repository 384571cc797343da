"""Handlers that fail or outlast a drain, through a real Prosody and the component
(issue 24): the dead letter says why, a failure is one log line, and a blocking
handler past its drain grace keeps its item (no second worker runs it meanwhile).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from tests.integration.queue_helpers import unique
from xmpp_queue.client import Job, Publisher, PublishError, Worker, in_thread, json_payload

pytestmark = pytest.mark.integration

TIMEOUT = 20.0

WorkerFactory = Callable[..., Awaitable[Worker]]


@pytest.fixture(scope="module")
def shared_component(prosody: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.integration.queue_helpers import module_component
    from tests.kit.integration import make_component

    workdir = tmp_path_factory.mktemp("failures-component")
    proc = module_component(make_component, prosody, workdir, access={"queue_access_model": "open"})
    yield proc
    proc.stop()


@pytest.fixture
async def publisher(prosody: Any, shared_component: Any, accounts: Any) -> AsyncIterator[Publisher]:
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


@pytest.fixture
async def worker(
    prosody: Any, shared_component: Any, accounts: Any
) -> AsyncIterator[WorkerFactory]:
    made: list[Worker] = []

    async def make(user: str, node: str, handler: Any, **options: Any) -> Worker:
        w = Worker(
            f"{user}@{prosody.domain}",
            accounts.password,
            accounts.component_jid,
            node,
            handler,
            host=prosody.host,
            port=prosody.c2s_port,
            allow_plain=True,
            name=user,
            **options,
        )
        made.append(w)
        await w.start()
        return w

    yield make
    for w in made:
        if not w.stopping:
            try:
                await asyncio.wait_for(w.stop(grace=1), 10)
            except TimeoutError:
                w.abort()


async def until(predicate: Callable[[], bool], within: float = TIMEOUT) -> None:
    async with asyncio.timeout(within):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def test_a_dead_letter_says_why_and_each_failure_is_one_log_line(
    publisher: Publisher, worker: WorkerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="xmpp_queue.client")
    node, dead = unique("q"), unique("dead")
    await publisher.create_queue(dead)
    await publisher.create_queue(
        node, lock_timeout=60, max_deliveries=3, retry_delay=0, dead_letter=dead
    )
    letters: list[Job] = []

    async def always_fail(job: Job) -> None:
        raise ValueError(f"cannot parse row {job.json()['row']}")

    async def collect(job: Job) -> None:
        letters.append(job)

    w1 = await worker("w1", node, always_fail)
    await worker("w2", dead, collect)
    await publisher.publish(node, json_payload({"row": 7}), item_id="p1")
    await until(lambda: len(letters) == 1)
    (letter,) = letters
    assert letter.headers["reason"] == "max-deliveries"
    assert letter.headers["last-error"] == "ValueError: cannot parse row 7"
    history = json.loads(letter.headers["error-history"])
    assert [e["delivery"] for e in history] == [1, 2, 3]
    assert {e["by"] for e in history} == {w1.jid}
    assert w1.stats.failed == 3
    failures = [r for r in caplog.records if "event=job_failed" in r.getMessage()]
    assert len(failures) == 3, "one line per failure"
    assert [bool(r.exc_info) for r in failures] == [True, False, False], "one traceback"
    assert all("error='ValueError: cannot parse row 7'" in r.getMessage() for r in failures)


async def test_a_thread_past_its_drain_grace_keeps_its_item_from_other_workers(
    publisher: Publisher, worker: WorkerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """The issue's case: SIGTERM (here ``stop``), an ``in_thread`` handler longer than
    ``drain_grace`` and the node's lock timeout; another worker waits on the queue."""
    node = unique("q")
    await publisher.create_queue(node, lock_timeout=2, retry_delay=0)
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def blocking(job: Job) -> None:
        ran.append("w1")
        started.set()
        release.wait(TIMEOUT)

    async def other(job: Job) -> None:
        ran.append("w2")

    w1 = await worker("w1", node, in_thread(blocking), drain_grace=0.2)
    await publisher.publish(node, json_payload("long"), item_id="long")
    await until(started.is_set)
    w2 = await worker("w2", node, other)
    stopping = asyncio.ensure_future(w1.stop())
    await until(lambda: "event=drain_waits" in caplog.text)
    await asyncio.sleep(3.5)  # past the 2 s lock timeout: time passing is the point
    assert ran == ["w1"], "nobody else ran the job while its thread ran"
    assert not stopping.done()
    release.set()
    await asyncio.wait_for(stopping, TIMEOUT)
    assert (w1.stats.acked, w1.stats.lost, w2.stats.received) == (1, 0, 0)
    assert w1.stats.extended >= 2
