"""CommitBatcher: one writer, many operations per transaction (group commit).

Why: a durable commit (fsync) costs far more than the statements of one
operation, and slixmpp runs every stanza's handler as its own task. So every
operation is queued here and a single task runs them one after another inside
one transaction, then commits once for the whole burst. This gives:

- group commit: a burst of publishes shares one transaction and one fsync;
- serialisation: operations never interleave, so a check-then-write inside an
  operation cannot race another one (ack versus timeout loses cleanly);
- commit-before-effects: a caller gets its result (and the notifications to
  send) only after the transaction holding its change committed;
- pipelining: while batch N's commit is being written (the fsync), batch N+1's
  operations already run against memory, each in its savepoint; N+1 is handed
  to the store when N settled (one commit in flight, ``storage/inflight.py``),
  and its callers are answered when N+1 is durable, after N's: a publish that
  arrives during a commit waits for that commit's end and its own, not for the
  commit in flight before its operation even starts.

All or nothing, per operation: each operation runs inside its own savepoint
of the shared transaction. Whatever it raises (a :class:`PubSubError`, a bug,
a failed assertion), the savepoint is rolled back, so exactly that operation's
changes (state and ledger rows) are undone and its effects are dropped; the
caller gets the exception and the rest of the batch commits. This is enforced
by the store, not by the order of lines in the service. A commit that fails
(disk full, database gone) fails every operation of the batch: the store has
put memory back to the last commit, and no caller is told it succeeded; the
batch built on it fails too (its changes rest on the failed ones). (A
lost database connection is retried below us: the store writes the batch again
on a new connection when the database surely did not commit it.)
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from xmpp_queue.core.effects import Effect
from xmpp_queue.core.errors import PubSubError, StorageUnavailable
from xmpp_queue.core.ledger import record_filtered
from xmpp_queue.core.ports import Clock, Store, Transaction

T = TypeVar("T")
log = logging.getLogger("xmpp_queue.core.batcher")


@dataclass(slots=True)
class Work:
    """What an operation sees: the shared transaction, its own clock reading and
    its own list of effects. ``touched`` names the nodes the operation loaded
    (in order): the service settles each of them once at the operation's end
    (a queue node dispatches what became possible)."""

    tx: Transaction
    now: datetime
    effects: list[Effect] = field(default_factory=list)
    deadlines_changed: bool = False
    touched: dict[str, None] = field(default_factory=dict)
    filtered: dict[tuple[str, str], int] | None = None
    """(queue, topic) -> how many of the topic's items the queue's filter kept out in
    this operation; the batcher writes one ``filtered`` ledger row per pair and
    committed batch (a counter, not a row per item: ``core/topics.py``)."""


Operation = Callable[[Work], Awaitable[T]]


@dataclass(slots=True)
class _Pending(Generic[T]):
    op: Operation[T]
    future: asyncio.Future[tuple[T, tuple[Effect, ...]]]
    result: Any = None
    effects: tuple[Effect, ...] = ()
    error: BaseException | None = None


class CommitBatcher:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        max_batch: int,
        on_deadlines: Callable[[datetime | None], None] | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._max_batch = max(1, max_batch)
        self._queue: deque[_Pending[Any]] = deque()
        self._wake = asyncio.Event()  # an operation queued, or the commit in flight settled
        self._idle = asyncio.Event()  # every queued operation answered
        self._idle.set()
        self._unanswered = 0
        self._inflight: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self.on_deadlines = on_deadlines
        self.batches = 0
        self.operations = 0
        self.on_commit: Callable[[int], None] | None = None  # core/observe.py: batch sizes

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="xmpp-queue-commit-batcher"
            )

    async def stop(self) -> None:
        """Let queued operations finish (answered), then stop the writer."""
        if self._task is None:
            return
        await self._idle.wait()
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None

    async def run(self, op: Operation[T]) -> tuple[T, tuple[Effect, ...]]:
        """Queue *op*; return its result and effects once its batch committed."""
        self.start()
        future: asyncio.Future[tuple[T, tuple[Effect, ...]]] = (
            asyncio.get_running_loop().create_future()
        )
        self._queue.append(_Pending(op, future))
        self._unanswered += 1
        self._idle.clear()
        self._wake.set()
        return await future

    async def _run(self) -> None:
        while True:
            while not self._queue:
                self._wake.clear()
                await self._wake.wait()
            batch: list[_Pending[Any]] = []
            try:
                await self._run_batch(batch)
            except asyncio.CancelledError:
                for p in batch:
                    if not p.future.done():
                        p.future.cancel()
                    self._answered()
                raise

    async def _run_batch(self, batch: list[_Pending[Any]]) -> None:
        try:
            deadline, durable = await self._attempt(batch)
        except Exception as exc:
            # The transaction failed before its write began: the commit before it
            # failed (memory is back at the last durable state), or a bug.
            self._failed(batch, exc)
            self._resolve(batch, _UNCHANGED)
            return
        self._inflight = durable
        if durable.done():  # committed within the hand-off: answer now, not a turn later
            self._settle(batch, deadline, durable)
            return
        durable.add_done_callback(lambda done: self._settle(batch, deadline, done))
        durable.add_done_callback(lambda _: self._wake.set())

    async def _attempt(self, batch: list[_Pending[Any]]) -> tuple[object, asyncio.Future[None]]:
        """Run operations in one transaction, each in its own savepoint, then hand
        the transaction to the store. While the commit before it is still being
        written, operations queued meanwhile join this batch (the pipeline):
        they run against memory now and commit right after it."""
        changed = False
        filtered: dict[tuple[str, str], int] = {}
        async with self._store.transaction() as tx:
            while True:
                if self._queue and len(batch) < self._max_batch:
                    p = self._queue.popleft()
                    batch.append(p)
                    changed = await self._apply(p, tx, filtered) or changed
                    continue
                if len(batch) >= self._max_batch or not self._writing():
                    break
                self._wake.clear()
                await self._wake.wait()
            if filtered:
                record_filtered(tx.ledger, self._clock(), filtered)
            deadline: object = _UNCHANGED
            if changed:
                deadline = await tx.items.next_deadline(self._clock())
            durable = await tx.hand_off()
        return deadline, durable

    def _writing(self) -> bool:
        return self._inflight is not None and not self._inflight.done()

    async def _apply(
        self, p: _Pending[Any], tx: Transaction, filtered: dict[tuple[str, str], int]
    ) -> bool:
        """Run one operation in its savepoint; whether it changed a deadline. Counts
        of items kept out by queue filters are added to *filtered*."""
        work = Work(tx=tx, now=self._clock())
        mark = tx.savepoint()
        try:
            p.result = await p.op(work)
        except Exception as exc:
            mark.rollback()
            p.error = exc
            if not isinstance(exc, PubSubError):
                log.error("event=operation_failed action=undone", exc_info=exc)
            return False
        mark.release()
        p.effects = tuple(work.effects)
        p.error = None
        if work.filtered:
            for key, n in work.filtered.items():
                filtered[key] = filtered.get(key, 0) + n
        return work.deadlines_changed

    def _settle(
        self, batch: list[_Pending[Any]], deadline: object, done: asyncio.Future[None]
    ) -> None:
        """The batch's write settled: answer its operations, in batch order (the
        store writes one commit at a time, so batches settle in order too)."""
        error = done.exception() if not done.cancelled() else asyncio.CancelledError()
        if error is not None:
            self._failed(batch, error)
            deadline = _UNCHANGED
        else:
            self.batches += 1
            self.operations += len(batch)
            if self.on_commit is not None:
                self.on_commit(len(batch))
        self._resolve(batch, deadline)

    def _failed(self, batch: list[_Pending[Any]], exc: BaseException) -> None:
        """Every operation of a batch whose commit failed fails with it."""
        if not isinstance(exc, StorageUnavailable):  # the store logs each outage once
            log.error("event=commit_failed operations=%d error=%s", len(batch), type(exc).__name__)
        for p in batch:
            p.error = exc

    def _resolve(self, batch: list[_Pending[Any]], deadline: object) -> None:
        for p in batch:
            if not p.future.done():
                if p.error is not None:
                    p.future.set_exception(p.error)
                else:
                    p.future.set_result((p.result, p.effects))
            self._answered()
        if deadline is not _UNCHANGED and self.on_deadlines is not None:
            self.on_deadlines(deadline)  # type: ignore[arg-type]

    def _answered(self) -> None:
        self._unanswered -= 1
        if self._unanswered == 0:
            self._idle.set()


_UNCHANGED = object()
