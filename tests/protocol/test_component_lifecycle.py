"""QueueComponent.run(): handshake refusal, reconnect with back-off, stop.

A tiny XEP-0114 server end on 127.0.0.1 (a free port) stands in for Prosody:
it answers the stream header, checks the SHA-1 handshake (XEP-0114 §3) and
then accepts, refuses, or drops the connection as the test asks. Back-off
delays are shrunk so the tests wait for events, not for seconds.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import AsyncIterator

import pytest

from tests.kit import FakeClock, build_service
from tests.kit.stanzas import SERVICE
from xmpp_queue.core.model import NodeConfig
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.xmpp import reconnect as reconnect_module
from xmpp_queue.xmpp.component import QueueComponent
from xmpp_queue.xmpp.reconnect import HandshakeRejected

SECRET = "s3cret"


class FakeServer:
    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.connections = 0
        self.sessions: asyncio.Queue[asyncio.StreamWriter] = asyncio.Queue()
        self.received: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        sid = f"sid{self.connections}"
        try:
            await reader.readuntil(b">")  # the component's stream header
            writer.write(
                "<?xml version='1.0'?><stream:stream "
                "xmlns:stream='http://etherx.jabber.org/streams' "
                f"xmlns='jabber:component:accept' from='{SERVICE}' id='{sid}'>".encode()
            )
            handshake = (await reader.readuntil(b"</handshake>")).decode()
            digest = re.search(r"<handshake>([0-9a-f]+)</handshake>", handshake)
            expected = hashlib.sha1(f"{sid}{self.secret}".encode()).hexdigest()
            if digest is None or digest.group(1) != expected:
                writer.write(
                    b"<stream:error><not-authorized xmlns='urn:ietf:params:xml:ns:xmpp-streams'/>"
                    b"</stream:error></stream:stream>"
                )
                await writer.drain()
                writer.close()
                return
            writer.write(b"<handshake/>")
            await self.sessions.put(writer)
            while data := await reader.read(65536):
                self.received.append(data)
                if b"</stream:stream>" in data:
                    writer.write(b"</stream:stream>")
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


@pytest.fixture
async def service() -> AsyncIterator[PubSubService]:
    from xmpp_queue.storage.store import StateStore

    svc = build_service(
        StateStore.in_memory(),
        FakeClock(),
        settings=ServiceSettings(NodeConfig(), access=ServiceAccess.for_domain("example.org")),
    )
    yield svc
    await svc.stop()


@pytest.fixture
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reconnect_module, "INITIAL_BACKOFF", 0.01)
    monkeypatch.setattr(reconnect_module, "MAX_REPLACED_BACKOFF", 0.02)
    monkeypatch.setattr(reconnect_module, "RETRY_FIRST", 0.01)
    monkeypatch.setattr(reconnect_module, "RETRY_MAX", 0.02)


async def test_xep_0114_wrong_secret_raises_handshake_rejected_without_retry(
    service: PubSubService, caplog: pytest.LogCaptureFixture
) -> None:
    server = FakeServer(SECRET)
    port = await server.start()
    comp = QueueComponent(SERVICE, "wrong", "127.0.0.1", port, service)
    with caplog.at_level(logging.ERROR, logger="xmpp_queue"):
        with pytest.raises(HandshakeRejected, match="not-authorized"):
            await asyncio.wait_for(comp.run(), 10)
    assert server.connections == 1
    [line] = [r.getMessage() for r in caplog.records if r.name.startswith("xmpp_queue")]
    assert "event=handshake_rejected" in line and "condition=not-authorized" in line
    await server.close()


async def test_dropped_connection_reconnects_keeping_state(
    service: PubSubService, quick_backoff: None
) -> None:
    server = FakeServer(SECRET)
    port = await server.start()
    comp = QueueComponent(SERVICE, SECRET, "127.0.0.1", port, service)
    seen = asyncio.Event()
    track = comp.workers.available

    def tracked(jid: str) -> bool:
        seen.set()
        return track(jid)

    comp.workers.available = tracked  # type: ignore[method-assign]
    run = asyncio.create_task(comp.run())
    first = await asyncio.wait_for(server.sessions.get(), 10)
    first.write(f"<presence from='w@example.org/1' to='{SERVICE}'/>".encode())  # state to keep
    await asyncio.wait_for(seen.wait(), 10)
    assert comp.workers.is_available("w@example.org/1")
    first.close()  # the server restarts
    await asyncio.wait_for(server.sessions.get(), 10)
    assert server.connections == 2
    assert comp.workers.is_available("w@example.org/1")
    await comp.stop()
    await asyncio.wait_for(run, 10)  # run() returns after stop()
    await server.close()


async def test_unreachable_server_is_retried_until_stopped(
    service: PubSubService, quick_backoff: None, caplog: pytest.LogCaptureFixture
) -> None:
    server = FakeServer(SECRET)
    port = await server.start()
    await server.close()  # nothing listens on this port any more
    comp = QueueComponent(SERVICE, SECRET, "127.0.0.1", port, service)
    failures = asyncio.Event()
    count = 0

    def failed(_: object) -> None:
        nonlocal count
        count += 1
        if count >= 6:
            failures.set()

    comp.add_event_handler("connection_failed", failed)
    with caplog.at_level(logging.WARNING, logger="xmpp_queue"):
        run = asyncio.create_task(comp.run())
        await asyncio.wait_for(failures.wait(), 10)
        await comp.stop()
        await asyncio.wait_for(run, 10)
    messages = [r.getMessage() for r in caplog.records]
    assert any("event=reconnect_scheduled" in m for m in messages)
    # Issue 24: after a few refusals, one line says what to check, naming the port.
    hints = [m for m in messages if "event=component_port_unreachable" in m]
    assert len(hints) == 1, messages
    assert f"server=127.0.0.1:{port} attempts=5" in hints[0]
    assert "server_host:server_port" in hints[0] and "component_ports" in hints[0]


async def test_a_debug_log_never_holds_the_handshake_digest(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 27: at DEBUG, slixmpp logged the stream id (RECV of the header) and the
    <handshake> digest (SEND), enough for an offline guess of a weak secret."""
    from tests.kit.stanzas import FakeTransport, Stream
    from xmpp_queue.storage.store import StateStore

    service = PubSubService(StateStore.in_memory(), clock, lambda: "id", ServiceSettings())
    await service.start()
    comp = QueueComponent(SERVICE, "weak-secret", "127.0.0.1", 5347, service)
    stream = Stream(comp, FakeTransport(), clock)
    with caplog.at_level(logging.DEBUG):
        await stream.start()
    await stream.close()
    digest = hashlib.sha1(b"stream-1weak-secret").hexdigest()
    sent = b"".join(stream.transport.writes).decode()
    assert digest in sent  # the server still gets it
    assert "<handshake" in caplog.text and "[redacted]" in caplog.text
    assert digest not in caplog.text


