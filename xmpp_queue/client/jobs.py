"""JobRunner: what a worker does with the items the service hands it.

Kept apart from the connection so the rules can be tested without a server:

- an item starts a handler task; success → retract (the XEP-0254 ack), an
  exception → unlock (the nack) saying why (the exception's type and message,
  :func:`~.handlers.failure_reason`), logged as one line (:class:`~.handlers.FailureLog`);
- an unlock notification for an item still being processed means the service
  took the lock back (it timed out): the result is dropped, never acked, as a
  later retract would only get ``unexpected-request`` (or ``conflict`` if
  another worker holds it now);
- never more than *capacity* (the subscription's ``queue_requests``) locks are
  held: an item beyond it (a service bug) or one arriving while draining is
  unlocked at once, never silently dropped;
- a lock stays ours while its handler runs: :meth:`JobRunner.extend_due`
  extends it before a third of it is gone (the node's lock timeout, learned by
  the worker, or ``lock_extend``), also while draining;
- draining stops taking work, waits for running handlers up to a grace period,
  then cancels the rest; an item is unlocked only once its handler's task has
  ended. A handler that does not end when cancelled (a thread cannot be
  stopped) keeps its lock, extended, and the drain waits for it, saying so once
  per item; :meth:`JobRunner.abandon` (the worker's abort) leaves it with one
  WARNING line per item.

A job counts against the capacity until its ack or nack is *sent*: the service
may hand over the next item right behind its answer, before this side has seen
that answer.

A handler may also settle its job itself (:meth:`Job.unlock` with a delay,
:meth:`Job.dead_letter`); then its return value or exception no longer
decides anything. :meth:`Job.extend` keeps the lock longer. Handlers must be
``async def`` (:mod:`.handlers`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from xmpp_queue.client.errors import ClientError, LockLost, StanzaError
from xmpp_queue.client.handlers import (
    FailureLog,
    Handler,
    check_handler,
    failure_reason,
    in_thread,
)
from xmpp_queue.client.job import (
    RESENT,
    Job,
    JobControl,
    QueueOps,
    WorkerStats,
    service_delivery,
)
from xmpp_queue.client.keepalive import LOCK_LOST, LockKeepAlive
from xmpp_queue.client.wire import ItemEvent

__all__ = [
    "LOCK_LOST",
    "Handler",
    "Job",
    "JobControl",
    "JobRunner",
    "QueueOps",
    "WorkerStats",
    "check_handler",
    "in_thread",
]

log = logging.getLogger("xmpp_queue.client")

SEEN_MEMORY = 10_000
CANCEL_WAIT = 1.0  # seconds a cancelled handler gets to end before the drain says it waits
CANCELLED = "cancelled: the worker stopped before the handler finished"


class JobRunner(LockKeepAlive):
    def __init__(
        self,
        ops: QueueOps,
        handler: Handler,
        capacity: int,
        *,
        stats: WorkerStats | None = None,
        lock_extend: int | None = None,
        lock_timeout: float | None = None,
        clock: Callable[[], float] | None = None,
        name: str = "worker",
        failures: FailureLog | None = None,
    ) -> None:
        self.ops = ops
        self.handler = handler
        self.capacity = capacity
        self.stats = stats or WorkerStats()
        self.lock_extend = lock_extend  # seconds per extension; None: the lock timeout; 0: off
        self.lock_timeout = lock_timeout  # the node's (a new lock's length), when known
        self.name = name
        self.failures = failures or FailureLog()
        self.accepting = True
        self._clock = clock or asyncio.get_running_loop().time
        self._held: dict[str, Job] = {}  # item id -> job whose lock we hold
        self._tasks: set[asyncio.Task[None]] = set()
        self._running: dict[Job, asyncio.Task[None]] = {}  # handler tasks, until they end
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._taken: OrderedDict[str, str] = OrderedDict()  # item id -> attempt taken last
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
        item_id = event.item_id
        if self._already_taken(event):
            return
        self.stats.received += 1
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
            self.first_lock,
            control=self,
        )
        job.started_at = job.locked_at
        self._held[item_id] = job
        task: asyncio.Task[None] = asyncio.ensure_future(self._process(job))
        self._tasks.add(task)
        self._running[job] = task
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _: self._running.pop(job, None))

    def _already_taken(self, event: ItemEvent) -> bool:
        """Whether *event* is the service re-sending a delivery this worker already took.

        After a restart the service sends each held item's notice again (marked
        ``delivery-resent``), because the notice of a lock committed just before a
        crash may never have left. Such a notice for the same delivery attempt as the
        one taken here last (still running, or settled with its ack or nack being
        re-sent) is not new work: running it again would do the job twice. Any other
        notice (a new attempt, a republished id) is taken as usual.
        """
        attempt = event.headers.get("delivery-attempt")
        if attempt is None:
            return False
        item_id = event.item_id
        if event.headers.get(RESENT) is not None and self._taken.get(item_id) == attempt:
            self.stats.resent_ignored += 1
            log.info(
                "event=resent_ignored worker=%s node=%s item=%s attempt=%s",
                self.name,
                event.node,
                item_id,
                attempt,
            )
            return True
        self._taken.pop(item_id, None)
        self._taken[item_id] = attempt
        if len(self._taken) > SEEN_MEMORY:
            self._taken.popitem(last=False)
        return False

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
        except Exception as exc:
            reason = failure_reason(exc)
            self.failures.failed(self.name, job, exc, reason)
            if job.settled is not None:
                return
            if self._release(job):
                self.stats.failed += 1
                await self._unlock(job.node, job.item_id, reason)
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

    async def _unlock(self, node: str, item_id: str, reason: str = "") -> None:
        try:
            await self.ops.unlock(node, item_id, reason)
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
        job.locked_at, job.lock_for = now, float(seconds)
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

    # --- ending --------------------------------------------------------------------

    async def drain(self, grace: float) -> None:
        """Stop taking work; let running jobs finish for *grace* seconds; cancel the
        rest and unlock what they held once their handlers have ended. A handler
        still running after it was cancelled (a thread) keeps its lock and is
        waited for: one WARNING line per item says so."""
        self.accepting = False
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)
        leftover = dict(self._running)
        for task in leftover.values():
            task.cancel()
        if leftover:
            await asyncio.wait(set(leftover.values()), timeout=CANCEL_WAIT)
        still = {job: task for job, task in leftover.items() if not task.done()}
        for job in still:
            log.warning(
                "event=drain_waits worker=%s node=%s item=%s running_for=%.1fs "
                "reason=handler_still_running action=lock_kept_until_it_ends",
                self.name,
                job.node,
                job.item_id,
                self._clock() - job.started_at,
            )
        if still:
            await asyncio.gather(*still.values(), return_exceptions=True)
        held = list(self._held.values())  # their handlers have all ended by now
        self._held.clear()
        self._emptied.set()
        if held:
            log.info("event=drain_unlock worker=%s items=%d", self.name, len(held))
            self.stats.returned += len(held)
            await asyncio.gather(*(self._unlock(j.node, j.item_id, CANCELLED) for j in held))
        if self._tasks:  # acks and unlocks still on their way
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def abandon(self) -> None:
        """Cancel everything without a word to the service (the connection is gone
        or the worker aborts). A handler that may still run (a thread, or one that
        ignores cancellation) is named in one WARNING line per item: the service
        gives its item to another worker once this connection has closed."""
        self.accepting = False
        now = self._clock()
        for job, task in list(self._running.items()):
            if task.done() or job.lost or self._held.get(job.item_id) is not job:
                continue
            self.stats.abandoned += 1
            log.warning(
                "event=item_abandoned worker=%s node=%s item=%s running_for=%.1fs "
                "reason=worker_aborted note=another_worker_may_run_it",
                self.name,
                job.node,
                job.item_id,
                now - job.started_at,
            )
        for task in list(self._tasks):
            task.cancel()
        self._held.clear()
        self._emptied.set()
