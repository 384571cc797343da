"""StateStore: the whole state in memory, every commit written to a backend.

This is the only implementation of the core's ports. Reads never touch the
database; each write changes memory at once and records what it replaced;
a commit hands the backend only the net change of the batch (one
``executemany`` per kind of row and one fsync on SQL backends). Backends
(``backend.py``): none (``MemoryBackend``, for tests and ``demo --memory``),
SQLite or PostgreSQL. Tests, the demo and production all run this store.

**The store must be the only writer of its database.** It loads nodes,
affiliations, subscriptions and items (with their queue state; payloads on
demand, see below) once, at :meth:`StateStore.open`, and from then on
believes its memory: a row that another process inserts, updates or deletes
is not seen, and may be overwritten. So: one component process per database
(SQLite file or PostgreSQL database). Readers are fine: the admin CLI, the
Spark pipeline and backups may read at any time, since each commit is an
ordinary transaction (SQLite WAL: readers never block it). Migrations run
before ``open`` (as the app does); a tool that must write (a manual repair)
runs while the component is stopped.

How one transaction works (``changes`` has the details):

- transactions are serialised by an :class:`asyncio.Lock` (the commit batcher
  runs one at a time anyway), so within one, memory is the truth;
- each write changes memory at once and records the key's original value;
- :meth:`StateTransaction.commit` writes the difference between the
  originals and memory: deletes, then upserts (nodes before their children),
  then the buffered ledger rows, then COMMIT. A transaction that changed
  nothing (a read) never reaches the database;
- :meth:`StateTransaction.savepoint` marks where one operation begins; rolling
  it back undoes that operation alone (state and ledger rows), so a refused
  or failed operation changes nothing while its batch commits the rest;
- leaving the block without commit, or a commit that raised, puts every
  original back, so memory equals the database again. When the failure came
  with the COMMIT itself (the database may have committed after all, say a
  connection lost mid-commit), the next transaction reloads everything from
  the database instead of trusting either side.

Durability: a publish is acknowledged after the commit that
holds it, SQLite runs ``synchronous=FULL`` in WAL mode (``engine.py``), and a
crash loses only what was not yet committed, which nobody was told about.
Ledger reads (``count``, ``events``) see the committed rows plus the current
transaction's pending ones; history is never held in memory.

Memory: a whole item costs about 400 bytes plus its payload; a deep backlog
does not keep its items whole (``backlog``). Past the store's budget
(*backlog_bytes*), a plain waiting item a commit writes keeps only its seq in
memory (its node's cold tail, about 8 bytes), and the load reads every plain
waiting item that way. Items that stay whole may still keep their payload in
the database (``COLD``): items loaded at open and new waiting items beyond the
first ``HOT_WINDOW`` of a long queue. Reads that hand items out (dispatch,
``get``, paging, expiry) fetch what is missing in one query, a dispatch taking
the next ``PREFETCH`` along, so a deep backlog costs one small query per few
hundred deliveries and an ack needs none. Writes to items whose payload is not
in memory update every column but the payload.

Item ``seq`` (publish order) and subscription ids (creation order) are handed
out in memory, above every value in the database and its counters (SQLite's
``sqlite_sequence``; PostgreSQL's sequences, which commits keep ahead).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

from xmpp_queue.core.ledger import FINISHED
from xmpp_queue.core.ports import (
    AffiliationRepository,
    EventLedger,
    ItemRepository,
    NodeRepository,
    Savepoint,
    Store,
    SubscriptionRepository,
    Transaction,
)
from xmpp_queue.storage import backlog
from xmpp_queue.storage.backend import Backend, FlushFailed, open_backend
from xmpp_queue.storage.backlog import DEFAULT_BUDGET, BacklogBudget
from xmpp_queue.storage.changes import ChangeSet
from xmpp_queue.storage.flush import Flush
from xmpp_queue.storage.items_repo import ItemsRepo
from xmpp_queue.storage.repositories import (
    AffiliationsRepo,
    LedgerRepo,
    NodesRepo,
    SubscriptionsRepo,
)
from xmpp_queue.storage.state import MemoryState
from xmpp_queue.storage.write_health import WriteHealth

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

    from xmpp_queue.storage.lease import Fence

log = logging.getLogger("xmpp_queue.storage.store")
T = TypeVar("T")

__all__ = ["StateStore", "StateTransaction"]


class StateTransaction:
    """Repositories over the store's memory plus the record of what changed."""

    def __init__(self, store: StateStore, state: MemoryState) -> None:
        self._store = store
        self.changes = ChangeSet(state)
        self.nodes: NodeRepository = NodesRepo(state, self.changes)
        self.affiliations: AffiliationRepository = AffiliationsRepo(state, self.changes)
        self.subscriptions: SubscriptionRepository = SubscriptionsRepo(state, self.changes)
        self.items: ItemRepository = ItemsRepo(state, self.changes, store.backend)
        self.ledger: EventLedger = LedgerRepo(self.changes, store.backend)

    def savepoint(self) -> Savepoint:
        """One operation's mark: its changes can be undone alone (per-operation undo)."""
        return self.changes.savepoint()

    async def commit(self) -> None:
        """Write what changed and commit; on failure memory is rolled back."""
        changes = self.changes
        if not changes:
            return
        flush = changes.plan()
        if flush.empty():
            changes.clear()
            return
        await self._store.write(flush, changes)

    def rollback(self) -> None:
        if self.changes:
            self.changes.rollback()


