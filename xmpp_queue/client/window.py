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
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from xmpp_queue.client.errors import ConnectionLost, PublishError, StanzaError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff for ``wait``-type errors (RFC 6120 §8.3.2: retry later)."""

    attempts: int = 6
    first_delay: float = 0.05
    factor: float = 2.0
    max_delay: float = 5.0

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
        self, size: int, retry: RetryPolicy | None = None, timeout: float | None = 30.0
    ) -> None:
        if size < 1:
            raise ValueError("window must be at least 1")
        self.size = size
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
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
        self, send: Callable[[], asyncio.Future[Any]], convert: Callable[[Any], T]
    ) -> asyncio.Future[T]:
        """Wait for a free slot, send, and return the future of the converted answer.

        *send* may be called again for a retry, so it must build a fresh request.
        Cancelling the returned future stops waiting, not the request: its slot
        is freed when the answer (or the timeout) comes.
        """
        await self._slots.acquire()
        self._outstanding += 1
        self._idle.clear()
        request = _Request(send, convert, asyncio.get_running_loop().create_future())
        self._attempt(request)
        return request.result

    async def join(self) -> None:
        """Wait until every submitted request is answered (or failed)."""
        await self._idle.wait()

    def _attempt(self, request: _Request[T]) -> None:
        request.attempt += 1
        try:
            inner = request.send()
        except Exception as exc:  # not connected, bad payload: fail this one
            self._finish(request, exc=as_publish_error(exc))
            return
        timer = None
        if self.timeout is not None:
            timer = inner.get_loop().call_later(self.timeout, self._expire, request, inner)

        def done(f: asyncio.Future[Any]) -> None:
            if timer is not None:
                timer.cancel()
            if request.finished:
                return  # expired already
            if f.cancelled():
                self._finish(request, exc=PublishError("connection-lost", "request cancelled"))
                return
            exc = f.exception()
            if exc is None:
                try:
                    value = request.convert(f.result())
                except Exception as conv_exc:
                    self._finish(request, exc=conv_exc)
                    return
                self._finish(request, value=value)
            elif (
                isinstance(exc, StanzaError)
                and exc.retryable
                and request.attempt < self.retry.attempts
            ):
                self.retries += 1
                f.get_loop().call_later(self.retry.delay(request.attempt), self._attempt, request)
            else:
                self._finish(request, exc=as_publish_error(exc))

        inner.add_done_callback(done)

    def _expire(self, request: _Request[T], inner: asyncio.Future[Any]) -> None:
        error = PublishError("remote-server-timeout", f"no answer in {self.timeout} s", "wait")
        self._finish(request, exc=error)
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

    __slots__ = ("attempt", "convert", "finished", "result", "send")

    def __init__(
        self,
        send: Callable[[], asyncio.Future[Any]],
        convert: Callable[[Any], T],
        result: asyncio.Future[T],
    ) -> None:
        self.send = send
        self.convert = convert
        self.result = result
        self.attempt = 0
        self.finished = False
