"""HTTP listener fixtures: the real service over the in-memory store, observed by
the real metrics, served by the real aiohttp listener on a free loopback port.
No XMPP here (tests/integration/test_http.py runs the component against Prosody)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import aiohttp
import pytest

from tests.kit import FakeClock
from tests.kit.http import (
    LOOPBACK_PUSH,
    TOKEN,
    Ops,
    build,
    push_views,
)
from xmpp_queue.core.effects import Effect
from xmpp_queue.http.actions import DashboardActions
from xmpp_queue.http.health import HealthChecks
from xmpp_queue.http.server import OpsServer
from xmpp_queue.push.registry import PushSubscriptions
from xmpp_queue.runtime.outbox import Outbox
from xmpp_queue.storage.store import StateStore


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def ops(clock: FakeClock) -> AsyncIterator[Ops]:
    service, metrics, store = build(clock)
    assert isinstance(store.inner, StateStore)
    store_writes = store.inner.health
    await service.start()
    sent: list[Effect] = []

    def send(effects: Sequence[Effect]) -> None:
        sent.extend(effects)

    health = HealthChecks(
        connected=lambda: metrics.is_connected,
        ping_database=lambda: store.ping(clock()),
        write_failure=lambda: None if store_writes.ok else store_writes.error,
    )
    pushes = PushSubscriptions(service, Outbox(), LOOPBACK_PUSH, "queue.test")
    await pushes.start()  # its HTTP client session, as app/term.py starts it
    actions = DashboardActions(service, send, on_redrive=metrics.redrive_done, pushes=pushes)
    server = OpsServer(
        "127.0.0.1",
        0,
        service,
        metrics,
        health,
        actions,
        TOKEN,
        "queue.test",
        push_views=push_views(pushes),
    )
    host, port = await server.start()
    async with aiohttp.ClientSession() as session:
        base = f"http://{host}:{port}"
        yield Ops(service, metrics, server, session, base, clock, sent, store.inner, pushes)
    await server.stop()
    await pushes.close()
    await service.stop()
