"""PublishWindow: at most N publishes in flight, retries for ``wait`` errors.

Why a window: a publisher that waits for each answer before the next publish
runs at one round trip per item; one that never waits floods the server and
its own memory. A window of N outstanding requests keeps the pipe full and
pushes back on the caller (``submit`` waits) when the service is slower than
the producer.

Why callbacks and not a task per publish: this runs once per item in the load
generator, so the bookkeeping is a semaphore, a done-callback and a timer
handle. It knows nothing of XMPP: *send* is any function returning a future
(tests pass a fake), errors are classified by :class:`StanzaError.retryable`.

Two kinds of trouble, two answers:

- a ``wait`` error (the service is busy, or the XMPP server says the component
  is not connected): retried with backoff for at most ``give_up_after``
  seconds, with a warning in the log while it lasts. Once one request gave up
  so, later ones get a single attempt each (they fail in one round trip, not
  in another ``give_up_after``) until one succeeds again.
- the stream closed (:class:`ConnectionLost`): with *resend_after* set (the
  publisher's reconnecting session) the request waits for the next stream and
  is sent again; that is at-least-once (an answer lost with the stream means
  the item may be stored twice, unless the caller chose its id). Without it,
  or when the session gives up, it fails with ``connection-lost``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from xmpp_queue.client.errors import ConnectionLost, PublishError, StanzaError

T = TypeVar("T")
log = logging.getLogger("xmpp_queue.client")
WARN_EVERY = 5.0  # seconds between two "still retrying" lines
# What an XMPP server answers for a component that is not connected (ejabberd).
ABSENT_CONDITIONS = frozenset({"forbidden", "service-unavailable"})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff for ``wait``-type errors (RFC 6120 §8.3.2: retry later):
    at most *attempts* tries and *give_up_after* seconds per request."""

    attempts: int = 100
    first_delay: float = 0.05
    factor: float = 2.0
    max_delay: float = 5.0
    give_up_after: float = 30.0

    def delay(self, failed_attempts: int) -> float:
        """Seconds to wait after *failed_attempts* failures (1 → first_delay)."""
        return min(self.max_delay, self.first_delay * self.factor ** (failed_attempts - 1))


def as_publish_error(exc: BaseException) -> BaseException:
    if isinstance(exc, PublishError):
        return exc
    if isinstance(exc, StanzaError):
        return PublishError(exc.condition, exc.text, exc.etype, exc.app_condition)
    if isinstance(exc, ConnectionLost):
        return PublishError("connection-lost", str(exc), "cancel")
    return exc


