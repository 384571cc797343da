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
- a transaction hands its changes off (:meth:`StateTransaction.hand_off`); the
  next one runs on top of them while they are written and hands off only after
  that write settled (one commit in flight: ``inflight.py``). A backend that
  commits on the event loop anyway (SQLite while commits are quick) writes them
  within the hand-off (``write_now``): no task stands between commit and answers;
- each write changes memory at once and records the key's original value;
- :meth:`StateTransaction.commit` writes the difference between the
  originals and memory: deletes, then upserts (nodes before their children),
  then the buffered ledger rows, then COMMIT. A transaction that changed
  nothing (a read) never reaches the database;
- :meth:`StateTransaction.savepoint` marks where one operation begins; rolling
  it back undoes that operation alone (state and ledger rows), so a refused
  or failed operation changes nothing while its batch commits the rest;
- leaving the block without commit, or a commit that raised, puts every
  original back, so memory equals the database again (a failed commit with a
  transaction on top: that one's originals first, then the failed one's). When the failure came
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
memory (its node's cold tail: 8 bytes, 24 with a due time), and the load reads
them that way. Items that stay whole may still keep their payload in
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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from xmpp_queue.core.model import Item
from xmpp_queue.core.ports import Store, Transaction
from xmpp_queue.storage import backlog
from xmpp_queue.storage.backend import Backend, FlushFailed, open_backend
from xmpp_queue.storage.backlog import DEFAULT_BUDGET, BacklogBudget
from xmpp_queue.storage.id_filter_fill import fill_id_filters
from xmpp_queue.storage.inflight import (
    InFlight,
    cool_settled,
    durable_now,
    note_finished,
    retrieve,
)
from xmpp_queue.storage.state import MemoryState
from xmpp_queue.storage.state_transaction import StateTransaction
from xmpp_queue.storage.write_health import WriteHealth

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

    from xmpp_queue.storage.lease import Fence

log = logging.getLogger("xmpp_queue.storage.store")

__all__ = ["StateStore", "StateTransaction"]


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
        self._to_cool: list[list[Item]] = []  # items of settled commits, to thin out
        self._lock = asyncio.Lock()
        self._reload = False
        self._writing: asyncio.Future[None] | None = None
        self._inflight: InFlight | None = None  # the commit being written (inflight.py)
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
            self._filling = asyncio.create_task(fill_id_filters(lambda: self._state, self.backend))

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
            self._cool_settled()
            tx = StateTransaction(self, self._state)
            self._build_on_inflight(tx)
            try:
                yield tx
            finally:
                tx.rollback()  # whatever was not handed off (nothing, after a commit)
                self._leave_inflight()
                self._cool_settled()  # no operation runs now

    def _build_on_inflight(self, tx: StateTransaction) -> None:
        """*tx* runs on top of the commit in flight: if that commit fails, *tx*
        undoes itself and then it (newest first), see ``inflight.py``."""
        c = self._inflight
        if c is not None:
            c.dependent = True
            tx.changes.earlier = c.flush.events

    def _leave_inflight(self) -> None:
        """The running transaction ended (its own changes undone or handed off):
        a failed commit below it can be undone now, a later failure undoes itself."""
        c = self._inflight
        if c is None:
            return
        c.dependent = False
        if c.failed is not None:
            self._undo(c)

    async def settled(self) -> None:
        """Wait until no commit is in flight (ledger reads must see its rows)."""
        c = self._inflight
        if c is not None and not c.settled():
            await asyncio.wait([c.done])

    async def hand_off(self, tx: StateTransaction) -> asyncio.Future[None]:
        """Plan *tx*'s changes and start writing them after the commit in flight.

        The returned future resolves when they are durable, or fails (memory
        then holds the last durable state, see ``inflight.py``)."""
        base = self._inflight
        if base is not None:
            if not base.settled():
                await asyncio.wait([base.done])  # cancellable: the write goes on
            if base.failed is not None:
                tx.rollback()
                self._undo(base)
                raise base.failed
        changes = tx.changes
        if not changes:
            return durable_now()
        flush = changes.plan()
        if flush.empty():
            changes.clear()
            return durable_now()
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.add_done_callback(retrieve)
        c = InFlight(changes.detach(), flush, done, dependent=True)  # tx may go on
        changes.earlier = flush.events
        self._inflight = c
        try:
            wrote = self.backend.write_now(flush)  # durable already: no task to wait for
        except Exception as exc:  # retried or failed as a write task's error would be
            c.task = asyncio.ensure_future(self._write(c, exc))
            return done
        if wrote:
            self._written(c)
        else:
            c.task = asyncio.ensure_future(self._write(c))
        return done

    async def _write(self, c: InFlight, failed: Exception | None = None) -> None:
        """Write *c*'s plan; settle it (durable, or failed and undone). *failed*:
        the error of a first try made by ``write_now``.

        A write the database surely did not commit (the connection was lost
        before COMMIT) is written again on a new connection for up to
        ``OUTAGE_RETRY_FOR`` seconds from the start of the outage, so a dropped
        connection costs the batch in flight some latency and nobody an error.
        A failure of the COMMIT itself is not retried (the database may hold it:
        reload, see the module docstring)."""
        while True:
            writing = None
            try:
                if failed is not None:
                    raise failed
                writing = asyncio.ensure_future(self.backend.write(c.flush))
                self._writing = writing
                # Shielded: a cancelled store task must not abandon a write that
                # may still commit, or memory and database would part ways unseen.
                await asyncio.shield(writing)
            except FlushFailed as error:
                failed = None
                if self.health.failed(error.error, error.maybe_committed):
                    await asyncio.sleep(self.health.retry_delay())
                    continue
                self._fail(c, error.error, error.maybe_committed)
                return
            except asyncio.CancelledError as exc:
                self._fail(c, exc, maybe_committed=True)  # the write goes on: reload
                raise
            except Exception as exc:  # a bug below the backend's own handling
                self._fail(c, exc, maybe_committed=False)
                return
            finally:
                if writing is not None and writing.done():
                    self._writing = None
            break
        self._written(c)

    def _written(self, c: InFlight) -> None:
        """*c* is durable: forget its originals and answer its batch."""
        self.health.written()
        c.changes.clear()
        if self.backend.keeps_payloads:
            self._to_cool.append(c.flush.item_upserts)  # at a safe point: _cool_settled
        note_finished(self._state, c.flush)
        if self._inflight is c:
            self._inflight = None
        c.done.set_result(None)

    def _cool_settled(self) -> None:
        """Thin out what settled commits wrote, between transactions (``inflight``)."""
        if not self._to_cool:
            return
        pending, self._to_cool = self._to_cool, []
        cool_settled(self._state, self.budget, pending, self._inflight)

    def _fail(self, c: InFlight, error: BaseException, maybe_committed: bool) -> None:
        c.failed, c.maybe_committed = error, maybe_committed
        if not c.dependent:
            self._undo(c)  # else the transaction on top undoes itself, then this
        c.done.set_exception(error)

    def _undo(self, c: InFlight) -> None:
        """Put memory back as it was before *c* (nothing may run on top of it)."""
        if self._inflight is c:
            self._inflight = None
        if c.undone:
            return
        c.undone = True
        c.changes.rollback()
        if c.maybe_committed:
            self._reload = True
            log.warning("event=commit_uncertain action=reload_at_next_transaction")

    async def write_ended(self) -> None:
        """Wait for the backend write under way (a task's), whatever its outcome."""
        if self._writing is not None:
            try:
                await self._writing
            except BaseException:
                pass
            self._writing = None

    async def _reload_state(self) -> None:
        await self.write_ended()
        self._state = await self.backend.load()
        self._to_cool = []  # items of the old state
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
            await self.settled()
            await self.write_ended()
            await self.backend.close()


def _conforms(store: StateStore) -> Store:
    """Let mypy check that StateStore satisfies the Store protocol."""
    return store
