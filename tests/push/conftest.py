"""Push-sink test fixtures: a fake clock and the service over the in-memory store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.kit import FakeClock, build_service
from xmpp_queue.core.service import PubSubService


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def service(clock: FakeClock) -> AsyncIterator[PubSubService]:
    from xmpp_queue.storage.store import StateStore

    svc = build_service(StateStore.in_memory(), clock)
    await svc.start()
    yield svc
    await svc.stop()