class PublishWindow(Generic[T]):
    """Outstanding-request accounting with back-pressure, retry and timeout."""

    def __init__(
        self,
        size: int,
        retry: RetryPolicy | None = None,
        timeout: float | None = 30.0,
        resend_after: Callable[[], asyncio.Future[Any]] | None = None,
        service_away: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("window must be at least 1")
        self.size = size
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self.resend_after = resend_after
        # While no component process is connected (a restart, a takeover to a
        # standby), the XMPP server answers for it: Prosody with a wait-type error,
        # ejabberd with forbidden (no route). A refusal of that shape is checked by
        # asking the service itself; if it does not answer, the refusal was not its.
        self.service_away = service_away
        self._checks: set[asyncio.Future[None]] = set()
        self.resent = 0
        self._unavailable: StanzaError | None = None  # set after a request gave up
        self._warned_at = float("-inf")
        self._slots = asyncio.Semaphore(size)
        self._outstanding = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.retries = 0

    @property
    def outstanding(self) -> int:
        """Requests sent (or waiting for a retry) and not yet answered."""
        return self._outstanding

    async def submit(
        self,
        send: Callable[[], asyncio.Future[Any]],
        convert: Callable[[Any], T],
        away: Callable[[], Awaitable[bool]] | None = None,
    ) -> asyncio.Future[T]:
        """Wait for a free slot, send, and return the future of the converted answer.

        *send* may be called again for a retry, so it must build a fresh request.
        *away* replaces ``service_away`` for this request (a sharded service: the
        request's shard may be away while the public name answers).
        Cancelling the returned future stops waiting, not the request: its slot
        is freed when the answer (or the timeout) comes.
        """
        await self._slots.acquire()
        self._outstanding += 1
        self._idle.clear()
        request = _Request(send, convert, asyncio.get_running_loop().create_future())
        request.away = away or self.service_away
        self._attempt(request)
        return request.result

    async def join(self) -> None:
        """Wait until every submitted request is answered (or failed)."""
        await self._idle.wait()

    def _attempt(self, request: _Request[T]) -> None:
        request.attempt += 1
        loop = asyncio.get_running_loop()
        if request.started is None:
            request.started = loop.time()
        try:
            inner = request.send()
        except ConnectionLost as exc:
            self._lost(request, exc)
            return
        except Exception as exc:  # bad payload: fail this one
            self._finish(request, exc=as_publish_error(exc))
            return
        timer = None
        if self.timeout is not None:
            timer = inner.get_loop().call_later(self.timeout, self._expire, request, inner)

        def done(f: asyncio.Future[Any]) -> None:
            if timer is not None:
                timer.cancel()
            if request.finished or f is request.abandoned:
                return  # expired already (finished, or to be sent again)
            if f.cancelled():
                self._finish(request, exc=PublishError("connection-lost", "request cancelled"))
                return
            exc = f.exception()
            if exc is None:
                self._unavailable = None
                try:
                    value = request.convert(f.result())
                except Exception as conv_exc:
                    self._finish(request, exc=conv_exc)
                    return
                self._finish(request, value=value)
            elif isinstance(exc, ConnectionLost):
                self._lost(request, exc)
            elif isinstance(exc, StanzaError) and exc.retryable:
                self._retry_later(request, exc)
            elif isinstance(exc, StanzaError) and self._maybe_absent(request, exc):
                check = asyncio.ensure_future(self._check_absent(request, exc))
                self._checks.add(check)
                check.add_done_callback(self._checks.discard)
            else:
                self._finish(request, exc=as_publish_error(exc))

        inner.add_done_callback(done)

    def _maybe_absent(self, request: _Request[T], exc: StanzaError) -> bool:
        return request.away is not None and exc.condition in ABSENT_CONDITIONS

    async def _check_absent(self, request: _Request[T], exc: StanzaError) -> None:
        assert request.away is not None
        try:
            away = await request.away()
        except Exception:  # the stream went: the resend path takes it from here
            away = True
        if away:
            request.rechecked = False  # a new absence: the next presence earns a resend
            self._retry_later(request, exc)
        elif not request.rechecked:
            # The service answers now, but the refusal may still be the server's for
            # its absence: it came back between the two (a takeover). Ask once more;
            # a refusal the service itself repeats is final.
            request.rechecked = True
            self._attempt(request)
        else:
            self._finish(request, exc=as_publish_error(exc))

    def _retry_later(self, request: _Request[T], exc: StanzaError) -> None:
        loop = asyncio.get_running_loop()
        assert request.started is not None
        waited = loop.time() - request.started
        delay = self.retry.delay(request.attempt)
        if (
            self._unavailable is not None
            or request.attempt >= self.retry.attempts
            or waited + delay > self.retry.give_up_after
        ):
            if self._unavailable is None:
                log.error(
                    "event=publish_gave_up condition=%s text=%r waited=%.1fs "
                    "hint='later publishes fail at once until one succeeds'",
                    exc.condition,
                    exc.text,
                    waited,
                )
                self._unavailable = exc
            error = as_publish_error(exc)
            if isinstance(error, PublishError) and waited >= 1:
                error = PublishError(
                    exc.condition,
                    f"{exc.text or exc.condition} (retried for {waited:.0f} s)",
                    exc.etype,
                    exc.app_condition,
                )
            self._finish(request, exc=error)
            return
        self.retries += 1
        if loop.time() - self._warned_at >= WARN_EVERY:
            self._warned_at = loop.time()
            log.warning(
                "event=publish_retrying condition=%s text=%r outstanding=%d gives_up_after=%.0fs",
                exc.condition,
                exc.text,
                self._outstanding,
                self.retry.give_up_after,
            )
        loop.call_later(delay, self._attempt, request)

    def _lost(self, request: _Request[T], exc: ConnectionLost) -> None:
        """The stream closed before the answer: send again on the next one, if any."""
        if self.resend_after is None:
            self._finish(request, exc=as_publish_error(exc))
            return
        waiter = self.resend_after()

        def resend(f: asyncio.Future[Any]) -> None:
            if request.finished:
                return
            if f.cancelled() or f.exception() is not None:
                reason = "cancelled" if f.cancelled() else f.exception()
                self._finish(request, exc=PublishError("connection-lost", str(reason), "cancel"))
                return
            self.resent += 1
            self._attempt(request)

        waiter.add_done_callback(resend)

    def _expire(self, request: _Request[T], inner: asyncio.Future[Any]) -> None:
        """No answer in time. The request may have been lost with a component process
        that died (a takeover) or in the network: send it again, at least once, while
        the retry policy allows (RetryPolicy.give_up_after, counted from the first
        send); a publish without an item id may then be stored twice."""
        error = PublishError("remote-server-timeout", f"no answer in {self.timeout} s", "wait")
        request.abandoned = inner  # a late answer to it is ignored
        self._retry_later(request, error)
        inner.cancel()

    def _finish(
        self, request: _Request[T], value: Any = None, exc: BaseException | None = None
    ) -> None:
        request.finished = True
        result = request.result
        if not result.done():  # else the caller cancelled its wait
            if exc is not None:
                result.set_exception(exc)
            else:
                result.set_result(value)
        self._outstanding -= 1
        self._slots.release()
        if self._outstanding == 0:
            self._idle.set()


class _Request(Generic[T]):
    """One submitted request across its attempts."""

    __slots__ = (
        "abandoned",
        "attempt",
        "away",
        "convert",
        "finished",
        "rechecked",
        "result",
        "send",
        "started",
    )

    def __init__(
        self,
        send: Callable[[], asyncio.Future[Any]],
        convert: Callable[[Any], T],
        result: asyncio.Future[T],
    ) -> None:
        self.send = send
        self.convert = convert
        self.result = result
        self.abandoned: asyncio.Future[Any] | None = None  # the attempt that timed out
        self.away: Callable[[], Awaitable[bool]] | None = None  # is its service away?
        self.attempt = 0
        self.finished = False
        self.rechecked = False  # sent again after a refusal with the service present
        self.started: float | None = None
