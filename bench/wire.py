"""Bare-socket XMPP for load generation: a stanza splitter and a tiny c2s client.

Why not slixmpp: the load generator shares the machine's 2 cores with Prosody and the
component under test. slixmpp spends 100+ microseconds of CPU on every stanza; a client
that cheap-parses byte buffers (find and regex) and writes pre-formatted bytes costs a
few, so the figures measure the component and not the clients.

The splitter relies on what servers actually send: each top-level stanza is either
self-closing or closed by `</name>`, and a stanza never nests an element of its own name
(true for the iq/message/presence traffic of the benchmark; not a general XML parser).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
from collections.abc import Callable

STREAM_NS = "http://etherx.jabber.org/streams"
_NAME = re.compile(rb"<([^\s/>]+)")
_ATTR_CACHE: dict[bytes, re.Pattern[bytes]] = {}


def attr(start_tag: bytes, name: bytes) -> bytes | None:
    """The value of attribute `name` in a start tag (either quote style), or None."""
    pattern = _ATTR_CACHE.get(name)
    if pattern is None:
        pattern = re.compile(rb"\s" + re.escape(name) + rb"=(?:'([^']*)'|\"([^\"]*)\")")
        _ATTR_CACHE[name] = pattern
    m = pattern.search(start_tag)
    if m is None:
        return None
    return m.group(1) if m.group(1) is not None else m.group(2)


def start_tag(stanza: bytes) -> bytes:
    """The first start tag of a stanza (attributes of the stanza itself)."""
    return stanza[: stanza.find(b">") + 1]


class StanzaSplitter:
    """Cuts a byte stream into top-level elements; the stream header comes out whole."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf + data if self._buf else data
        out: list[bytes] = []
        pos = 0
        while True:
            start = buf.find(b"<", pos)
            if start < 0:
                pos = len(buf)
                break
            gt = buf.find(b">", start)
            if gt < 0:
                pos = start
                break
            if buf.startswith(b"<?", start):
                pos = gt + 1
                continue
            if buf.startswith(b"<stream:stream", start) or buf.startswith(b"</", start):
                out.append(buf[start : gt + 1])
                pos = gt + 1
                continue
            if buf[gt - 1] == 0x2F:  # "/>": self-closing
                out.append(buf[start : gt + 1])
                pos = gt + 1
                continue
            m = _NAME.match(buf, start)
            assert m is not None
            end_tag = b"</" + m.group(1) + b">"
            end = buf.find(end_tag, gt + 1)
            if end < 0:
                pos = start
                break
            end += len(end_tag)
            out.append(buf[start:end])
            pos = end
        self._buf = buf[pos:]
        return out


class XmppError(RuntimeError):
    """The server refused a step of the login, or the stream closed."""


class LightClient(asyncio.Protocol):
    """One c2s session: stream, SASL PLAIN, resource binding, then raw bytes both ways.

    A protocol object rather than a StreamReader: after set-up, `on_batch` is called
    straight from the event loop with all complete stanzas of one socket read (no task
    wake-up per read), and whatever it returns is written in one `transport.write`, so
    the replies to one read leave as one TCP segment.
    """

    def __init__(
        self, host: str, port: int, domain: str, user: str, password: str, resource: str
    ) -> None:
        self.host, self.port, self.domain = host, port, domain
        self.user, self.password, self.resource = user, password, resource
        self.jid = f"{user}@{domain}/{resource}"
        self.bare = f"{user}@{domain}"
        self.on_batch: Callable[[list[bytes]], bytes | None] | None = None
        self.closed: asyncio.Future[None] | None = None
        self._transport: asyncio.Transport | None = None
        self._splitter = StanzaSplitter()
        self._pending: list[bytes] = []
        self._arrived = asyncio.Event()

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        stanzas = self._splitter.feed(data)
        if self.on_batch is not None:
            reply = self.on_batch(stanzas)
            if reply:
                self._transport.write(reply)  # type: ignore[union-attr]
        else:
            self._pending.extend(stanzas)
            self._arrived.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._arrived.set()
        if self.closed is not None and not self.closed.done():
            self.closed.set_exception(XmppError(f"stream of {self.jid} closed ({exc})"))
            self.closed.exception()  # whoever waits on it sees it; nobody else must log it

    # set-up
    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        self.closed = loop.create_future()
        await loop.create_connection(lambda: self, self.host, self.port)
        await self._open_stream()
        await self._until(lambda s: s.startswith(b"<stream:features"))
        token = base64.b64encode(f"\0{self.user}\0{self.password}".encode()).decode()
        self.send(
            f"<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>{token}</auth>"
        )
        answer = await self._until(lambda s: s.startswith((b"<success", b"<failure")))
        if answer.startswith(b"<failure"):
            raise XmppError(f"SASL failed for {self.bare}: {answer!r}")
        self._splitter = StanzaSplitter()
        await self._open_stream()
        await self._until(lambda s: s.startswith(b"<stream:features"))
        answer = await self.request(
            "<iq type='set' id='bind1'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'>"
            f"<resource>{self.resource}</resource></bind></iq>",
            "bind1",
        )
        m = re.search(rb"<jid>([^<]+)</jid>", answer)
        if m is None:
            raise XmppError(f"bind failed: {answer!r}")
        self.jid = m.group(1).decode()

    async def _open_stream(self) -> None:
        self.send(
            f"<?xml version='1.0'?><stream:stream to='{self.domain}' xmlns='jabber:client' "
            f"xmlns:stream='{STREAM_NS}' version='1.0'>"
        )

    async def _until(self, wanted: Callable[[bytes], bool]) -> bytes:
        """Wait until a stanza satisfies `wanted`; the others stay queued for later."""
        while True:
            for i, stanza in enumerate(self._pending):
                if wanted(stanza):
                    del self._pending[i]
                    return stanza
            if self._transport is None:
                raise XmppError(f"stream of {self.jid} closed by the server")
            self._arrived.clear()
            await self._arrived.wait()

    async def request(self, iq: str | bytes, iq_id: str) -> bytes:
        """Send one IQ and wait for its answer (set-up only; the hot path is `on_batch`)."""
        self.send(iq)
        key = iq_id.encode()
        return await self._until(
            lambda s: s.startswith(b"<iq") and attr(start_tag(s), b"id") == key
        )

    def hand_over(self, on_batch: Callable[[list[bytes]], bytes | None]) -> None:
        """Switch to the hot path; stanzas queued during set-up are handled first."""
        self.on_batch = on_batch
        pending, self._pending = self._pending, []
        if pending:
            reply = on_batch(pending)
            if reply:
                self.send(reply)

    def release(self) -> None:
        """Back to queueing stanzas (between phases and before closing)."""
        self.on_batch = None

    def send(self, data: str | bytes) -> None:
        if self._transport is None:
            raise XmppError(f"stream of {self.jid} is closed")
        self._transport.write(data.encode() if isinstance(data, str) else data)

    async def close(self) -> None:
        self.on_batch = None
        transport = self._transport
        if transport is None:
            return
        with contextlib.suppress(ConnectionError, RuntimeError):
            transport.write(b"</stream:stream>")
        transport.close()
        if self.closed is not None and not self.closed.done():
            self.closed.set_result(None)
