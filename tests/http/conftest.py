"""HTTP listener fixtures: the real service over the in-memory store, observed by
the real metrics, served by the real aiohttp listener on a free loopback port.
No XMPP here (tests/integration/test_http.py runs the component against Prosody)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import aiohttp
import pytest

from tests.unit.conftest import FakeClock
from xmpp_queue.core.effects import Effect
from xmpp_queue.core.model import AccessModel, NodeConfig
from xmpp_queue.core.observe import ObservedStore
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.http.actions import DashboardActions
from xmpp_queue.http.health import HealthChecks
from xmpp_queue.http.metrics import QueueMetrics
from xmpp_queue.http.server import OpsServer
from xmpp_queue.storage.store import StateStore

TOKEN = "correct-horse-battery-staple"


@dataclass
class Ops:
    service: PubSubService
    metrics: QueueMetrics
    server: OpsServer
    session: aiohttp.ClientSession
    base: str
    clock: FakeClock
    sent: list[Effect] = field(default_factory=list)
    store: StateStore | None = None

    async def get(self, path: str) -> tuple[int, str]:
        async with self.session.get(self.base + path) as r:
            return r.status, await r.text()

    async def post(
        self, path: str, body: object, token: str | None = None
    ) -> tuple[int, dict[str, object]]:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        async with self.session.post(self.base + path, json=body, headers=headers) as r:
            return r.status, await r.json()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def build(
    clock: FakeClock, max_nodes: int = 100
) -> tuple[PubSubService, QueueMetrics, ObservedStore]:
    metrics = QueueMetrics(max_nodes)
    store = ObservedStore(StateStore.in_memory(), metrics)
    counter = itertools.count(1)
    service = PubSubService(
        store,
        clock,
        lambda: f"id{next(counter)}",
        ServiceSettings(
            NodeConfig(),
            access=ServiceAccess.for_domain("example.org"),
            queue_access_model=AccessModel.OPEN,
        ),
    )
    service.on_batch_committed(metrics.batch_committed)
    return service, metrics, store


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
    actions = DashboardActions(service, send, on_redrive=metrics.redrive_done)
    server = OpsServer("127.0.0.1", 0, service, metrics, health, actions, TOKEN, "queue.test")
    host, port = await server.start()
    async with aiohttp.ClientSession() as session:
        base = f"http://{host}:{port}"
        yield Ops(service, metrics, server, session, base, clock, sent, store.inner)
    await server.stop()
    await service.stop()
