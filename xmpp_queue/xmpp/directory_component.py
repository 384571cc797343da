"""The directory's XEP-0114 stream: the public name, answering from :class:`Directory`.

Why a component of its own rather than a :class:`QueueComponent` without
nodes: the directory has no service, store, outbox or timer; every IQ it gets
is answered by one call of ``Directory.answer``, written as text. Like the
queue component it reconnects by itself (a server restart) and gives up only
when the server refuses its handshake (``HandshakeRejected``: retrying cannot fix
a wrong secret). Presence and messages addressed to it are ignored.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from xmpp_queue.slixmpp_seam import SeamComponent, install_handshake_redaction
from xmpp_queue.xmpp.component import REJECTING_CONDITIONS, HandshakeRejected, retry_delay
from xmpp_queue.xmpp.directory import Directory

log = logging.getLogger("xmpp_queue.xmpp.directory")

install_handshake_redaction()


class DirectoryComponent(SeamComponent):
    """The public name's component: IQs to :class:`Directory`, nothing else."""

    def __init__(
        self, jid: str, secret: str, server_host: str, server_port: int, directory: Directory
    ) -> None:
        super().__init__(jid, secret, server_host, server_port)
        self.enable_direct_tls = False
        self.directory = directory
        self._iq_tag = f"{{{self.default_ns}}}iq"
        self._tasks: set[asyncio.Task[None]] = set()
        self._ended: asyncio.Future[str] | None = None
        self._stopping = asyncio.Event()
        self._connected = False
        self._stream_error: str | None = None
        self.add_event_handler("session_start", self._on_session_start)
        self.add_event_handler("stream_error", self._on_stream_error)
        self.add_event_handler("connection_failed", self._on_failed)
        self.add_event_handler("disconnected", self._on_disconnected)

    def take_raw(self, xml: Any) -> bool:
        """Every IQ is ours; presence and messages are dropped here too."""
        if xml.tag == self._iq_tag:
            task = self.loop.create_task(self._answer(xml))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return xml.tag.endswith(("}iq", "}presence", "}message"))

    async def _answer(self, xml: Any) -> None:
        reply = await self.directory.answer(xml)
        if reply is not None and self.transport is not None:
            self.send_raw(reply)

    async def run(self) -> None:
        """Stay connected until :meth:`stop` (back-off as the queue component's)."""
        attempt = 0
        while not self._stopping.is_set():
            self._ended = asyncio.get_running_loop().create_future()
            self._connected, self._stream_error = False, None
            self.connect(self.server_host, self.server_port)
            end = await self._ended
            if self._stopping.is_set():
                break
            if end == "rejected":
                raise HandshakeRejected(
                    f"{self.server_host}:{self.server_port} rejected component "
                    f"{self.boundjid.bare} ({self._stream_error})"
                )
            attempt = 0 if end == "lost" else attempt + 1
            delay = retry_delay(attempt) if end != "replaced" else 1.0
            log.warning("event=reconnect_scheduled jid=%s reason=%s", self.boundjid.bare, end)
            try:
                await asyncio.wait_for(self._stopping.wait(), delay)
            except TimeoutError:
                pass

    async def stop(self) -> None:
        self._stopping.set()
        self.cancel_connection_attempt()
        if self.transport is not None:
            await self.disconnect(wait=2.0, reason="stopping")
        self._end("stopped")

    def _end(self, how: str) -> None:
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(how)

    def _on_session_start(self, _: Any) -> None:
        self._connected = True
        log.info("event=connected jid=%s role=directory", self.boundjid.bare)

    def _on_stream_error(self, error: Any) -> None:
        self._stream_error = error["condition"] or "undefined-condition"

    def _on_failed(self, _: Any) -> None:
        self.cancel_connection_attempt()
        self._end("failed")

    def _on_disconnected(self, _: Any) -> None:
        if self._connected:
            self._end("replaced" if self._stream_error == "conflict" else "lost")
        elif self._stream_error in REJECTING_CONDITIONS or (
            self.handshake_sent and self._stream_error is None
        ):
            self._end("rejected")
        else:
            self._end("failed")
