"""Worker reconnect order and giving up, with fake links (no server).

The real thing (a Prosody or ejabberd restart under a worker and a publisher)
is ``tests/integration/test_client_reconnect.py``.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.client.test_client_stream import FakeLink, deliver
from xmpp_queue.client import AuthenticationFailed, ConnectionLost, Job, ReconnectPolicy, Worker

FAST = ReconnectPolicy(first_delay=0.01, max_delay=0.02)


def lose(link: FakeLink) -> None:
    """The server closes the stream."""
    link.connected = False
    assert link.on_closed is not None
    link.on_closed()


async def until(predicate, within: float = 2.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(within):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


def worker_on(links: list[object], handler, **kw: object) -> Worker:  # type: ignore[no-untyped-def]
    queue = list(links)

    async def factory() -> object:
        step = queue.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step

    return Worker(
        "bee@localhost",
        "pw",
        "queue.localhost",
        "jobs",
        handler,
        name="bee",
        link_factory=factory,  # type: ignore[arg-type]
        **kw,
    )


async def test_after_a_lost_stream_the_worker_acks_on_the_new_one_then_resubscribes() -> None:
    first, second = FakeLink(), FakeLink()
    release = asyncio.Event()

    async def handler(job: Job) -> None:
        await release.wait()

    down = ConnectionLost("server still down")
    worker = worker_on([first, down, second], handler, reconnect=FAST)
    await worker.start()
    deliver(first, "a")
    await asyncio.sleep(0)
    lose(first)
    await until(lambda: "unsubscribe sub-1" in second.log)
    assert second.log == ["unsubscribe sub-1"], "no new subscription while a job is held"
    release.set()
    await until(lambda: "subscribe jobs 1" in second.log)
    assert second.log == ["unsubscribe sub-1", "retract a", "presence", "subscribe jobs 1"]
    assert worker.stats.acked == 1 and worker.reconnects == 1
    assert worker.jid == "bee@localhost/bee", "the same resource on every stream"
    await worker.stop(grace=1)


async def test_a_refused_login_on_reconnect_ends_run_with_that_error() -> None:
    first = FakeLink()

    async def handler(job: Job) -> None:
        return None

    refused = AuthenticationFailed("bee@localhost: not-authorized")
    worker = worker_on([first, refused], handler, reconnect=FAST)
    run = asyncio.ensure_future(worker.run(handle_signals=False))
    await until(lambda: first.on_closed is not None and worker.link is not None)
    lose(first)
    with pytest.raises(AuthenticationFailed):
        await asyncio.wait_for(run, 2)


async def test_giving_up_after_the_policy_s_time_ends_run_with_connection_lost() -> None:
    first = FakeLink()

    async def handler(job: Job) -> None:
        return None

    down = [ConnectionLost("refused")] * 50
    policy = ReconnectPolicy(first_delay=0.01, max_delay=0.02, give_up_after=0.1)
    worker = worker_on([first, *down], handler, reconnect=policy)
    run = asyncio.ensure_future(worker.run(handle_signals=False))
    await until(lambda: worker.link is not None)
    lose(first)
    with pytest.raises(ConnectionLost, match="giving up"):
        await asyncio.wait_for(run, 2)
