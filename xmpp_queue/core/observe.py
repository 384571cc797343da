"""Watching committed work from outside the service, without changing it.

Why a store decorator: operators need counts (published, delivered, acked ...),
waits (publish to delivery, delivery to ack) and commit figures, and the event
ledger already records every state change of a queue item in the transaction
that makes it. :class:`ObservedStore` wraps any :class:`~xmpp_queue.core.ports.Store`
and, when a transaction commits, hands its ledger events to a
:class:`CommitObserver` (metrics). A transaction that rolls back reports nothing,
so the figures count what really happened, once.

The waits need times the ledger rows do not carry: the ``published_at`` of an
item handed out (read from ``items.next_ready``, which dispatch calls just
before locking it) and the ``locked_at`` of an item acked (read from
``items.get``, which the ack path calls before removing it). Both are kept only
for the life of one transaction, so nothing grows with the backlog.

The commit batcher tells how many operations each committed batch held through
its ``on_commit`` callback (the one hook inside the service); it is wired to
:meth:`CommitObserver.batch_committed` by the composition root.

Standard library only, like all of ``core``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import Item
from xmpp_queue.core.ports import EventLedger, ItemRepository, Savepoint, Store, Transaction

__all__ = ["CommitObserver", "CommittedBatch", "ObservedStore", "Wait"]

log = logging.getLogger("xmpp_queue.core.observe")


@dataclass(frozen=True, slots=True)
class Wait:
    """One measured wait of one item on one queue node, in seconds."""

    node: str
    seconds: float


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    """What one committed transaction did.

    ``first_deliveries``: publish -> first hand-out, one per item delivered for
    the first time; ``acks``: hand-out -> ack, one per item acked by its holder;
    ``commit_seconds``: how long ``commit()`` took (the durable write).
    """

    events: tuple[LedgerEvent, ...]
    first_deliveries: tuple[Wait, ...]
    acks: tuple[Wait, ...]
    commit_seconds: float


class CommitObserver(Protocol):
    """Told about committed work; must be quick and must not raise (it runs inline)."""

    def committed(self, batch: CommittedBatch) -> None: ...

    def commit_failed(self) -> None: ...

    def batch_committed(self, operations: int) -> None:
        """The commit batcher's ``on_commit``: operations in the batch just committed."""


class _Recorder:
    """Per-transaction notes: appended events and the item times the waits need."""

    __slots__ = ("events", "locked_at", "published_at")

    def __init__(self) -> None:
        self.events: list[LedgerEvent] = []
        self.published_at: dict[tuple[str, str], datetime] = {}
        self.locked_at: dict[tuple[str, str], datetime] = {}

    def batch(self, commit_seconds: float) -> CommittedBatch:
        first: list[Wait] = []
        acks: list[Wait] = []
        for e in self.events:
            key = (e.node, e.item_id)
            if e.kind is EventKind.DELIVERED and e.deliveries == 1:
                since = self.published_at.get(key)
                if since is not None:
                    first.append(Wait(e.node, _seconds(e.at, since)))
            elif e.kind is EventKind.ACKED:
                since = self.locked_at.get(key)
                if since is not None:
                    acks.append(Wait(e.node, _seconds(e.at, since)))
        return CommittedBatch(tuple(self.events), tuple(first), tuple(acks), commit_seconds)


def _seconds(later: datetime, earlier: datetime) -> float:
    if later.tzinfo is None:
        later = later.replace(tzinfo=UTC)
    if earlier.tzinfo is None:
        earlier = earlier.replace(tzinfo=UTC)
    return max(0.0, (later - earlier).total_seconds())


class _Ledger:
    """The transaction's ledger, also noting each appended event."""

    __slots__ = ("_inner", "_notes", "count", "events")

    def __init__(self, inner: EventLedger, notes: _Recorder) -> None:
        self._inner = inner
        self._notes = notes
        self.count = inner.count
        self.events = inner.events

    def append(self, event: LedgerEvent) -> None:
        self._inner.append(event)
        self._notes.events.append(event)


