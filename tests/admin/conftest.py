"""Admin-command protocol tests: the real service over the memory store, a real
slixmpp component on an in-memory transport, stanzas in as XML, stanzas out as
slixmpp objects. No network, no sleeps: every wait is for a stanza or a task."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import pytest
from slixmpp import ComponentXMPP

from tests.kit.admin import (
    DB_URL,
    SERVICE,
    FakeClock,
    Monotonic,
    Transcript,
    _UnusedTlsContext,
    new_service,
)
from xmpp_queue.admin.commands import AdminCommandSet
from xmpp_queue.core.service import PubSubService
from xmpp_queue.xmpp.payloads import canonical_payload_text


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def service(clock: FakeClock) -> AsyncIterator[PubSubService]:
    svc = new_service(clock)
    await svc.start()
    yield svc
    await svc.stop()


@pytest.fixture
async def other_service(clock: FakeClock) -> AsyncIterator[PubSubService]:
    """A twin of ``service``: the same seed there, the protocol operation here."""
    svc = new_service(clock)
    await svc.start()
    yield svc
    await svc.stop()


@pytest.fixture
def monotonic() -> Monotonic:
    return Monotonic()


@pytest.fixture
def unused_tls(monkeypatch: pytest.MonkeyPatch) -> None:
    """These streams never use TLS, but loading the CA store costs ~0.2 s per component."""
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: _UnusedTlsContext())


@pytest.fixture
async def transcript(
    service: PubSubService, monotonic: Monotonic, unused_tls: None
) -> AsyncIterator[Transcript]:
    component = ComponentXMPP(SERVICE, "secret", "127.0.0.1", 0)
    for plugin in ("xep_0030", "xep_0004", "xep_0050"):
        component.register_plugin(plugin)
    t = Transcript(component)
    AdminCommandSet(
        component,
        service,
        frozenset({"admin@example.org", "ROOT@example.org"}),
        DB_URL,
        send_effects=t.record_effects,
        session_ttl=600,
        monotonic=monotonic,
        read_payload=canonical_payload_text,
    ).install()
    t.handshake_accepted()  # after install, as in the app: the plugin's session_bind runs
    yield t
    t.close()
