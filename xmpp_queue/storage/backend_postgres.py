"""The PostgreSQL backend: asyncpg directly, one connection reopened after an outage.

asyncpg's ``executemany`` runs a prepared statement over all rows in one
pipelined round trip and encodes datetimes in C. Going through SQLAlchemy would
add a bind processor call per value and a cursor adaptation per statement, the
very per-row Python this store exists to avoid. A steady-state commit (items
and ledger rows only) is cheaper still as one statement over arrays, sent
without BEGIN and COMMIT (``pg_steady``): one round trip, and one execution on
the server instead of one per row. With a leader lease, every commit checks the
lease token (fencing).

A commit whose answer was lost (the connection died while it was on its way)
may or may not have happened. A steady commit is looked up by its commit mark:
the old session is ended, then the writer's row of ``commit_marks`` read (the
serial this commit set, or an older one). Any other commit runs between BEGIN
and COMMIT and is looked up by its transaction id. Either way a lost answer
costs latency, not an error: the store is told whether to write the batch again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

import asyncpg
from sqlalchemy.engine import make_url

from xmpp_queue.core.errors import NotActive, StorageUnavailable
from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import Item
from xmpp_queue.storage.backend import FlushFailed
from xmpp_queue.storage.flush import Flush
from xmpp_queue.storage.lease import FENCE_CHECK, Fence
from xmpp_queue.storage.load import StateBuilder
from xmpp_queue.storage.load_rows import whole_item
from xmpp_queue.storage.pg_outcomes import NO_SERIAL, mark_outcome, refused, transaction_outcome
from xmpp_queue.storage.pg_steady import (
    LOAD_PLANNER,
    MARK_ROW,
    SESSION_PLANNER,
    STEADY,
    STEADY_FENCED,
    steady_arguments,
)
from xmpp_queue.storage.sql_outages import postgres_outage, translate
from xmpp_queue.storage.sql_rows import ledger_event, postgres_when, same_time, write_plan
from xmpp_queue.storage.sql_statements import POSTGRES
from xmpp_queue.storage.state import MemoryState

log = logging.getLogger("xmpp_queue.storage.store")
T = TypeVar("T")

# PostgreSQL sequences are moved this far past the ids handed out, so a commit
# touches them once per this many new items (another writer never collides).
_SEQUENCE_STEP = 4096
# Commit marks of writers that have not committed for this long are deleted at the
# next load (a crashed process's row; a live writer's row comes back at its next commit).
_STALE_MARKS = "DELETE FROM commit_marks WHERE at < now() - interval '1 day'"


class PostgresBackend:
    """PostgreSQL through one asyncpg connection, reopened after an outage."""

    keeps_payloads = True

    def __init__(self, url: str, fence: Fence | None = None) -> None:
        parsed = make_url(url).set(drivername="postgresql")
        self._dsn = parsed.render_as_string(hide_password=False)
        self._conn: asyncpg.Connection | None = None
        self.fence = fence  # high availability: every commit checks our lease token
        self._seq_reserved = 0
        self._sub_id_reserved = 0
        # This store's row of commit_marks and the serial of its last steady commit.
        self._writer = f"{fence.name if fence else 'store'}/{uuid.uuid4().hex[:16]}"
        self._serial = 0
        # One connection carries one call at a time: a read (payloads, ledger) must
        # not interleave with a commit, nor with setting up a new connection.
        self._busy = asyncio.Lock()

    async def _connection(self) -> asyncpg.Connection:
        """The open connection, or a new one (the caller holds ``_busy``)."""
        if self._conn is None or self._conn.is_closed():
            self._conn = None
            try:
                conn = await asyncpg.connect(self._dsn)
                settings = SESSION_PLANNER
                if self.fence is not None:
                    # A commit holds the lease row (the fencing check) until it ends. If
                    # this process froze mid-commit (SIGSTOP, a stalled VM), the server
                    # ends that transaction, releasing the row for a standby, before
                    # the lease term is over.
                    settings += (
                        "; SET idle_in_transaction_session_timeout = "
                        f"{int(self.fence.idle_limit * 1000)}"
                    )
                await conn.execute(settings)
                await conn.execute(MARK_ROW, self._writer, NO_SERIAL)
            except Exception as exc:
                raise translate(exc, postgres_outage) from exc
            self._conn = conn
        return self._conn

    async def _read(self, query: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """Run a read; after a lost connection once more on a new one (a read is
        always safe to repeat)."""
        async with self._busy:
            for attempt in (1, 2):
                conn = await self._connection()
                try:
                    return await query(conn)
                except Exception as exc:
                    lost = self._lost(exc)
                    if lost is exc or attempt == 2:
                        raise lost from exc
        raise AssertionError("unreachable")

    def _lost(self, exc: BaseException) -> BaseException:
        """*exc* as the store sees it; an outage also drops the connection (the next
        call opens a new one)."""
        translated = translate(exc, postgres_outage)
        outage = isinstance(translated, StorageUnavailable)
        if outage and not isinstance(translated, NotActive) and self._conn is not None:
            self._conn.terminate()
            self._conn = None
        return translated

    async def load(self) -> MemoryState:
        async with self._busy:
            state = await self._load()
            try:
                await (await self._connection()).execute(_STALE_MARKS)
            except Exception as exc:
                raise self._lost(exc) from exc
            return state

    async def _load(self) -> MemoryState:
        conn = await self._connection()
        builder = StateBuilder(postgres_when)
        try:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                await conn.execute(LOAD_PLANNER)
                builder.nodes(await conn.fetch(POSTGRES.load_nodes))
                builder.affiliations(await conn.fetch(POSTGRES.load_affs))
                builder.subscriptions(await conn.fetch(POSTGRES.load_subs))
                ordered = builder.ordered_nodes()
                builder.items(await conn.fetch(POSTGRES.load_items, ordered))
                builder.tail(await conn.fetch(POSTGRES.load_tail))
                builder.delayed(await conn.fetch(POSTGRES.load_delayed))
                builder.keyed(await conn.fetch(POSTGRES.load_keyed, ordered))
                builder.schedule(await conn.fetch(POSTGRES.load_schedule))
                builder.schedule(await conn.fetch(POSTGRES.load_expiry, ordered), expiry=True)
                builder.snapshots(await conn.fetch(POSTGRES.load_snapshots))
                for node_id, window in builder.dedup_nodes():
                    last = await conn.fetchval(POSTGRES.ledger_last, node_id)
                    if last is not None:
                        since = last - timedelta(seconds=window)
                        rows = await conn.fetch(POSTGRES.ledger_finished, node_id, since)
                        builder.finished(node_id, rows)
                seq_floor = await conn.fetchval(
                    "SELECT pg_sequence_last_value(pg_get_serial_sequence('items', 'seq'))"
                )
                sub_floor = await conn.fetchval(
                    "SELECT pg_sequence_last_value(pg_get_serial_sequence('subscriptions', 'id'))"
                )
        except Exception as exc:
            raise self._lost(exc) from exc
        if builder.orphans:
            log.warning("event=orphan_rows count=%d action=ignored", builder.orphans)
        state = builder.finish(seq_floor or 0, sub_floor or 0)
        self._seq_reserved = state.next_seq - 1
        self._sub_id_reserved = state.next_sub_id - 1
        return state

    async def write(self, flush: Flush) -> None:
        async with self._busy:
            await self._write(flush)

    def write_now(self, flush: Flush) -> bool:
        return False  # every commit is a round trip to the server

    def _plan(self, flush: Flush) -> list[tuple[str, list[tuple[Any, ...]]]]:
        """The commit's statements and rows (a shard adds its placement rows)."""
        return write_plan(flush, POSTGRES, same_time)

    async def _write(self, flush: Flush) -> None:
        # A steady-state commit (items and ledger rows only) is one statement
        # (``pg_steady``), committed by the server on its own. Anything else goes
        # the general way: BEGIN, the fencing check, one ``executemany`` per
        # statement, COMMIT.
        steady = steady_arguments(flush, same_time)
        plan = self._plan(flush) if steady is None else []
        try:
            conn = await self._connection()
        except StorageUnavailable as exc:
            raise FlushFailed(exc, maybe_committed=False) from exc
        if steady is not None:
            await self._write_steady(conn, flush, steady)
            return
        try:
            await conn.execute("BEGIN")
            # The transaction's id lets a COMMIT whose answer was lost be looked up.
            xid = await self._check_fence(conn)
            for sql, rows in plan:
                await conn.executemany(sql, rows)
            await self._reserve(conn, flush)
        except NotActive as exc:
            await conn.execute("ROLLBACK")
            raise self._fenced(exc) from exc
        except BaseException as exc:
            if not conn.is_closed():
                try:
                    await conn.execute("ROLLBACK")
                except Exception:
                    pass
            raise FlushFailed(self._lost(exc), maybe_committed=False) from exc
        if conn.is_closed():  # lost before COMMIT was sent: certainly not committed
            closed = StorageUnavailable("database unavailable: connection closed before COMMIT")
            raise FlushFailed(self._lost(closed), maybe_committed=False)
        try:
            await conn.execute("COMMIT")
        except BaseException as exc:
            lost = self._lost(exc)
            outcome = await self._outcome(xid) if lost is not exc else None
            if outcome == "committed":
                log.info("event=commit_confirmed xid=%d after=%s", xid, type(exc).__name__)
                return
            raise FlushFailed(lost, maybe_committed=outcome != "aborted") from exc

    async def _check_fence(self, conn: asyncpg.Connection) -> int:
        """The transaction's id, after the fencing check (with a lease) passed."""
        if self.fence is None:
            return int(await conn.fetchval("SELECT txid_current()"))
        xid = await conn.fetchval(
            FENCE_CHECK + " RETURNING txid_current()", self.fence.name, self.fence.token
        )
        if xid is None:
            raise NotActive(f"lease {self.fence.name} is no longer ours; not committing")
        return int(xid)

    def _fenced(self, exc: NotActive) -> FlushFailed:
        fence = self.fence
        assert fence is not None
        log.error("event=commit_fenced name=%s token=%d", fence.name, fence.token)
        return FlushFailed(exc, maybe_committed=False)

    async def _write_steady(
        self, conn: asyncpg.Connection, flush: Flush, arrays: list[Any]
    ) -> None:
        """Write a steady-state commit: one statement, committed by the server on its
        own. With a lease it writes nothing unless the fencing check passed."""
        try:
            # Before the rows: no id of this commit is ever in the database unreserved.
            await self._reserve(conn, flush)
        except BaseException as exc:
            raise FlushFailed(self._lost(exc), maybe_committed=False) from exc
        self._serial += 1
        serial, pid = self._serial, conn.get_server_pid()
        args = [*arrays, self._writer, serial]
        if self.fence is not None:
            args += [self.fence.name, self.fence.token]
        try:
            row = await conn.fetchrow(STEADY if self.fence is None else STEADY_FENCED, *args)
        except BaseException as exc:
            if refused(exc) and not conn.is_closed():
                # The server answered with an error: the statement's transaction ended
                # without committing, and the connection serves on.
                raise FlushFailed(self._lost(exc), maybe_committed=False) from exc
            # The answer is lost: the commit may have happened. End the old session,
            # then read the mark it would have set.
            lost = self._lost(exc)
            conn.terminate()  # a no-op when it is closed already
            if self._conn is conn:
                self._conn = None
            outcome = await self._mark_outcome(pid, serial)
            if outcome == "committed":
                log.info("event=commit_confirmed serial=%d after=%s", serial, type(exc).__name__)
                return
            raise FlushFailed(lost, maybe_committed=outcome != "aborted") from exc
        assert row is not None
        if row[0] and not row[1]:
            await self._mark_again(conn, serial)
        if not row[0]:
            assert self.fence is not None
            not_ours = NotActive(f"lease {self.fence.name} is no longer ours; not committing")
            raise self._fenced(not_ours)

    async def _mark_again(self, conn: asyncpg.Connection, serial: int) -> None:
        """The writer's row was missing (deleted as stale by another process's load
        while this one sat idle for a day): make it again. Until it is back a lost
        answer cannot be looked up and counts as maybe committed."""
        try:
            await conn.execute(MARK_ROW, self._writer, serial)
        except Exception as exc:
            self._lost(exc)  # the next connection makes it

    async def _mark_outcome(self, pid: int, serial: int) -> str | None:
        """Whether steady commit *serial* (sent on server process *pid*) happened,
        asked on a new connection (``pg_outcomes``); None if that cannot be learnt."""
        try:
            return await mark_outcome(await self._connection(), pid, self._writer, serial)
        except Exception as exc:
            self._lost(exc)
        return None

    async def _outcome(self, xid: int) -> str | None:
        """Whether transaction *xid* committed, asked on a new connection after the
        old one died in its COMMIT (``pg_outcomes``); None if that cannot be learnt."""
        try:
            return await transaction_outcome(await self._connection(), xid)
        except Exception as exc:
            self._lost(exc)
        return None

    async def _reserve(self, conn: asyncpg.Connection, flush: Flush) -> None:
        """Keep the serial sequences ahead of the ids handed out in memory, so a
        writer using them (the SQL store, a tool) never takes an id of ours."""
        if flush.max_seq > self._seq_reserved:
            target = flush.max_seq + _SEQUENCE_STEP
            await conn.execute("SELECT setval(pg_get_serial_sequence('items', 'seq'), $1)", target)
            self._seq_reserved = target
        if flush.max_sub_id > self._sub_id_reserved:
            target = flush.max_sub_id + _SEQUENCE_STEP
            await conn.execute(
                "SELECT setval(pg_get_serial_sequence('subscriptions', 'id'), $1)", target
            )
            self._sub_id_reserved = target

    async def payloads(self, node_id: str, item_ids: list[str]) -> dict[str, str | None]:
        rows = await self._read(lambda conn: conn.fetch(POSTGRES.payloads, node_id, item_ids))
        return {r[0]: r[1] for r in rows}

    async def items_by_seq(self, node_id: str, seqs: list[int]) -> list[Item]:
        rows = await self._read(lambda conn: conn.fetch(POSTGRES.items_by_seq, node_id, seqs))
        return [whole_item(r, postgres_when) for r in rows]

    async def tail_ids(self, node_id: str, after: int, upto: int) -> list[tuple[int, str]]:
        rows = await self._read(lambda conn: conn.fetch(POSTGRES.tail_ids, node_id, after, upto))
        return [(r[0], r[1]) for r in rows]

    async def item_by_id(self, node_id: str, item_id: str) -> Item | None:
        row = await self._read(lambda conn: conn.fetchrow(POSTGRES.item_by_id, node_id, item_id))
        return whole_item(row, postgres_when) if row is not None else None

    async def ledger_count(self, node_id: str, kind: EventKind, since: datetime) -> int:
        value = await self._read(
            lambda conn: conn.fetchval(POSTGRES.ledger_count, node_id, kind.value, since)
        )
        return int(value)

    async def ledger_events(self, node_id: str | None) -> list[LedgerEvent]:
        if node_id is None:
            rows = await self._read(lambda conn: conn.fetch(POSTGRES.ledger_all))
        else:
            rows = await self._read(lambda conn: conn.fetch(POSTGRES.ledger_for_node, node_id))
        return [ledger_event(r, postgres_when) for r in rows]

    async def close(self) -> None:
        if self._conn is not None and not self._conn.is_closed():
            try:  # this store's commit mark is of no more use
                await self._conn.execute(
                    "DELETE FROM commit_marks WHERE writer = $1", self._writer, timeout=5
                )
            except Exception:
                pass  # a stale mark is deleted by a later load
        if self._conn is not None:
            try:
                await self._conn.close(timeout=5)
            except Exception:
                self._conn.terminate()
            self._conn = None