class StateStore:
    """A :class:`~xmpp_queue.core.ports.Store` held in memory and written behind
    to SQLite or PostgreSQL (see the module docstring: the only writer rule)."""

    def __init__(
        self, backend: Backend, state: MemoryState, backlog_bytes: int | None = DEFAULT_BUDGET
    ) -> None:
        self.backend = backend
        self._state = state
        self.budget = BacklogBudget(backlog_bytes)
        self._filling: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._reload = False
        self._writing: asyncio.Future[None] | None = None
        self._closed = False
        self.health = WriteHealth()

    @classmethod
    async def open(
        cls,
        url: str | URL | None,
        fence: Fence | None = None,
        backlog_bytes: int | None = DEFAULT_BUDGET,
    ) -> StateStore:
        """Load the migrated database at *url* into memory (None: no database).

        It does not migrate: run ``storage.migrations.upgrade`` first. With a
        *fence* (the leader lease's token), every commit checks it first.
        *backlog_bytes* is the memory for whole waiting items (``backlog``);
        beyond it they are kept as seqs, read back when handed out.
        """
        text = (
            url
            if url is None or isinstance(url, str)
            else url.render_as_string(hide_password=False)
        )
        backend = await open_backend(text, fence)
        try:
            state = await backend.load()
        except BaseException:
            await backend.close()
            raise
        log.info(
            "event=store_loaded nodes=%d items=%d locked=%d",
            len(state.nodes),
            sum(backlog.count(ns) for ns in state.nodes.values()),
            state.locked_total,
        )
        store = cls(backend, state, backlog_bytes)
        store.start_id_fill()
        return store

    def start_id_fill(self) -> None:
        """Read the ids of the items loaded cold in the background (``backlog``)."""
        if self._filling is not None:
            self._filling.cancel()
        if self.backend.keeps_payloads:
            self._filling = asyncio.create_task(
                backlog.fill_id_filters(lambda: self._state, self.backend)
            )

    async def id_filters_filled(self) -> None:
        """Wait until the ids of the items loaded cold are in the id filters."""
        if self._filling is not None:
            await asyncio.shield(self._filling)

    @classmethod
    def in_memory(cls) -> StateStore:
        """A store with no database behind it (nothing outlives the process)."""
        from xmpp_queue.storage.backend_memory import MemoryBackend

        return cls(MemoryBackend(), MemoryState())

    @property
    def state(self) -> MemoryState:
        """The live memory (tests and diagnostics read it; nothing else may)."""
        return self._state

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Transaction]:
        if self._closed:
            raise RuntimeError("the store is closed")
        async with self._lock:
            if self._reload:
                await self._reload_state()
            tx = StateTransaction(self, self._state)
            try:
                yield tx
            finally:
                tx.rollback()  # whatever was not committed (nothing, after a commit)

    async def write(self, flush: Flush, changes: ChangeSet) -> None:
        """Write *flush* (the plan of *changes*); roll memory back if it fails.

        A write the database surely did not commit (the connection was lost
        before COMMIT) is written again on a new connection for up to
        ``OUTAGE_RETRY_FOR`` seconds from the start of the outage, so a dropped
        connection costs the batch in flight some latency and nobody an error.
        A failure of the COMMIT itself is not retried (the database may hold it:
        reload, see the module docstring)."""
        while True:
            try:
                await self._write_once(flush, changes)
            except _Retry:
                await asyncio.sleep(self.health.retry_delay())
                continue
            break
        self.health.written()
        changes.clear()
        if self.backend.keeps_payloads:
            backlog.cool(self._state, flush.item_upserts, self.budget)
            self._state.cool(flush.item_upserts)
        self._note_finished(flush)

    async def _write_once(self, flush: Flush, changes: ChangeSet) -> None:
        writing = asyncio.ensure_future(self.backend.write(flush))
        self._writing = writing
        try:
            # Shielded: a cancelled caller must not abandon a write that may
            # still commit, or memory and database would part ways unseen.
            await asyncio.shield(writing)
        except FlushFailed as failed:
            if self.health.failed(failed.error, failed.maybe_committed):
                raise _Retry from None
            changes.rollback()
            if failed.maybe_committed:
                self._reload = True
                log.warning("event=commit_uncertain action=reload_at_next_transaction")
            raise failed.error from None
        except asyncio.CancelledError:
            changes.rollback()
            self._reload = True  # the write goes on; its outcome decides, reload then
            raise
        finally:
            if writing.done():
                self._writing = None

    def _note_finished(self, flush: Flush) -> None:
        """Committed acks and retracts enter their node's dedup window."""
        nodes, state = self._state.nodes, self._state
        for event in flush.events:
            if event.kind in FINISHED:
                ns = nodes.get(event.node)
                if ns is not None and ns.node.config.queue_dedup_window > 0:
                    state.note_finished(ns, event.item_id, event.at)

    async def reloaded_after(self, action: Callable[[], Awaitable[T]]) -> T:
        """Run *action* (a write that changes which rows are this store's, such as a
        shard's placement move) while no transaction runs, then load memory from the
        database again, whatever *action* did (a failed reload is retried at the
        next transaction). Costs a full load: meant for rare events (moves)."""
        async with self._lock:
            if self._writing is not None:
                try:
                    await self._writing
                except BaseException:
                    pass
                self._writing = None
            try:
                return await action()
            finally:
                self._reload = True
                await self._reload_state()

    async def _reload_state(self) -> None:
        if self._writing is not None:
            try:
                await self._writing
            except BaseException:
                pass
            self._writing = None
        self._state = await self.backend.load()
        self._reload = False
        self.start_id_fill()
        log.info("event=store_reloaded nodes=%d", len(self._state.nodes))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._filling is not None:
            self._filling.cancel()
            try:
                await self._filling
            except asyncio.CancelledError:
                pass
        async with self._lock:
            if self._writing is not None:
                try:
                    await self._writing
                except BaseException:
                    pass
            await self.backend.close()


class _Retry(Exception):
    """The write failed in a way that is safe and worth repeating (internal)."""


def _conforms(store: StateStore) -> Store:
    """Let mypy check that StateStore satisfies the Store protocol."""
    return store
