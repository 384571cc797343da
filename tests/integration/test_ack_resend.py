"""Acks lost with a component restart are sent again (issue 27, point 3).

Through Prosody and ejabberd (which answer for a missing component
differently: remote-server-timeout, and forbidden).

A worker's window is full; the component goes away (SIGTERM, or SIGKILL as a
crash) and comes back on the same database while the worker's stream to
the XMPP server stays up. The worker finishes its jobs while the component is away:
the server answers those acks for the missing component, or they die unread in
the killed process. The queue's lock timeout is 300 s, so the only way the
worker gets new work within seconds of the restart is that its acks were sent
again and the service released the locks.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.integration.queue_helpers import unique
from tests.kit.integration import PASSWORD
from xmpp_queue.client import Job, Publisher, ReconnectPolicy, Worker, json_payload

pytestmark = pytest.mark.integration

WINDOW = 4
ITEMS = 12
QUICK_ENOUGH = 15.0  # seconds after the restart; the lock timeout is 300


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
async def test_a_full_window_whose_acks_were_lost_gets_work_soon_after_a_restart(
    how: str, xmpp_server: Any, component: Any, accounts: Any, database_url: str
) -> None:
    proc = await component(server=xmpp_server, database_url=database_url)
    node = unique("resend")
    gate = asyncio.Event()
    handled: dict[int, float] = {}

    async def handle(job: Job) -> None:
        await gate.wait()
        handled.setdefault(job.json()["n"], time.monotonic())

    common: dict[str, Any] = {
        "host": xmpp_server.host,
        "port": xmpp_server.c2s_port,
        "allow_plain": True,
        "reconnect": ReconnectPolicy(give_up_after=60.0),
    }
    publisher = Publisher(f"pub@{xmpp_server.domain}", PASSWORD, accounts.component_jid, **common)
    await publisher.connect()
    worker = Worker(
        f"w1@{xmpp_server.domain}",
        PASSWORD,
        accounts.component_jid,
        node,
        handle,
        queue_requests=WINDOW,
        name=f"resend-{how}",
        **common,
    )
    try:
        await publisher.create_queue(node, lock_timeout=300, members=[f"w1@{xmpp_server.domain}"])
        await worker.start()
        ids = [await publisher.submit(node, json_payload({"n": n})) for n in range(ITEMS)]
        await asyncio.wait_for(asyncio.gather(*ids), 30)
        async with asyncio.timeout(30):
            while worker.in_flight < WINDOW:  # noqa: ASYNC110
                await asyncio.sleep(0.05)

        if how == "sigkill":
            gate.set()  # the acks race the crash: some die unread in the process
            await asyncio.sleep(0)
            await asyncio.to_thread(proc.kill)
        else:
            await proc.astop()
            gate.set()  # the server answers these acks for the missing component
        await asyncio.sleep(1.0)
        await proc.astart()
        restarted = time.monotonic()

        async with asyncio.timeout(60):
            while len(handled) < ITEMS:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        after = sorted(handled.values())[WINDOW] - restarted
        assert after < QUICK_ENOUGH, f"new work {after:.1f}s after the restart"
        assert sorted(handled) == list(range(ITEMS))
        assert not worker.stopping
    finally:
        await asyncio.wait_for(worker.stop(grace=2), 20)
        await asyncio.wait_for(publisher.close(), 20)