class _Items:
    """The transaction's items repository; ``next_ready`` and ``get`` note item times.

    Every other method is the inner repository's own bound method (looked up
    once, so the hot path pays no extra call).
    """

    def __init__(self, inner: ItemRepository, notes: _Recorder) -> None:
        self._inner = inner
        self._notes = notes

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        setattr(self, name, value)
        return value

    async def next_ready(self, node_id: str, now: datetime, limit: int) -> list[Item]:
        items = await self._inner.next_ready(node_id, now, limit)
        published = self._notes.published_at
        for item in items:
            if item.deliveries == 0:
                published[(node_id, item.item_id)] = item.published_at
        return items

    async def get(self, node_id: str, item_id: str) -> Item | None:
        item = await self._inner.get(node_id, item_id)
        if item is not None and item.locked_at is not None:
            self._notes.locked_at[(node_id, item_id)] = item.locked_at
        return item


@dataclass(slots=True)
class _ObservedTransaction:
    inner: Transaction
    notes: _Recorder
    observer: CommitObserver
    timer: Callable[[], float]
    nodes: Any = field(init=False)
    affiliations: Any = field(init=False)
    subscriptions: Any = field(init=False)
    items: ItemRepository = field(init=False)
    ledger: EventLedger = field(init=False)

    def __post_init__(self) -> None:
        self.nodes = self.inner.nodes
        self.affiliations = self.inner.affiliations
        self.subscriptions = self.inner.subscriptions
        self.items = cast(ItemRepository, _Items(self.inner.items, self.notes))
        self.ledger = _Ledger(self.inner.ledger, self.notes)

    def savepoint(self) -> Savepoint:
        """The inner savepoint; rolling it back also forgets the events it noted, so
        an operation that was undone is not counted."""
        return _ObservedSavepoint(self.inner.savepoint(), self.notes, len(self.notes.events))

    async def commit(self) -> None:
        durable = await self.hand_off()
        await asyncio.shield(durable)

    async def hand_off(self) -> asyncio.Future[None]:
        """The inner hand-off; the batch is reported when (and if) it is durable.
        ``commit_seconds`` runs from the hand-off to durable, so it includes the
        wait for the commit in flight before it (the pipeline, storage/inflight.py)."""
        started = self.timer()
        try:
            durable = await self.inner.hand_off()
        except BaseException:
            _safely(self.observer.commit_failed)
            raise
        notes, self.notes = self.notes, _Recorder()  # a second commit reports only its own
        batch = notes.batch(0.0)  # now: the events are those of this hand-off

        def report(done: asyncio.Future[None]) -> None:
            if done.cancelled() or done.exception() is not None:
                _safely(self.observer.commit_failed)
                return
            seconds = self.timer() - started
            _safely(lambda: self.observer.committed(replace(batch, commit_seconds=seconds)))

        durable.add_done_callback(report)
        return durable


@dataclass(slots=True)
class _ObservedSavepoint:
    inner: Savepoint
    notes: _Recorder
    events: int  # how many events were noted when the savepoint began

    def rollback(self) -> None:
        self.inner.rollback()
        del self.notes.events[self.events :]

    def release(self) -> None:
        self.inner.release()


def _safely(call: Callable[[], None]) -> None:
    """Run an observer callback; a failure there is logged, never raised: the commit
    has happened, and raising would make the batcher run the batch a second time."""
    try:
        call()
    except Exception:
        log.exception("event=observer_failed")


class ObservedStore:
    """A :class:`Store` that reports each committed transaction to an observer."""

    def __init__(
        self,
        inner: Store,
        observer: CommitObserver,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.inner = inner
        self.observer = observer
        self._timer = timer

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Transaction]:
        async with self.inner.transaction() as tx:
            yield cast(
                Transaction, _ObservedTransaction(tx, _Recorder(), self.observer, self._timer)
            )

    async def ping(self, now: datetime) -> None:
        """One round trip to the database (a ledger count), for readiness probes.

        Raises whatever the store raises when the database cannot answer.
        """
        async with self.inner.transaction() as tx:
            await tx.ledger.count("", EventKind.ACKED, now)

    async def close(self) -> None:
        await self.inner.close()


def _conforms(store: ObservedStore) -> Store:
    """Let mypy check that ObservedStore satisfies the Store protocol."""
    return store
