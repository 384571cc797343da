"""The directory's XEP-0114 stream: the public name, answering from :class:`Directory`.

Why a component of its own rather than a :class:`QueueComponent` without
nodes: the directory has no service, store, outbox or timer; every IQ it gets
is answered by one call of ``Directory.answer``, written as text. It stays
connected as the queue component does (``reconnect.py``: back-off, and
``HandshakeRejected`` when the server refuses its name or secret). Presence and
messages addressed to it are ignored.
"""

from __future__ import annotations

import asyncio
from typing import Any

from xmpp_queue.slixmpp_seam import install_handshake_redaction
from xmpp_queue.xmpp.directory import Directory
from xmpp_queue.xmpp.reconnect import ReconnectingComponent

install_handshake_redaction()


class DirectoryComponent(ReconnectingComponent):
    """The public name's component: IQs to :class:`Directory`, nothing else."""

    def __init__(
        self, jid: str, secret: str, server_host: str, server_port: int, directory: Directory
    ) -> None:
        super().__init__(jid, secret, server_host, server_port)
        self.enable_direct_tls = False
        self.directory = directory
        self._iq_tag = f"{{{self.default_ns}}}iq"
        self._tasks: set[asyncio.Task[None]] = set()
        self._watch_session()

    def take_raw(self, xml: Any) -> bool:
        """Every IQ is ours; presence and messages are dropped here too."""
        if xml.tag == self._iq_tag:
            task = self.loop.create_task(self._answer(xml))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return bool(xml.tag.endswith(("}iq", "}presence", "}message")))

    async def _answer(self, xml: Any) -> None:
        reply = await self.directory.answer(xml)
        if reply is not None and self.transport is not None:
            self.send_raw(reply)
