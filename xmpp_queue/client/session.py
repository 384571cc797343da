"""Session: one logical connection that survives server restarts and lost networks.

A :class:`PubSubLink` is one TCP stream; when it closes it is finished. A
Session owns the current link and, when the stream closes without being asked
to, logs in again with exponential backoff (:class:`ReconnectPolicy`), then
runs the owner's ``on_reconnected`` step (a worker re-subscribes there).

Why here and not slixmpp's own reconnect: slixmpp retries forever on its own
schedule and knows nothing of the requests waiting for an answer. Here,
requests that need the stream wait for :meth:`Session.link_up`, so a caller's
ack or publish goes out on the next stream instead of failing. Giving up is
explicit: after ``give_up_after`` seconds without a stream, or at once when the
server refuses the login (a wrong password does not get better by retrying),
every waiter gets the same :class:`ConnectionLost` / :class:`AuthenticationFailed`.

While the stream stays up the *service* may still go away (the component
restarts, a standby takes over): :attr:`Session.watch` notices it from the
answers and :mod:`.resend` sends a worker's lock requests again once it is back.

The first login is not retried: a wrong host, port or password at start-up is
a configuration error and must say so at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from xmpp_queue.client.errors import (
    AuthenticationFailed,
    ClientError,
    ConnectionLost,
    StanzaError,
)
from xmpp_queue.client.link import PubSubLink
from xmpp_queue.client.resend import ServiceWatch

log = logging.getLogger("xmpp_queue.client")


@dataclass(frozen=True, slots=True)
class ReconnectPolicy:
    """When and how long to keep trying after the stream closed (or the service
    stopped answering).

    The first retry goes at once (most outages are a restart: the server is
    often back by then). After that, delays grow from *first_delay* by *factor*
    up to *max_delay*, each drawn between half and all of that value (jitter),
    so a fleet of workers does not log in all in the same instant. The small
    cap is the point: a client notices the server's return within about a
    second however long the outage was, and an attempt against a server that is
    down costs a refused TCP connect. *give_up_after* (seconds without a
    stream; None = never) ends the session with :class:`ConnectionLost`.
    """

    first_delay: float = 0.25
    factor: float = 2.0
    max_delay: float = 1.0
    give_up_after: float | None = None

    def delay(self, failed_attempts: int) -> float:
        """Seconds before attempt *failed_attempts* + 1: 0 for the first retry, then
        ``first_delay * factor ** (n - 1)`` capped at *max_delay*, times 0.5-1.0."""
        if failed_attempts <= 0:
            return 0.0
        base = min(self.max_delay, self.first_delay * self.factor ** (failed_attempts - 1))
        return base * random.uniform(0.5, 1.0)


LinkOpener = Callable[[], Awaitable[PubSubLink]]
Reconnected = Callable[[PubSubLink], Awaitable[None]]


class Session:
    """The current link of a worker or publisher, replaced when it is lost."""

    def __init__(
        self,
        open_link: LinkOpener,
        policy: ReconnectPolicy | None,
        *,
        name: str,
        on_reconnected: Reconnected | None = None,
        on_link: Callable[[PubSubLink], None] | None = None,
        on_failed: Callable[[ClientError], None] | None = None,
    ) -> None:
        self._open_link = open_link
        self.policy = policy
        self.name = name
        self.on_reconnected = on_reconnected
        self.on_link = on_link
        self.on_failed = on_failed
        self.link: PubSubLink | None = None
        self.failure: ClientError | None = None
        self.reconnects = 0
        self._up = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._resuming = False
        self._gave_up: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.watch = ServiceWatch(self, policy or ReconnectPolicy())

    @property
    def connected(self) -> bool:
        return self.link is not None and self.link.connected

    @property
    def reconnecting(self) -> bool:
        return self._task is not None and not self._task.done()

    async def open(self) -> PubSubLink:
        """The first login; its errors propagate (a configuration error says so at once)."""
        link = await self._open_link()
        if self.on_link is not None:
            self.on_link(link)
        self._adopt(link)
        return link

    def _adopt(self, link: PubSubLink) -> None:
        self.link = link
        link.on_closed = lambda: self._on_closed(link)
        self._up.set()

    def _on_closed(self, link: PubSubLink) -> None:
        if self.link is link:
            self._up.clear()
            self.link = None
        if self._closing or self.failure is not None:
            return
        if getattr(link, "stream_error", None) == "conflict":
            # Another login took our JID/resource: reconnecting would kick it in turn.
            self._fail(
                ConnectionLost(
                    f"{self.name}: another client logged in as {link.jid}; "
                    "give each worker its own name (the XMPP resource)"
                )
            )
            return
        if self.policy is None:
            self._fail(ConnectionLost(f"{self.name}: the server closed the stream"))
            return
        log.warning("event=connection_lost client=%s action=reconnecting", self.name)
        if not self.reconnecting or self._resuming:
            self._task = asyncio.ensure_future(self._reconnect(self.policy))

    async def _reconnect(self, policy: ReconnectPolicy) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        attempt = 0
        link: PubSubLink | None = None
        while not self._closing:
            delay = policy.delay(attempt)
            if policy.give_up_after is not None:
                left = started + policy.give_up_after - loop.time()
                if left <= 0:
                    if link is not None:
                        link.kill()
                    self._fail(
                        ConnectionLost(
                            f"{self.name}: no connection to the service for "
                            f"{policy.give_up_after:.0f} s, giving up (is the XMPP server "
                            "running, and the xmpp-queue component connected to it?)"
                        )
                    )
                    return
                delay = min(delay, left)
            await asyncio.sleep(delay)
            if self._closing:
                break
            attempt += 1
            if link is None or not link.connected:
                try:
                    link = await self._open_link()
                except AuthenticationFailed as exc:
                    self._fail(exc)
                    return
                except (ClientError, TimeoutError, OSError) as exc:
                    link = None
                    log.warning(
                        "event=reconnect_failed client=%s attempt=%d error=%r next_in=%.1fs",
                        self.name,
                        attempt,
                        exc,
                        policy.delay(attempt),
                    )
                    continue
                if self.on_link is not None:
                    self.on_link(link)  # events may come before the service answers
            if not await self._service_answers(link, attempt, policy):
                continue
            self.reconnects += 1
            log.info("event=reconnected client=%s attempts=%d", self.name, attempt)
            self.watch.answered()
            self._adopt(link)
            await self._resume(link)
            return
        if link is not None and link is not self.link:
            link.kill()

    async def _service_answers(
        self, link: PubSubLink, attempt: int, policy: ReconnectPolicy
    ) -> bool:
        """After a server restart the XMPP server may be back before the component:
        Prosody then answers ``remote-server-timeout``, ejabberd ``forbidden``. Send
        nothing that matters (acks, publishes, subscribe) until the service answers."""
        try:
            await link.ping_service()
        except StanzaError as exc:
            log.warning(
                "event=service_not_answering client=%s error=%s next_in=%.1fs",
                self.name,
                exc,
                policy.delay(attempt),
            )
            return False
        except (ClientError, TimeoutError):
            return False  # the stream went again: the next round logs in anew
        return True

    async def _resume(self, link: PubSubLink) -> None:
        if self.on_reconnected is None:
            return
        self._resuming = True
        try:
            await self.on_reconnected(link)
        except StanzaError as exc:
            # The service refuses what worked before (node deleted, access changed):
            # retrying the same request will not help.
            self._fail(exc)
        except (ClientError, TimeoutError) as exc:
            # The new stream is already bad: the close handler starts over.
            log.warning("event=resume_failed client=%s error=%r", self.name, exc)
            if link.connected:
                link.kill()
        finally:
            self._resuming = False

    def _fail(self, exc: ClientError) -> None:
        if self.failure is not None:
            return
        log.error("event=connection_given_up client=%s error=%s", self.name, exc)
        self.failure = exc
        if not self._gave_up.done():
            self._gave_up.set_exception(exc)
            self._gave_up.exception()  # retrieved: waiters re-raise it themselves
        if self.on_failed is not None:
            self.on_failed(exc)

    async def link_up(self) -> PubSubLink:
        """The current link, waiting through a reconnect; raises once the session gave up."""
        while True:
            if self.failure is not None:
                raise self.failure
            link = self.link
            if link is not None and link.connected:
                return link
            if self._closing:
                raise ConnectionLost(f"{self.name}: closed")
            waiter = asyncio.ensure_future(self._up.wait())
            either: set[asyncio.Future[Any]] = {waiter, self._gave_up}
            try:
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()

    def up_future(self) -> asyncio.Future[PubSubLink]:
        """A future of the next link (failed when the session gives up)."""
        return asyncio.ensure_future(self.link_up())

    async def close(self) -> None:
        """Stop reconnecting; the owner closes the link itself (it knows the order)."""
        self._closing = True
        self.watch.close()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def abort(self) -> None:
        self._closing = True
        self.watch.close()
        if self._task is not None:
            self._task.cancel()
        if self.link is not None:
            self.link.kill()
        self.link = None