def test_a_handshake_logged_as_a_stanza_object_is_redacted_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """slixmpp logs queued stanzas as objects (``Discarded stanza: %s`` with a
    (stanza, filters) tuple) when a connection drops with its handshake unsent."""
    from slixmpp.stanza import Handshake

    from xmpp_queue.slixmpp_seam import STANZA_LOGGER, install_handshake_redaction

    install_handshake_redaction()
    digest = hashlib.sha1(b"stream-2weak-secret").hexdigest()
    handshake = Handshake()
    handshake["value"] = digest
    stanza_log = logging.getLogger(STANZA_LOGGER)
    with caplog.at_level(logging.DEBUG, STANZA_LOGGER):
        stanza_log.debug("Discarded stanza: %s", (handshake, True))
        stanza_log.debug("NOT SENT: %s %s", type(handshake), handshake)
        stanza_log.debug("Cancelling %d slow send tasks", 3)
    assert digest not in caplog.text
    assert caplog.text.count("[redacted]") == 2
    assert "Cancelling 3 slow send tasks" in caplog.text


def test_reconnect_retries_at_once_then_jittered_backoff_capped_near_a_second() -> None:
    """Issue 27 point 8: back within about a second of the server's return."""
    assert reconnect_module.retry_delay(0) == 0.0
    for attempt, base in [(1, 0.25), (2, 0.5), (3, 1.0), (20, 1.0)]:
        delays = [reconnect_module.retry_delay(attempt) for _ in range(200)]
        assert all(base / 2 <= d <= base for d in delays)
        assert len(set(delays)) > 1, "jittered"
