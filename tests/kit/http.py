"""The HTTP suite's helpers: the service operations behind the listener under test.
Fixtures: tests/http/conftest.py.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tests.kit import FakeClock, build_service
from xmpp_queue.core.effects import Effect
from xmpp_queue.core.model import SYSTEM, AccessModel, NodeConfig
from xmpp_queue.core.observe import ObservedStore
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.http.metrics import QueueMetrics
from xmpp_queue.http.server import OpsServer
from xmpp_queue.push.policy import PushPolicy
from xmpp_queue.push.registry import PushSubscriptions
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
    pushes: PushSubscriptions | None = None

    async def get(self, path: str) -> tuple[int, str]:
        async with self.session.get(self.base + path) as r:
            return r.status, await r.text()

    async def post(
        self, path: str, body: object, token: str | None = None
    ) -> tuple[int, dict[str, object]]:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        async with self.session.post(self.base + path, json=body, headers=headers) as r:
            return r.status, await r.json()


LOOPBACK_PUSH = PushPolicy(
    allowed_hosts=("127.0.0.1",),
    allowed_networks=(ipaddress.ip_network("127.0.0.0/8"),),
    allow_http=True,
    request_timeout=5,
)


def push_views(pushes: PushSubscriptions) -> Any:
    """What app/term.py hands the listener: a queue's push subscriptions, masked."""

    async def views(node: str) -> list[dict[str, str]]:
        return [p.view() for p in await pushes.list(SYSTEM, node)]

    return views


def build(
    clock: FakeClock, max_nodes: int = 100
) -> tuple[PubSubService, QueueMetrics, ObservedStore]:
    metrics = QueueMetrics(max_nodes)
    store = ObservedStore(StateStore.in_memory(), metrics)
    service = build_service(
        store,
        clock,
        settings=ServiceSettings(
            NodeConfig(),
            # queue.test: the component's own domain, where push subscriptions live
            access=dataclasses.replace(
                ServiceAccess.for_domain("example.org"), own_domain="queue.test"
            ),
            queue_access_model=AccessModel.OPEN,
        ),
    )
    service.on_batch_committed(metrics.batch_committed)
    return service, metrics, store
