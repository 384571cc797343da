"""Publisher: put items on a queue node, many in flight, with back-pressure.

Usage::

    account = Account(jid="app@localhost", password="secret",
                      service="queue.localhost", allow_plain=True)
    async with Publisher(account) as pub:
        await pub.create_queue("jobs", lock_timeout=60, max_deliveries=5)
        item_id = await pub.publish("jobs", json_payload({"n": 1}))

``publish`` waits for the service's answer (the item is committed when it returns).
For throughput, ``submit`` returns as soon as the request is on the wire and hands
back a future; it waits only while ``window`` requests are already outstanding. The
Spark bulk-enqueue job uses this API: keep it stable. Seek and snapshots: adhoc.py.

When the stream is lost the publisher logs in again with backoff
(:class:`ReconnectPolicy`; by default it gives up after 60 s without a
stream). Publishes in flight wait for the new stream and are sent again:
delivery is at-least-once, so an item whose answer was lost with the stream
may be stored twice, unless the caller gives item ids (a publish with the same
id replaces the item). When the session gives up, every outstanding publish
fails with ``PublishError('connection-lost')`` naming why.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, TypeVar
from xml.etree import ElementTree as ET

from xmpp_queue.client import wire
from xmpp_queue.client.account import Account, login_and_rest
from xmpp_queue.client.adhoc import PushCommands
from xmpp_queue.client.attributes import (
    Priority,
    PublishItem,
    Seconds,
    as_publish_item,
    item_headers,
)
from xmpp_queue.client.connection import QueueStream
from xmpp_queue.client.errors import ConnectionLost, PublishError, StanzaError
from xmpp_queue.client.link import PubSubLink
from xmpp_queue.client.placement import Placements, routed
from xmpp_queue.client.publisher_nodes import NodeOwner
from xmpp_queue.client.session import ReconnectPolicy, Session
from xmpp_queue.client.window import PublishWindow, RetryPolicy, as_publish_error

BatchEntry = PublishItem | tuple[str | None, str | None]
"""One item of a batch publish: a :class:`PublishItem`, or ``(payload, item_id)``."""

T = TypeVar("T")

log = logging.getLogger("xmpp_queue.client")


# A publisher is usually a script or a job: it should not wait forever.
PUBLISHER_RECONNECT = ReconnectPolicy(give_up_after=60.0)


class Publisher(NodeOwner, PushCommands):
    """A c2s client that publishes items to one pubsub service."""

    def __init__(
        self,
        account: Account | str,
        *older_login: str,
        host: str | None = None,
        port: int | None = None,
        window: int = 32,
        allow_plain: bool | None = None,
        check_payloads: bool = True,
        retry: RetryPolicy | None = None,
        reply_timeout: float | None = None,
        reconnect: ReconnectPolicy | None = PUBLISHER_RECONNECT,
        name: str | None = None,
    ) -> None:
        """``Publisher(account)``; ``Publisher(jid, password, service, host=...)`` too."""
        self.account, _ = login_and_rest(
            account,
            older_login,
            0,
            host=host,
            port=port,
            allow_plain=allow_plain,
            reply_timeout=reply_timeout,
        )
        self.jid = self.account.jid
        self.service_jid = self.account.service
        self.placements = Placements(self.service_jid, self.account.reply_timeout)
        self._turns: dict[str, int] = {}  # round-robin over partitions (publisher_nodes)
        self.host, self.port = self.account.address
        self.allow_plain = self.account.allow_plain
        self.check_payloads = check_payloads
        self.reply_timeout = self.account.reply_timeout
        self._window_size = window
        self._retry = retry
        self.reconnect = reconnect
        self.name = name or self.jid
        self._window: PublishWindow[Any] | None = None  # str for one item, list[str] for a batch
        self._session: Session | None = None
        self.published = 0

    # --- lifecycle -----------------------------------------------------------------

    async def _open_link(self) -> PubSubLink:
        return await PubSubLink.connect(self.account)

    async def connect(self) -> None:
        """Log in; a failure here raises at once (only a later loss is reconnected)."""
        session = Session(self._open_link, self.reconnect, name=self.name)
        await session.open()
        self._session = session
        self._window = PublishWindow(
            self._window_size,
            self._retry,
            self.reply_timeout,
            resend_after=session.up_future,
            service_away=self._service_away,
        )

    async def _service_away(self, service: str | None = None) -> bool:
        """Whether the component (*service*: a shard) is missing (its server answered)."""
        try:
            link = await self._link_up()
            await (link if service is None else link.via(service)).ping_service()
        except StanzaError:
            return True
        return False

    async def close(self) -> None:
        """Wait for outstanding publishes, then end the stream."""
        session = self._session
        if session is None:
            return
        if self._window is not None:
            await self._window.join()
        await session.close()
        if session.link is not None:
            await session.link.close()
        self._session = None

    def abort(self) -> None:
        """Drop the connection at once (outstanding publishes fail with connection-lost)."""
        if self._session is not None:
            self._session.abort()
            self._session = None

    async def __aenter__(self) -> Publisher:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def link(self) -> PubSubLink:
        """The current stream's link; ConnectionLost while reconnecting."""
        session = self._session
        if session is None:
            raise RuntimeError("Publisher is not connected (use 'async with' or connect())")
        if session.failure is not None:
            raise session.failure
        if session.link is None:
            raise ConnectionLost(f"{self.name}: reconnecting")
        return session.link

    async def _link_up(self) -> PubSubLink:
        if self._session is None:
            raise RuntimeError("Publisher is not connected (use 'async with' or connect())")
        return await self._session.link_up()

    @property
    def reconnects(self) -> int:
        return 0 if self._session is None else self._session.reconnects

    @property
    def resent(self) -> int:
        """Publishes sent again on a new stream after the old one closed under them."""
        return 0 if self._window is None else self._window.resent

    @property
    def outstanding(self) -> int:
        return 0 if self._window is None else self._window.outstanding

    @property
    def retries(self) -> int:
        """How many wait-type errors were retried so far."""
        return 0 if self._window is None else self._window.retries

    # --- publishing ----------------------------------------------------------------

    async def submit(
        self,
        node: str,
        payload: str | None,
        item_id: str | None = None,
        *,
        attributes: Mapping[str, str] | None = None,
        delay: Seconds | None = None,
        deliver_at: datetime | None = None,
        ttl: Seconds | None = None,
        priority: Priority | str | None = None,
        ordering_key: str | None = None,
    ) -> asyncio.Future[str]:
        """Send a publish as soon as the window has room; the future gets the item id.

        *payload* is one XML element as a string (see :func:`json_payload`), or
        None for an item without payload. Raises :class:`PublishError` through the
        future; ``wait`` errors are retried with exponential backoff first.

        *attributes* are the item's own key/value strings (XEP-0131 headers; a
        worker reads them as ``job.attributes``). *delay* (seconds or a
        timedelta, from now) or *deliver_at* (an aware datetime) hold the item
        back until then (the ``Start`` header); *ttl* (whole seconds) drops it
        to the dead-letter node if it is still waiting then (``TTL``);
        *priority* ``"high"``, ``"medium"`` or ``"low"`` orders dispatch
        (``Urgency``). *ordering_key* groups items that a ``pubsub#queue_ordered``
        queue hands out one at a time, in publish order (``ordering-key``); items
        of one key keep their order only if they are published in order: from one
        publisher, each after the previous one's answer, or in one batch. A bad
        combination raises ``ValueError`` here.
        """
        headers = item_headers(
            attributes,
            delay=delay,
            deliver_at=deliver_at,
            ttl=ttl,
            priority=priority,
            ordering_key=ordering_key,
        )
        if payload is not None and self.check_payloads:
            _check_payload(payload)
        node = await self._partition(node, ordering_key)

        def convert(result: ET.Element) -> str:
            self.published += 1
            new_id = item_id or wire.published_item_id(result)
            if not new_id:
                raise PublishError("undefined-condition", "publish result without item id")
            return new_id

        return await self._submit(node, wire.publish(node, payload, item_id, headers), convert)

    async def _submit(
        self, node: str, body: str, convert: Callable[[ET.Element], T]
    ) -> asyncio.Future[T]:
        """One publish request through the window, sent on whatever link is current,
        to *node*'s service (a sharded service's redirect is followed: placement.py)."""
        session = self._session
        window = self._window
        if session is None or window is None:
            raise RuntimeError("Publisher is not connected (use 'async with' or connect())")
        if session.failure is not None:
            raise as_publish_error(session.failure)

        async def submit(service: str) -> asyncio.Future[T]:
            def send() -> asyncio.Future[ET.Element]:
                link = session.link
                if link is None:
                    raise ConnectionLost("reconnecting")
                return link.stream.request(service, body)[1]

            return await window.submit(send, convert, lambda: self._service_away(service))

        async def stream() -> QueueStream:
            return (await self._link_up()).stream

        return await routed(self.placements, node, stream, submit)

    async def submit_batch(
        self, node: str, items: Sequence[BatchEntry]
    ) -> asyncio.Future[list[str]]:
        """Send several items in one publish (XEP-0060 §13.11); the future gets their
        ids, in order. Each entry is a :class:`PublishItem` (payload, id and the
        keywords of :meth:`submit`) or a ``(payload, item_id)`` tuple.

        All or none: the service stores every item of the batch in one commit, or
        refuses the whole batch with the error of the first item that fails (a full
        queue refuses it all). One batch takes one slot of the window. At most 1000
        items per batch. Re-sent whole after a lost stream or a lost answer, like a
        single publish (at-least-once: give item ids to make that harmless).
        """
        if not items:
            raise ValueError("an empty batch")
        now = datetime.now(UTC)
        entries = [as_publish_item(entry) for entry in items]
        prepared = [(e.payload, e.item_id, e.headers(now)) for e in entries]
        if self.check_payloads:
            for entry in entries:
                if entry.payload is not None:
                    _check_payload(entry.payload)
        node = await self._partition(node, entries[0].ordering_key)  # the batch stays whole

        def convert(result: ET.Element) -> list[str]:
            ids = wire.published_item_ids(result)
            wanted = [entry.item_id for entry in entries]
            if len(ids) != len(entries):
                if all(wanted) and not ids:  # ids we gave, and an empty result (§7.1.2)
                    ids = [i for i in wanted if i]
                else:
                    raise PublishError("undefined-condition", "batch result without every id")
            self.published += len(ids)
            return ids

        return await self._submit(node, wire.publish_items(node, prepared), convert)

    async def publish_batch(self, node: str, items: Sequence[BatchEntry]) -> list[str]:
        """:meth:`submit_batch` and wait: the ids once the whole batch is stored."""
        return await (await self.submit_batch(node, items))

    async def publish(
        self,
        node: str,
        payload: str | None,
        item_id: str | None = None,
        *,
        attributes: Mapping[str, str] | None = None,
        delay: Seconds | None = None,
        deliver_at: datetime | None = None,
        ttl: Seconds | None = None,
        priority: Priority | str | None = None,
        ordering_key: str | None = None,
    ) -> str:
        """Publish one item and return its id once the service has stored it
        (the keywords as in :meth:`submit`)."""
        future = await self.submit(
            node,
            payload,
            item_id,
            attributes=attributes,
            delay=delay,
            deliver_at=deliver_at,
            ttl=ttl,
            priority=priority,
            ordering_key=ordering_key,
        )
        return await future

    async def flush(self) -> None:
        """Wait until every submitted publish is answered."""
        if self._window is not None:
            await self._window.join()


def _check_payload(payload: str) -> None:
    """One malformed payload would make the server close the whole stream
    (not-well-formed), failing every publish in flight: refuse it here instead."""
    try:
        ET.fromstring(payload)
    except ET.ParseError as exc:
        raise PublishError(
            "bad-request", f"payload is not one well-formed XML element: {exc}"
        ) from None
