"""A worker and a publisher survive a restart of the XMPP server (Prosody and ejabberd).

Each test starts its own server (the session servers are shared and must not
restart under other tests), the component on it, a worker and a publisher;
then restarts the server in the middle of a stream of publishes. The
component, the worker and the publisher all lose their streams and come back
on their own. No item may be lost: every published number is processed (at
least once: a duplicate after the restart is allowed, and documented).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.queue_helpers import unique
from tests.kit.env import missing
from tests.kit.integration import COMPONENTS, PASSWORD, USERS
from xmpp_queue.client import Job, Publisher, ReconnectPolicy, Worker, json_payload
from xmpp_queue.servers import PrivateEjabberd, PrivateProsody, ServerError, ServerNotInstalled

pytestmark = pytest.mark.integration

ITEMS = 60
TIMEOUT = 60.0
QUICK = ReconnectPolicy(first_delay=0.2, max_delay=2.0, give_up_after=60.0)


@pytest.fixture(params=["prosody", "ejabberd"])
def own_server(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A private server for this test alone: it is going to be restarted."""
    kind = PrivateProsody if request.param == "prosody" else PrivateEjabberd
    server = kind(COMPONENTS, dict.fromkeys(USERS, PASSWORD))
    try:
        server.start()
    except ServerNotInstalled as exc:
        missing(str(exc))
    except ServerError as exc:
        if "needs root" in str(exc):
            missing(f"{request.param}: {exc}")
        raise
    yield server
    server.stop()


async def test_worker_and_publisher_survive_a_server_restart_with_no_item_lost(
    own_server: Any, component: Any, accounts: Any
) -> None:
    await component(server=own_server)
    node = unique("q")
    done: Counter[int] = Counter()
    all_done = asyncio.Event()

    async def handle(job: Job) -> None:
        await asyncio.sleep(0.01)
        done[job.json()["n"]] += 1
        if len(done) == ITEMS:
            all_done.set()

    common: dict[str, Any] = {
        "host": own_server.host,
        "port": own_server.c2s_port,
        "allow_plain": True,
        "reconnect": QUICK,
    }
    publisher = Publisher(
        f"pub@{own_server.domain}", PASSWORD, accounts.component_jid, window=4, **common
    )
    await publisher.connect()
    await publisher.create_queue(node, lock_timeout=5, members=[f"w1@{own_server.domain}"])
    worker = Worker(
        f"w1@{own_server.domain}",
        PASSWORD,
        accounts.component_jid,
        node,
        handle,
        queue_requests=2,
        name="restart-test",
        **common,
    )
    await worker.start()
    try:
        futures = []
        restarting: asyncio.Future[None] | None = None
        for n in range(ITEMS):
            if n == ITEMS // 3:
                # Mid-stream, and publishing goes on during the outage: publishes
                # in flight and submitted meanwhile wait for the new stream.
                restarting = asyncio.ensure_future(asyncio.to_thread(own_server.restart))
            futures.append(await publisher.submit(node, json_payload({"n": n})))
            await asyncio.sleep(0.01)
        assert restarting is not None
        await asyncio.wait_for(restarting, TIMEOUT)
        ids = await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT)
        assert len(ids) == ITEMS
        await asyncio.wait_for(all_done.wait(), TIMEOUT)
        assert sorted(done) == list(range(ITEMS)), "no item lost"
        assert worker.reconnects >= 1 and publisher.reconnects >= 1
        assert not worker.stopping, "the worker carries on after the restart"
    finally:
        await asyncio.wait_for(worker.stop(grace=2), 20)
        await asyncio.wait_for(publisher.close(), 20)


DOWN_FOR = 8.0  # long enough for the old back-off (0.5 s doubling) to reach 8 s gaps


async def test_clients_are_back_within_seconds_of_the_server_s_return(
    component: Any, accounts: Any
) -> None:
    """Issue 27 point 8: after an outage of several seconds, the component, a worker
    and a publisher (default policies) are back within about a second or two of
    Prosody's return: the first retry goes at once and the back-off stays small."""
    server = PrivateProsody(COMPONENTS, dict.fromkeys(USERS, PASSWORD))
    try:
        server.start()
    except ServerNotInstalled as exc:
        missing(str(exc))
    try:
        await component(server=server)
        node = unique("back")
        handled: list[float] = []

        async def handle(job: Job) -> None:
            handled.append(asyncio.get_running_loop().time())

        common: dict[str, Any] = {
            "host": server.host,
            "port": server.c2s_port,
            "allow_plain": True,
        }
        publisher = Publisher(f"pub@{server.domain}", PASSWORD, accounts.component_jid, **common)
        await publisher.connect()
        await publisher.create_queue(node, members=[f"w1@{server.domain}"])
        worker = Worker(
            f"w1@{server.domain}",
            PASSWORD,
            accounts.component_jid,
            node,
            handle,
            name="back-test",
            **common,
        )
        await worker.start()
        try:
            await asyncio.to_thread(server.restart, DOWN_FOR)
            loop = asyncio.get_running_loop()
            returned = loop.time()
            async with asyncio.timeout(30):
                while worker.reconnects < 1 or publisher.reconnects < 1:  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
            clients_back = loop.time() - returned
            await asyncio.wait_for(await publisher.submit(node, json_payload({"n": 1})), 30)
            async with asyncio.timeout(30):
                while not handled:  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
            work_back = handled[0] - returned
            print(f"clients back {clients_back:.2f}s, work flowing {work_back:.2f}s after return")
            assert clients_back < 2.5, f"clients back {clients_back:.1f}s after the return"
            assert work_back < 3.5, f"work flowing {work_back:.1f}s after the return"
        finally:
            await asyncio.wait_for(worker.stop(grace=2), 20)
            await asyncio.wait_for(publisher.close(), 20)
    finally:
        server.stop()
