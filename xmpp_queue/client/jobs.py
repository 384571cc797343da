"""JobRunner: what a worker does with the items the service hands it.

Kept apart from the connection so the rules can be tested without a server:

- an item starts a handler task; success → retract (the XEP-0254 ack), an
  exception → unlock (the nack), with the exception logged;
- an unlock notification for an item still being processed means the service
  took the lock back (it timed out): the result is dropped, never acked, as a
  later retract would only get ``unexpected-request`` (or ``conflict`` if
  another worker holds it now);
- never more than *capacity* (the subscription's ``queue_requests``) locks are
  held: an item beyond it (a service bug) or one arriving while draining is
  unlocked at once, never silently dropped;
- draining stops taking work, waits for running handlers up to a grace period,
  then cancels the rest and unlocks their items.

A job counts against the capacity until its ack or nack is *sent*: the service
may hand over the next item right behind its answer, before this side has seen
that answer.

A handler may also settle its job itself (:meth:`Job.unlock` with a delay,
:meth:`Job.dead_letter`); then its return value or exception no longer
decides anything. :meth:`Job.extend` keeps the lock longer. Handlers must be
``async def``: a plain function would block the event loop that also carries
every other job's acks and the lock extensions (:func:`check_handler` refuses
it; :func:`in_thread` runs one in a worker thread on purpose).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from xml.etree import ElementTree as ET

from slixmpp.xmlstream.tostring import tostring

from xmpp_queue.client.attributes import AttributeView
from xmpp_queue.client.errors import ClientError, LockLost, StanzaError
from xmpp_queue.client.payload import parse_json_payload
from xmpp_queue.client.wire import ItemEvent

log = logging.getLogger("xmpp_queue.client")

# Conditions meaning "this lock is no longer yours" (XEP-0254 §2.3 / §2.4).
# "forbidden": the service no longer counts us as a subscriber (it saw us leave, e.g.
# across a server restart) and so released our locks.
LOCK_LOST = frozenset({"unexpected-request", "conflict", "item-not-found", "forbidden"})
SEEN_MEMORY = 10_000


@dataclass(slots=True, eq=False)
class Job(AttributeView):
    """One locked item handed to a handler.

    ``element`` is the payload element (``None`` for an item without payload);
    ``payload`` serialises it, ``json()`` reads a XEP-0335 JSON payload.
    ``headers`` are the XEP-0131 SHIM headers of the notification (a dead
    letter's ``origin-node``, ``deliveries``...); ``attributes`` the
    publisher's among them, and ``priority``, ``deliver_at``, ``expires_at``,
    ``ttl`` what it was published with (see :class:`AttributeView`). ``delivery`` is the service's
    delivery count (1 = first delivery, to any worker; from the
    ``delivery-attempt`` header, or this worker's own count when a service
    does not send it). ``lost`` turns True if the service takes the lock back
    while the handler runs: the result will be dropped, so a long handler may
    check it and give up early. ``settled`` says how the handler ended the job
    itself (``"unlocked"``, ``"dead-lettered"``) or is None.
    """

    node: str
    item_id: str
    element: ET.Element | None
    headers: Mapping[str, str] = field(default_factory=dict)
    delivery: int = 1
    lost: bool = False
    locked_at: float = 0.0
    settled: str | None = None
    control: JobControl | None = field(default=None, repr=False)

    async def extend(self, seconds: int) -> None:
        """Keep the lock for *seconds* from now (a long step ahead); raises
        :class:`LockLost` if the lock is no longer ours."""
        await self._control_().extend(self, int(seconds))

    async def unlock(self, delay: int = 0) -> None:
        """Give the item back now; with *delay* (seconds) nobody gets it before then.
        The handler's return value no longer matters."""
        await self._control_().unlock(self, int(delay))

    async def dead_letter(self, reason: str) -> None:
        """Move the item to the node's dead-letter node now, with *reason* in its
        ``reason`` header (a poison item: retrying cannot help)."""
        await self._control_().dead_letter(self, reason)

    def _control_(self) -> JobControl:
        if self.control is None:
            raise RuntimeError("this job was not handed out by a worker")
        return self.control

    @property
    def payload(self) -> str:
        return "" if self.element is None else str(tostring(self.element))

    def json(self) -> Any:
        if self.element is None:
            raise ValueError(f"item {self.item_id} has no payload")
        return parse_json_payload(self.element)


class JobControl(Protocol):
    """What a job's own methods ask of the worker that holds it (``JobRunner``)."""

    async def extend(self, job: Job, seconds: int) -> None: ...

    async def unlock(self, job: Job, delay: int) -> None: ...

    async def dead_letter(self, job: Job, reason: str) -> None: ...


Handler = Callable[[Job], Awaitable[object]]


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


def in_thread(func: Callable[[Job], object]) -> Handler:
    """A blocking ``def handler(job)`` as an async handler run in a worker thread.

    The job's own methods (extend, unlock, dead_letter) are coroutines of the
    event loop: a threaded handler returns or raises, and the worker acks or
    unlocks for it.
    """

    async def run(job: Job) -> object:
        return await asyncio.to_thread(func, job)

    run.__qualname__ = f"in_thread({getattr(func, '__qualname__', 'handler')})"
    return run


def service_delivery(headers: Mapping[str, str], seen_here: int) -> int:
    """The service's delivery count from the ``delivery-attempt`` header, as an int;
    this worker's own count when the header is absent or not a number."""
    try:
        return max(1, int(headers["delivery-attempt"]))
    except (KeyError, ValueError):
        return seen_here


@dataclass(slots=True)
class WorkerStats:
    """What a worker did, for logs, progress displays and tests."""

    received: int = 0
    notifications: int = 0  # messages that carried items (fewer than received: batches)
    acked: int = 0
    failed: int = 0  # the handler raised: unlocked for someone else
    lost: int = 0  # the service took the lock back: result dropped
    redelivered_seen: int = 0  # items this worker had received before
    returned: int = 0  # given back unprocessed (draining, over capacity, cancelled)
    extended: int = 0  # lock extensions granted
    unlocked: int = 0  # the handler gave its job back itself (job.unlock)
    dead_lettered: int = 0  # the handler dead-lettered its job (job.dead_letter)


class QueueOps(Protocol):
    """The requests a runner sends (``PubSubLink`` provides them)."""

    async def retract(self, node: str, item_id: str) -> None: ...

    async def unlock(self, node: str, item_id: str) -> None: ...

    async def extend(self, node: str, item_id: str, seconds: int) -> None: ...

    async def unlock_later(self, node: str, item_id: str, delay: int) -> None: ...

    async def dead_letter(self, node: str, item_id: str, reason: str) -> None: ...


class JobRunner:
    def __init__(
        self,
        ops: QueueOps,
        handler: Handler,
        capacity: int,
        *,
        stats: WorkerStats | None = None,
        lock_extend: int | None = None,
        clock: Callable[[], float] | None = None,
        name: str = "worker",
    ) -> None:
        self.ops = ops
        self.handler = handler
        self.capacity = capacity
        self.stats = stats or WorkerStats()
        self.lock_extend = lock_extend
        self.name = name
        self.accepting = True
        self._clock = clock or asyncio.get_running_loop().time
        self._held: dict[str, Job] = {}  # item id -> job whose lock we hold
        self._tasks: set[asyncio.Task[None]] = set()
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._emptied = asyncio.Event()

    @property
    def held(self) -> int:
        """Locks held right now (what the service counts against queue_requests)."""
        return len(self._held)

    async def idle(self) -> None:
        """Until no lock is held (every job acked, nacked or lost)."""
        while self._held:
            self._emptied.clear()
            await self._emptied.wait()

    @property
    def busy(self) -> int:
        """Tasks still running: handlers (also of lost jobs), acks, unlocks."""
        return len(self._tasks)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- events from the service ---------------------------------------------------

    def offer(self, event: ItemEvent) -> None:
        """An item notification: start it, or give it back at once."""
        self.stats.received += 1
        item_id = event.item_id
        delivery = self._seen.pop(item_id, 0) + 1
        self._seen[item_id] = delivery
        if len(self._seen) > SEEN_MEMORY:
            self._seen.popitem(last=False)
        if delivery > 1:
            self.stats.redelivered_seen += 1
        if item_id in self._held:  # handed to us again: the newest lock is the truth
            self.on_unlocked(item_id)
        if not self.accepting or len(self._held) >= self.capacity:
            reason = "draining" if not self.accepting else "over_capacity"
            log.warning(
                "event=item_returned worker=%s node=%s item=%s reason=%s",
                self.name,
                event.node,
                item_id,
                reason,
            )
            self.stats.returned += 1
            self._spawn(self._unlock(event.node, item_id))
            return
        job = Job(
            event.node,
            item_id,
            event.element,
            event.headers,
            service_delivery(event.headers, delivery),
            False,
            self._clock(),
            control=self,
        )
        self._held[item_id] = job
        self._spawn(self._process(job))

    def on_unlocked(self, item_id: str) -> None:
        """The service says the item is no longer ours. If we still hold it in our
        books, its lock timed out (our own nacks leave the books when sent)."""
        job = self._held.pop(item_id, None)
        if not self._held:
            self._emptied.set()
        if job is not None:
            job.lost = True
            log.warning(
                "event=lock_lost worker=%s node=%s item=%s", self.name, job.node, job.item_id
            )

    # --- processing ----------------------------------------------------------------

    async def _process(self, job: Job) -> None:
        try:
            await self.handler(job)
        except Exception:
            log.exception(
                "event=job_failed worker=%s node=%s item=%s", self.name, job.node, job.item_id
            )
            if job.settled is not None:
                return
            if self._release(job):
                self.stats.failed += 1
                await self._unlock(job.node, job.item_id)
            else:
                self.stats.lost += 1
            return
        if job.settled is not None:
            return
        if not self._release(job):
            self.stats.lost += 1
            log.warning(
                "event=result_dropped worker=%s node=%s item=%s reason=lock_lost",
                self.name,
                job.node,
                job.item_id,
            )
            return
        try:
            await self.ops.retract(job.node, job.item_id)
        except StanzaError as exc:
            if exc.condition in LOCK_LOST:
                self.stats.lost += 1
                log.warning(
                    "event=ack_refused worker=%s node=%s item=%s condition=%s",
                    self.name,
                    job.node,
                    job.item_id,
                    exc.condition,
                )
            else:
                log.error(
                    "event=ack_failed worker=%s node=%s item=%s error=%s",
                    self.name,
                    job.node,
                    job.item_id,
                    exc,
                )
            return
        except (ClientError, TimeoutError) as exc:
            log.warning("event=ack_failed worker=%s item=%s error=%r", self.name, job.item_id, exc)
            return
        self.stats.acked += 1

    def _release(self, job: Job) -> bool:
        """Take *job* off the books before its ack/nack goes out; False if lost."""
        if job.lost or self._held.get(job.item_id) is not job:
            return False
        del self._held[job.item_id]
        if not self._held:
            self._emptied.set()
        return True

    async def _unlock(self, node: str, item_id: str) -> None:
        try:
            await self.ops.unlock(node, item_id)
        except StanzaError as exc:
            level = logging.INFO if exc.condition in LOCK_LOST else logging.WARNING
            log.log(
                level, "event=unlock_refused worker=%s item=%s error=%s", self.name, item_id, exc
            )
        except (ClientError, TimeoutError) as exc:
            log.warning("event=unlock_failed worker=%s item=%s error=%r", self.name, item_id, exc)

    # --- the job's own requests (Job.extend / unlock / dead_letter) ------------------

    def _settle(self, job: Job, how: str) -> None:
        if job.settled is not None:
            raise RuntimeError(f"item {job.item_id} was already {job.settled}")
        if not self._release(job):
            raise LockLost(f"item {job.item_id}: the service took the lock back")
        job.settled = how

    async def extend(self, job: Job, seconds: int) -> None:
        if job.settled is not None or job.lost or self._held.get(job.item_id) is not job:
            raise LockLost(f"item {job.item_id}: no lock to extend")
        now = self._clock()
        try:
            await self.ops.extend(job.node, job.item_id, seconds)
        except StanzaError as exc:
            if exc.condition in LOCK_LOST:
                self.on_unlocked(job.item_id)
                raise LockLost(f"item {job.item_id}: {exc}") from None
            raise
        job.locked_at = now
        self.stats.extended += 1

    async def unlock(self, job: Job, delay: int) -> None:
        self._settle(job, "unlocked")
        self.stats.unlocked += 1
        if delay > 0:
            await self.ops.unlock_later(job.node, job.item_id, delay)
        else:
            await self.ops.unlock(job.node, job.item_id)

    async def dead_letter(self, job: Job, reason: str) -> None:
        self._settle(job, "dead-lettered")
        self.stats.dead_lettered += 1
        log.info(
            "event=job_dead_lettered worker=%s node=%s item=%s reason=%r",
            self.name,
            job.node,
            job.item_id,
            reason,
        )
        await self.ops.dead_letter(job.node, job.item_id, reason)

    # --- lock extension ------------------------------------------------------------

    async def extend_due(self) -> int:
        """Extend the locks held for a third of ``lock_extend`` or more; returns how
        many were extended. A refused extension means the lock is already gone.

        With :meth:`extend_forever` checking every sixth of the period, a lock is
        extended before half of its time is gone, whatever its phase: the other
        half is the margin for the round trip on a busy machine.
        """
        if not self.lock_extend:
            return 0
        now = self._clock()
        due = [j for j in self._held.values() if now - j.locked_at >= self.lock_extend / 3]
        results = await asyncio.gather(
            *(self.ops.extend(j.node, j.item_id, self.lock_extend) for j in due),
            return_exceptions=True,
        )
        extended = 0
        for job, result in zip(due, results, strict=True):
            if result is None:
                job.locked_at = now
                extended += 1
            elif isinstance(result, StanzaError) and result.condition in LOCK_LOST:
                self.on_unlocked(job.item_id)
            else:
                log.warning(
                    "event=extend_failed worker=%s item=%s error=%r", self.name, job.item_id, result
                )
        self.stats.extended += extended
        return extended

    async def extend_forever(self) -> None:
        """Run :meth:`extend_due` every ``lock_extend / 6`` seconds."""
        assert self.lock_extend
        while True:
            await asyncio.sleep(self.lock_extend / 6)
            await self.extend_due()

    # --- ending --------------------------------------------------------------------

    async def drain(self, grace: float) -> None:
        """Stop taking work; let running jobs finish for *grace* seconds; cancel the
        rest and unlock what they held."""
        self.accepting = False
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)
        leftover = list(self._tasks)
        for task in leftover:
            task.cancel()
        if leftover:
            await asyncio.gather(*leftover, return_exceptions=True)
        held = list(self._held.values())
        self._held.clear()
        self._emptied.set()
        if held:
            log.info("event=drain_unlock worker=%s items=%d", self.name, len(held))
            self.stats.returned += len(held)
            await asyncio.gather(*(self._unlock(j.node, j.item_id) for j in held))
        if self._tasks:  # unlocks of items that arrived while cancelling
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def abandon(self) -> None:
        """Cancel everything without a word to the service (the connection is gone)."""
        self.accepting = False
        for task in list(self._tasks):
            task.cancel()
        self._held.clear()
        self._emptied.set()
