"""Handlers: what a worker runs per item, how blocking code runs, how failures are told.

- :func:`check_handler` refuses a plain ``def`` at construction (it would block
  the event loop that carries every other job's acks and lock extensions);
- :func:`in_thread` runs a blocking handler in a thread pool that the
  :class:`~xmpp_queue.client.Worker` owns and sizes to its ``queue_requests``
  (the default executor has ``min(32, cpus + 4)`` threads: 6 on 2 cores, so a
  window of 16 ran 6 handlers while 10 held locks ran down). A thread cannot be
  cancelled: when its task is cancelled (a drain past its grace) the task waits
  for the thread to end before it ends itself, so "the task is done" always means
  "this item's code no longer runs", and the worker never unlocks an item whose
  handler still runs;
- :func:`failure_reason` is what a nack tells the service (the exception's type
  and message, bounded), and :class:`FailureLog` logs each failure as one line,
  with the traceback once per distinct error (its type and the line that raised
  it) per interval, else at DEBUG: 3,946 failures used to write 27,623 lines in
  100 s.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xmpp_queue.client.jobs import Job

log = logging.getLogger("xmpp_queue.client")

Handler = Callable[["Job"], Awaitable[object]]

MAX_REASON = 200  # characters: the service refuses a longer nack reason
TRACEBACK_INTERVAL = 60.0  # seconds: a distinct error's traceback is logged once per this
DISTINCT_ERRORS = 1000  # distinct errors remembered for that


def check_handler(handler: object) -> None:
    """Refuse a handler that is not ``async def``, at construction, before any item
    is taken: called on an item, a plain function would run its body on the event
    loop and only fail after (the item then comes back, again and again)."""
    target = handler
    while isinstance(target, functools.partial):
        target = target.func
    if inspect.iscoroutinefunction(target):
        return
    call = getattr(target, "__call__", None)  # noqa: B004 - a callable object's method
    if call is not None and inspect.iscoroutinefunction(call):
        return
    name = getattr(handler, "__qualname__", repr(handler))
    raise TypeError(
        f"the handler {name} must be an 'async def' function; for blocking code wrap "
        "it: Worker(..., in_thread(handler)) runs it in a thread pool"
    )


class InThread:
    """A blocking ``def handler(job)`` as an async handler run in a worker thread.

    Made by :func:`in_thread`; a :class:`~xmpp_queue.client.Worker` binds it to
    its own executor (:meth:`bind`), so at most ``queue_requests`` run at once
    and each held item has a thread. Unbound, it uses the loop's default executor.
    """

    def __init__(self, func: Callable[[Job], object], executor: Executor | None = None) -> None:
        self.func = func
        self.executor = executor
        self.__qualname__ = f"in_thread({getattr(func, '__qualname__', 'handler')})"

    def bind(self, executor: Executor) -> InThread:
        return InThread(self.func, executor)

    async def __call__(self, job: Job) -> object:
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        future = loop.run_in_executor(self.executor, context.run, self.func, job)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if future.done():
                raise
            # The thread runs on whatever we do: wait for it, so the task ends only
            # when the item's code has ended (a second cancel abandons it). Its
            # outcome then counts as usual: work done is acked, not redone.
            await asyncio.wait({future})
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return future.result()


def in_thread(func: Callable[[Job], object]) -> Handler:
    """A blocking ``def handler(job)`` as an async handler run in a worker thread.

    The job's own methods (extend, unlock, dead_letter) are coroutines of the
    event loop: a threaded handler returns or raises, and the worker acks or
    unlocks for it. The worker runs it in a pool of ``queue_requests`` threads.
    """
    return InThread(func)


def bind_handler(handler: Handler, executor: Executor) -> Handler:
    """*handler* with its threads in *executor* when it runs in threads."""
    return handler.bind(executor) if isinstance(handler, InThread) else handler


def failure_reason(exc: BaseException) -> str:
    """``Type: message`` in one line of at most :data:`MAX_REASON` characters
    (the module is named for exceptions outside the builtins)."""
    kind = type(exc)
    name = kind.__qualname__
    if kind.__module__ not in ("builtins", "__main__"):
        name = f"{kind.__module__}.{name}"
    text = f"{name}: {exc}" if str(exc) else name
    return "".join(c if c >= " " and c != "\x7f" else " " for c in text).strip()[:MAX_REASON]


def error_site(exc: BaseException) -> str:
    """What makes two failures "the same error" for the traceback: the exception's
    type and the line that raised it. Not its message: messages often name the item
    (``bad row 7``), and one traceback per item is the flood this avoids."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = "" if tb is None else f" at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
    return f"{type(exc).__module__}.{type(exc).__qualname__}{where}"


class FailureLog:
    """One WARNING line per failed job (with its type and message); the traceback on
    the first line of each distinct error (type and raising line, :func:`error_site`)
    per :data:`TRACEBACK_INTERVAL`, else at DEBUG."""

    def __init__(
        self, interval: float = TRACEBACK_INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval = interval
        self._clock = clock
        self._last: OrderedDict[str, float] = OrderedDict()

    def failed(self, worker: str, job: Job, exc: BaseException, reason: str) -> None:
        now = self._clock()
        site = error_site(exc)
        shown = self._last.get(site)
        with_trace = shown is None or now - shown >= self.interval
        if with_trace:
            self._last[site] = now
            self._last.move_to_end(site)
            if len(self._last) > DISTINCT_ERRORS:
                self._last.popitem(last=False)
        log.warning(
            "event=job_failed worker=%s node=%s item=%s delivery=%d error=%r",
            worker,
            job.node,
            job.item_id,
            job.delivery,
            reason,
            exc_info=exc if with_trace else None,
        )
        if not with_trace and log.isEnabledFor(logging.DEBUG):
            log.debug("event=job_failed_trace item=%s", job.item_id, exc_info=exc)
