"""Protocol tests: stanza in, stanza out, no network.

slixmpp's ``SlixTest`` is a synchronous ``unittest`` harness that builds a plain
``ComponentXMPP`` and drives its own event loop, which fits neither our
``QueueComponent`` nor pytest-asyncio; this is the small equivalent. The real
component runs over a fake transport: the test feeds the server's side of the
stream with ``data_received`` (what the socket would do), and reads back what
the component wrote, parsed into stanzas. Handshake, plugins, handlers, the
service and the in-memory store are the real ones; the clock is fake.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import pytest

from tests.kit import FakeClock, build_service
from tests.kit.stanzas import (
    SERVICE,
    FakeTransport,
    Stream,
)
from xmpp_queue.core.model import NodeConfig
from xmpp_queue.core.service import ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.xmpp.component import QueueComponent


@pytest.fixture(autouse=True)
def _no_ca_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    """slixmpp builds a verifying TLS context in every stream's constructor (~0.1 s
    to load the system CA store); an XEP-0114 component never uses it."""
    monkeypatch.setattr(ssl.SSLContext, "set_default_verify_paths", lambda self: None)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def stream(clock: FakeClock) -> AsyncIterator[Stream]:
    from xmpp_queue.storage.store import StateStore

    service = build_service(
        StateStore.in_memory(),
        clock,
        settings=ServiceSettings(
            default_config=NodeConfig(),
            admins=frozenset({"admin@example.org"}),
            access=ServiceAccess.for_domain("example.org"),
        ),
    )
    await service.start()
    comp = QueueComponent(SERVICE, "secret", "127.0.0.1", 5347, service)
    s = Stream(comp, FakeTransport(), clock)
    await s.start()
    yield s
    await s.close()


@pytest.fixture(autouse=True)
def fresh_refusal_log() -> None:
    """The refusal log is one per process: give each test its own budget of lines."""
    from xmpp_queue.xmpp.refusals import REFUSALS

    REFUSALS.clear()
