"""PushSink: queue items POSTed to an HTTP endpoint, the status is the ack or the nack.

A push subscription is an ordinary queue subscription held by a JID that no XMPP
client uses (:attr:`PushEndpoint.subscriber`); the outbox routes that JID's effects
here instead of to the component. So dispatch, locks, ``queue_requests`` (the most
in flight), lock timeouts, retry back-off, max deliveries and dead letters are the
queue's own rules, unchanged: this sink only turns an item notice into a POST and
the answer into the subscriber's own verbs.

- 2xx → ``retract`` by the subscriber: the ack. Nothing counts as acked before that
  ack committed; a crash in between leaves the item locked until its lock timeout.
- any other status, a redirect (never followed), a connection error or a timeout →
  ``unlock`` by the subscriber: the nack, with the node's retry back-off.
- an unlock notice for an item (lock timeout, admin) cancels its POST if still running.
- at most :class:`~xmpp_queue.push.window.PushWindow` POSTs are in flight: it starts
  at one, grows while the endpoint answers 2xx and halves on 429/503 (push-back).
  Items handed out beyond it wait here, still locked; one whose lock times out
  meanwhile leaves the waiting line with its unlock notice.

Signed requests: with a secret, each POST carries ``X-Xmpp-Queue-Signature:
t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`` so a receiver can check the
body and refuse replays; with a token, ``Authorization: Bearer <token>``. Neither is
ever logged.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp

from xmpp_queue.core.attributes import format_datetime
from xmpp_queue.core.effects import Effect, ItemNotice, NoticeItem, UnlockNotice
from xmpp_queue.core.errors import PubSubError
from xmpp_queue.core.model import Actor
from xmpp_queue.core.service import PubSubService
from xmpp_queue.push.policy import EndpointRefused, PushPolicy
from xmpp_queue.push.window import PushWindow
from xmpp_queue.runtime.outbox import Outbox

log = logging.getLogger("xmpp_queue.push")

SIGNATURE_HEADER = "X-Xmpp-Queue-Signature"


@dataclass(frozen=True, slots=True)
class PushEndpoint:
    """Where one push subscription delivers, and how it proves it is us."""

    subscriber: str  # the subscription's JID; the outbox routes its effects here
    url: str
    bearer: str | None = field(default=None, repr=False)
    secret: bytes | None = field(default=None, repr=False)
    timeout: float = 30.0  # seconds; keep it under the node's lock timeout
    max_in_flight: int = 8  # the push window's ceiling


class PushObserver(Protocol):
    """Told of every answer (the metrics): status label, seconds taken, window after."""

    def push_answered(
        self, subscriber: str, node: str, status: str, seconds: float, window: int
    ) -> None: ...


def signature(secret: bytes, timestamp: int, body: bytes) -> str:
    """The signature header's value for *body* sent at *timestamp*."""
    mac = hmac.new(secret, str(timestamp).encode() + b"." + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def item_body(node: str, item: NoticeItem) -> bytes:
    """The JSON a receiver gets: node, item id, payload, attributes, publish time
    (XEP-0082, UTC), delivery attempt."""
    attributes = {k: v for k, v in item.headers.items() if k != "delivery-attempt"}
    published = item.published_at
    return json.dumps(
        {
            "node": node,
            "id": item.item_id,
            "payload": item.payload,
            "attributes": attributes,
            "publish_time": None if published is None else format_datetime(published),
            "delivery_attempt": int(item.headers.get("delivery-attempt", "1")),
        },
        separators=(",", ":"),
    ).encode()


class PushSink:
    """The outbox's sink for one push subscription (see the module docstring)."""

    def __init__(
        self,
        service: PubSubService,
        outbox: Outbox,
        endpoint: PushEndpoint,
        session: aiohttp.ClientSession,
        wall_clock: Callable[[], float] = time.time,
        *,
        policy: PushPolicy | None = None,
        observer: PushObserver | None = None,
    ) -> None:
        self._service = service
        self._outbox = outbox
        self.endpoint = endpoint
        self._actor = Actor(endpoint.subscriber)
        self._session = session
        self._wall_clock = wall_clock
        self._policy = policy  # checked before each POST (IP literals skip the resolver)
        self._observer = observer
        self._in_flight: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._waiting: dict[tuple[str, str], NoticeItem] = {}  # in arrival order
        self.window = PushWindow(endpoint.max_in_flight)
        self.statuses: dict[str, int] = {}  # answers by status ("error": no answer)

    def deliver(self, effects: Sequence[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, ItemNotice):
                for item in effect.items:
                    self._waiting[(effect.node, item.item_id)] = item
            elif isinstance(effect, UnlockNotice):
                key = (effect.node, effect.item_id)
                self._waiting.pop(key, None)
                running = self._in_flight.get(key)
                if running is not None and running is not asyncio.current_task():
                    running.cancel()  # the lock is gone: whatever it answers is too late
        self._pump()

    @property
    def waiting(self) -> int:
        """Items handed to this subscription and not POSTed yet (beyond the window)."""
        return len(self._waiting)

    def _pump(self) -> None:
        """Start POSTs, oldest first, while the window has room."""
        waiting, running = self._waiting, self._in_flight
        while waiting and len(running) < self.window.size:
            key = next(iter(waiting))
            item = waiting.pop(key)
            task = asyncio.get_running_loop().create_task(self._push(key[0], item))
            running[key] = task
            task.add_done_callback(functools.partial(self._forget, key))

    async def close(self) -> None:
        """Stop the POSTs in flight: their items come back after their lock timeout."""
        self._waiting.clear()
        tasks = list(self._in_flight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _forget(self, key: tuple[str, str], task: asyncio.Task[None]) -> None:
        if self._in_flight.get(key) is task:
            del self._in_flight[key]
        if self._waiting:
            self._pump()

    def _headers(self, body: bytes) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.endpoint.bearer:
            headers["Authorization"] = f"Bearer {self.endpoint.bearer}"
        if self.endpoint.secret:
            headers[SIGNATURE_HEADER] = signature(
                self.endpoint.secret, int(self._wall_clock()), body
            )
        return headers

    async def _push(self, node: str, item: NoticeItem) -> None:
        body = item_body(node, item)
        status: int | None = None
        started = time.monotonic()
        try:
            if self._policy is not None:
                self._policy.check_url(self.endpoint.url)
            async with self._session.post(
                self.endpoint.url,
                data=body,
                headers=self._headers(body),
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=self.endpoint.timeout),
            ) as response:
                status = response.status
        except (aiohttp.ClientError, TimeoutError, EndpointRefused) as exc:
            log.info(
                "event=push_failed subscriber=%s node=%s item=%s error=%s",
                self.endpoint.subscriber,
                node,
                item.item_id,
                type(exc).__name__,
            )
        label = "error" if status is None else str(status)
        self.statuses[label] = self.statuses.get(label, 0) + 1
        self.window.answered(status)
        if self._observer is not None:
            self._observer.push_answered(
                self.endpoint.subscriber, node, label, time.monotonic() - started, self.window.size
            )
        acked = status is not None and 200 <= status < 300
        try:
            if acked:
                outcome = await self._service.retract(self._actor, node, item.item_id)
            else:
                outcome = await self._service.unlock(self._actor, node, item.item_id)
        except PubSubError as exc:  # the lock ended meanwhile (timeout, admin, departure)
            log.info(
                "event=push_answer_late subscriber=%s node=%s item=%s status=%s error=%s",
                self.endpoint.subscriber,
                node,
                item.item_id,
                label,
                type(exc).__name__,
            )
            return
        self._outbox.send(outcome.effects)
