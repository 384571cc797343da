"""Unit-test fixtures: a fake clock and the service over the in-memory store."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from xmpp_queue.core.model import Actor, NodeConfig
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess


class FakeClock:
    """Time that moves only when a test says so."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def service(clock: FakeClock) -> AsyncIterator[PubSubService]:
    from xmpp_queue.storage.store import StateStore

    counter = itertools.count(1)
    svc = PubSubService(
        StateStore.in_memory(),
        clock,
        lambda: f"id{next(counter)}",
        ServiceSettings(
            default_config=NodeConfig(),
            admins=frozenset({"admin@example.org"}),
            access=ServiceAccess.for_domain("example.org"),
        ),
    )
    await svc.start()
    yield svc
    await svc.stop()


OWNER = Actor("owner@example.org/desk")
PUB = Actor("pub@example.org/engine")
ALICE = Actor("alice@example.org/a")
BOB = Actor("bob@example.org/b")
CAROL = Actor("carol@example.org/c")
EVE = Actor("eve@example.org/x")
ADMIN = Actor("admin@example.org/console")
