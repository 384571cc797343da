"""A worker whose node moved to another shard keeps working (docs/scaling.md).

Why: a sharded service may move a queue to another shard while workers hold
its items. The subscription rows and locks move with the node, so a worker need
not subscribe again; it must only talk to the new shard. It learns of the move
in whichever way comes first:

- **a redirect** answering one of its lock requests (ack, nack, extend ...):
  the old shard no longer serves the node. The link is pointed at the shard the
  redirect names and the request is sent again there (``resend.py``);
- **events from another JID**: the new shard hands out the node's waiting
  items. A message from a JID that is not the link's service is normally dropped
  (a spoof); for events of our node, the public name is asked again where the
  node lives, and only if it names the sender is the link pointed there and are
  the messages (kept meanwhile) taken. The directory may answer from a cache
  for a moment, so it is asked a few times.

Either way the worker sends its presence to the new shard (its locks are tied
to it there), and remembers the new shard for reconnects.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any
from xml.etree import ElementTree as ET

from xmpp_queue.client import wire
from xmpp_queue.client.errors import ClientError, StanzaError
from xmpp_queue.client.placement import redirect_target

if TYPE_CHECKING:
    from xmpp_queue.client.link import PubSubLink

log = logging.getLogger("xmpp_queue.client")

ASK_TIMES = 5  # the directory's answers are cached for about 2 s: ask this often
ASK_EVERY = 1.0
KEEP_AT_MOST = 1000  # messages kept while asking (more are dropped: they come back)


class NodeMoves:
    """Follows the worker's node to its new shard (the module docstring)."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker  # the Worker: its node, placements, link, service_jid
        self._kept: list[ET.Element] = []
        self._asking: asyncio.Task[None] | None = None

    def _link(self) -> PubSubLink | None:
        link: PubSubLink | None = self.worker.link
        return link

    def point(self, link: PubSubLink, service: str) -> None:
        """Talk to *service* about the node from now on."""
        if link.service != service:
            log.info(
                "event=worker_node_moved worker=%s node=%s from=%s to=%s",
                self.worker.name,
                self.worker.node,
                link.service,
                service,
            )
            link.service = self.worker.service_jid = service
            self.worker.placements.learn(self.worker.node, service)
            link.send_presence()  # our locks are tied to our presence there

    def on_redirect(self, error: StanzaError) -> bool:
        """A lock request was redirected: point the link there; True to send again."""
        target = redirect_target(error)
        link = self._link()
        if target is None or link is None or (target[1] not in (None, self.worker.node)):
            return False
        self.point(link, target[0])
        return True

    def on_stranger(self, message: ET.Element) -> bool:
        """Events from a JID other than the service: True if kept for the check."""
        sender = message.get("from") or ""
        events = wire.parse_event(message)
        if not sender or not any(e.node == self.worker.node for e in events):
            return False
        if len(self._kept) < KEEP_AT_MOST:
            self._kept.append(message)
        if self._asking is None or self._asking.done():
            self._asking = asyncio.ensure_future(self._check())
        return True

    async def _check(self) -> None:
        node, placements = self.worker.node, self.worker.placements
        for attempt in range(ASK_TIMES):
            link = self._link()
            if link is None:
                break
            senders = {m.get("from") for m in self._kept}
            try:
                where = await placements.recheck(link.stream, node)
            except (ClientError, TimeoutError) as exc:
                log.info("event=placement_recheck_failed node=%s error=%s", node, exc)
                where = None
            if where is not None and where in senders:
                self.point(link, where)
                break
            if where == link.service and attempt + 1 < ASK_TIMES:
                await asyncio.sleep(ASK_EVERY)  # perhaps a cached answer: ask again
                continue
            break
        kept, self._kept = self._kept, []
        link = self._link()
        for message in kept:
            if link is not None and message.get("from") == link.service:
                events = wire.parse_event(message)
                if events and link.on_events is not None:
                    link.on_events(events)
            else:
                log.warning("event=spoofed_event from=%s", message.get("from"))
