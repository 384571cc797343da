"""PubSubLink: the pubsub requests of a queue client, toward one service JID.

One method per XEP-0060 / XEP-0254 operation, each a single IQ built by
:mod:`wire` and answered through :class:`QueueStream`'s futures. Errors arrive
as :class:`StanzaError`. Events from the service (and only from it: anyone can
send a message that looks like a notification) go to ``on_events``.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from xml.etree import ElementTree as ET

from xmpp_queue.client import wire, wire_locks
from xmpp_queue.client.account import Account
from xmpp_queue.client.connection import QueueStream
from xmpp_queue.client.errors import StanzaError

log = logging.getLogger("xmpp_queue.client")

EventsCallback = Callable[[list[wire.Event]], None]

QUEUE_REQUESTS = "pubsub#queue_requests"
QUEUE_MAX_BATCH = "pubsub#queue_max_batch"
QUEUE_BATCH_WAIT = "pubsub#queue_batch_wait"


def form_value(value: str | int | bool) -> str:
    """A Python value as a XEP-0004 field value (booleans as 1/0)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


class PubSubLink:
    """Pubsub operations over one logged-in :class:`QueueStream`."""

    def __init__(self, stream: QueueStream, service: str, timeout: float = 30.0) -> None:
        self.stream = stream
        self.service = service
        self.timeout = timeout
        self.on_events: EventsCallback | None = None
        self.on_closed: Callable[[], None] | None = None
        # Events from a JID other than the service: True if taken (a moved node).
        self.on_stranger: Callable[[ET.Element], bool] | None = None
        stream.on_pubsub_event = self._on_message
        stream.on_closed = self._on_closed

    @classmethod
    async def open(
        cls,
        jid: str,
        password: str,
        service: str,
        *,
        host: str,
        port: int,
        allow_plain: bool = False,
        reply_timeout: float = 30.0,
    ) -> PubSubLink:
        stream = QueueStream(jid, password, allow_plain=allow_plain)
        await stream.open(host, port, reply_timeout)
        return cls(stream, service, reply_timeout)

    @classmethod
    async def connect(cls, account: Account) -> PubSubLink:
        """Log in as *account* and speak to its service."""
        host, port = account.address
        return await cls.open(
            account.jid,
            account.password,
            account.service,
            host=host,
            port=port,
            allow_plain=account.allow_plain,
            reply_timeout=account.reply_timeout,
        )

    @property
    def jid(self) -> str:
        """Our full JID (subscriptions are made for it, so presence releases them)."""
        return str(self.stream.boundjid.full)

    @property
    def connected(self) -> bool:
        return self.stream.transport is not None

    @property
    def stream_error(self) -> str | None:
        """The condition of the stream error that closed the stream, if any."""
        return self.stream.stream_error

    def _on_closed(self) -> None:
        if self.on_closed is not None:
            self.on_closed()

    def _on_message(self, message: ET.Element) -> None:
        if message.get("from") != self.service:
            if self.on_stranger is not None and self.on_stranger(message):
                return  # perhaps our node's new shard: the owner checks (Worker)
            log.warning("event=spoofed_event from=%s", message.get("from"))
            return
        events = wire.parse_event(message)
        if events and self.on_events is not None:
            self.on_events(events)

    def via(self, service: str) -> PubSubLink:
        """This link's stream toward another service (a sharded service's node lives
        on a shard: client/placement.py); events still go to this link."""
        view = copy.copy(self)
        view.service = service
        return view

    async def call(self, body: str, iq_type: str = "set") -> ET.Element:
        return await self.stream.call(self.service, body, iq_type, self.timeout)

    async def ping_service(self) -> None:
        """A disco#info query to the service: returns once the service itself answers
        (raises StanzaError while the XMPP server answers for a missing component)."""
        await self.call(wire.DISCO_INFO_QUERY, "get")

    # --- presence ------------------------------------------------------------------

    def send_presence(self, available: bool = True) -> None:
        """Directed presence to the service: XEP-0254 §4 ties our locks to it."""
        self.stream.write(wire.presence(self.service, available))

    # --- subscriber ----------------------------------------------------------------

    async def subscribe(
        self, node: str, options: Mapping[str, str | int | bool] | None = None
    ) -> wire.SubscriptionResult:
        fields = {k: form_value(v) for k, v in (options or {}).items()}
        result = await self.call(wire.subscribe(node, self.jid, fields))
        return wire.subscription_of(result)

    async def subscribe_queue(
        self, node: str, queue_requests: int, max_batch: int = 1, batch_wait: float = 0.0
    ) -> wire.SubscriptionResult:
        """XEP-0254 §2.1: subscribe with the window in the same request; with
        *max_batch* above 1, also ask for up to that many items per notification
        (``pubsub#queue_max_batch``, this service's option), and with *batch_wait*
        (seconds) let the service hold a short batch that long to fill it
        (``pubsub#queue_batch_wait``, in milliseconds on the wire)."""
        options: dict[str, str | int | bool] = {QUEUE_REQUESTS: queue_requests}
        if max_batch > 1:
            options[QUEUE_MAX_BATCH] = max_batch
        if batch_wait > 0:
            options[QUEUE_BATCH_WAIT] = round(batch_wait * 1000)
        return await self.subscribe(node, options)

    async def unsubscribe(self, node: str, subid: str | None = None) -> None:
        await self.call(wire.unsubscribe(node, self.jid, subid))

    async def retract(self, node: str, item_id: str) -> None:
        await self.call(wire.retract(node, item_id))

    async def unlock(self, node: str, item_id: str, reason: str = "") -> None:
        await self.call(wire_locks.unlock(node, item_id, reason))

    async def retract_items(self, node: str, item_ids: Sequence[str]) -> None:
        """Several acks in one request: all or none (XEP-0060 §13.11)."""
        await self.call(wire.retract(node, item_ids))

    async def unlock_items(
        self, node: str, item_ids: Sequence[str], reasons: Mapping[str, str] | None = None
    ) -> None:
        """Several nacks in one request (this project's ``<unlock/>``): all or none."""
        await self.call(wire_locks.unlock_items(node, item_ids, reasons))

    async def lock_timeout(self, node: str) -> int | None:
        """The node's ``pubsub#queue_lock_timeout`` from its meta-data (XEP-0060
        §5.4), or None when the service does not say."""
        value = wire_locks.form_value(
            await self.call(wire_locks.node_info_query(node), "get"), wire_locks.LOCK_TIMEOUT_FIELD
        )
        try:
            return int(value) if value else None
        except ValueError:
            return None

    async def extend(self, node: str, item_id: str, seconds: int) -> None:
        await self.call(wire_locks.extend(node, item_id, seconds))

    async def unlock_later(self, node: str, item_id: str, delay: int) -> None:
        await self.call(wire_locks.unlock_later(node, item_id, delay))

    async def dead_letter(self, node: str, item_id: str, reason: str) -> None:
        await self.call(wire_locks.dead_letter(node, item_id, reason))

    async def item_ids(self, node: str) -> list[str]:
        return wire.result_item_ids(await self.call(wire.get_items(node), "get"))

    async def items(self, node: str, max_items: int | None = None) -> list[wire.ItemEvent]:
        """§6.5: the stored items with their payloads and attributes."""
        return wire.result_items(await self.call(wire.get_items(node, max_items), "get"))

    # --- owner ---------------------------------------------------------------------

    async def create_node(
        self, node: str, config: Mapping[str, str | int | bool] | None = None
    ) -> bool:
        """Create (and configure) *node*; False if it already existed (``conflict``)."""
        fields = {k: form_value(v) for k, v in (config or {}).items()}
        try:
            await self.call(wire.create_node(node, fields))
        except StanzaError as exc:
            if exc.condition == "conflict":
                return False
            raise
        return True

    async def set_affiliations(self, node: str, affiliations: Mapping[str, str]) -> None:
        """As the node's owner: make bare JIDs members, publishers ... (§8.9.2)."""
        await self.call(wire.set_affiliations(node, affiliations))

    # --- closing -------------------------------------------------------------------

    async def close(self, wait: float = 2.0) -> None:
        """Unavailable presence, then end the stream."""
        if self.connected:
            self.send_presence(available=False)
        await self.stream.close(wait)

    def kill(self) -> None:
        self.stream.kill()
