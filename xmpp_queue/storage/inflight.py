"""One commit handed to the backend and not yet settled (the commit pipeline).

Why a pipeline: a durable commit waits on the disk (fsync) or on the database's
round trip, while memory is already the truth. So the store lets the next
transaction run its operations against memory while the previous one's write is
in flight, and starts that transaction's write when the previous one settled.
The rules, kept by ``store.py`` and proved by the property tests:

- **At most one commit in flight.** A transaction that hands off its changes
  while another commit is in flight first waits for it; so writes reach the
  database in the order their transactions ran, and the rows of commit N+1
  never land before those of N.
- **Durable before told.** The awaitable a hand-off returns resolves only when
  the write committed; a caller answers and sends effects after that.
- **A failure takes everything built on it.** When commit N fails, the
  transaction running on top of it (N+1) fails too, however its own operations
  went: its changes are undone first, then N's, so memory equals the last
  durable state again (undo in the reverse order of the changes). When nobody
  builds on N, N's changes are undone as soon as it fails.

``InFlight`` is the record the store keeps for that: the handed-off
:class:`~xmpp_queue.storage.changes.ChangeSet` (its originals undo it), the
plan being written (a snapshot: frozen rows, taken at hand-off), the future the
callers wait on, and whether a transaction is building on top of it (then that
transaction undoes it on failure, not the write's completion).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from xmpp_queue.core.ledger import FINISHED, EventKind, LedgerEvent
from xmpp_queue.core.model import Item
from xmpp_queue.storage import backlog
from xmpp_queue.storage.backend import Backend
from xmpp_queue.storage.backlog import BacklogBudget
from xmpp_queue.storage.changes import ChangeSet
from xmpp_queue.storage.flush import Flush
from xmpp_queue.storage.state import MemoryState


@dataclass(slots=True, eq=False)
class InFlight:
    """A handed-off commit (see the module docstring)."""

    changes: ChangeSet
    flush: Flush
    done: asyncio.Future[None]
    dependent: bool = False  # a transaction is running on top of these changes
    failed: BaseException | None = None
    maybe_committed: bool = False
    undone: bool = False
    task: asyncio.Task[None] | None = field(default=None, repr=False)  # the write

    def settled(self) -> bool:
        return self.done.done()


def durable_now() -> asyncio.Future[None]:
    """An already-resolved hand-off: a transaction that changed nothing."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future


def cool_settled(
    state: MemoryState, budget: BacklogBudget, pending: list[list[Item]], c: InFlight | None
) -> None:
    """Thin out what settled commits wrote (``backlog.cool``, then payloads).

    The store runs it between transactions, never while one runs: moving an
    item to its node's cold tail under an operation that read it would leave it
    in two places. Keys the commit still in flight (*c*) recorded are left whole
    (its undo would put them back beside their cold copy)."""
    for items in pending:
        if c is not None:
            held, nodes = c.changes.items, c.changes.nodes
            items = [i for i in items if (i.node, i.item_id) not in held and i.node not in nodes]
        backlog.cool(state, items, budget)
        state.cool(items)


class _Settles(Protocol):
    backend: Backend

    async def settled(self) -> None: ...


class AfterInFlight:
    """The backend's ledger reads, after the commit in flight settled: its rows
    are neither in the database yet nor among the reading transaction's own."""

    def __init__(self, store: _Settles) -> None:
        self._store = store

    async def ledger_count(self, node_id: str, kind: EventKind, since: datetime) -> int:
        await self._store.settled()
        return await self._store.backend.ledger_count(node_id, kind, since)

    async def ledger_events(self, node_id: str | None) -> list[LedgerEvent]:
        await self._store.settled()
        return await self._store.backend.ledger_events(node_id)


def retrieve(done: asyncio.Future[None]) -> None:
    """Mark a failed commit's error as seen (its waiters may all be gone)."""
    if not done.cancelled():
        done.exception()


def note_finished(state: MemoryState, flush: Flush) -> None:
    """Committed acks and retracts enter their node's dedup window."""
    nodes = state.nodes
    for event in flush.events:
        if event.kind in FINISHED:
            ns = nodes.get(event.node)
            if ns is not None and ns.node.config.queue_dedup_window > 0:
                state.note_finished(ns, event.item_id, event.at)
