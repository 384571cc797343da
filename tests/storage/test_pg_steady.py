"""The one-statement steady-state commit on PostgreSQL (``storage/pg_steady.py``).

Which commits take it, and that it keeps what the general path guarantees: the
rows written, ledger order, the fencing check (a fenced-out process writes and
locks nothing), and a commit whose answer is lost is looked up, not written
twice nor reported failed when it happened (its commit mark). Real PostgreSQL
(``XMPP_QUEUE_TEST_PG_URL``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.kit.stores import empty_database
from xmpp_queue.core.errors import NotActive
from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.storage.backend import FlushFailed
from xmpp_queue.storage.backend_postgres import _STALE_MARKS, PostgresBackend
from xmpp_queue.storage.flush import Flush
from xmpp_queue.storage.lease import PostgresLease
from xmpp_queue.storage.load import ITEM_COLD_FIELDS, ITEM_FIELDS, LEDGER_FIELDS
from xmpp_queue.storage.pg_steady import ROW_TYPES, SESSION_PLANNER, STEADY, steady_arguments
from xmpp_queue.storage.sql_rows import same_time, write_plan
from xmpp_queue.storage.sql_statements import POSTGRES

from .samples import T0, item, node


@pytest.fixture
async def pg(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await empty_database("postgresql", request, tmp_path)


def _event(kind: EventKind, item_id: str) -> LedgerEvent:
    return LedgerEvent(T0, kind, "jobs", item_id, payload_size=6)


def _steady_flush(seqs: range, deletes: tuple[str, ...] = ()) -> Flush:
    items = [item("jobs", f"i{s}", seq=s) for s in seqs]
    return Flush(
        item_deletes=[("jobs", i) for i in deletes],
        item_upserts=items,
        events=[_event(EventKind.PUBLISHED, i.item_id) for i in items],
        max_seq=max(seqs, default=0),
    )


def test_only_items_and_ledger_rows_with_distinct_keys_take_the_steady_path() -> None:
    assert steady_arguments(_steady_flush(range(1, 4), ("old",)), same_time) is not None
    assert steady_arguments(Flush(events=[_event(EventKind.ACKED, "a")]), same_time) is not None
    # Removed and published again in one commit: delete, then a new row, in order.
    assert steady_arguments(_steady_flush(range(1, 3), ("i2",)), same_time) is None
    twice = _steady_flush(range(1, 3))
    twice.item_upserts.append(replace(twice.item_upserts[0], deliveries=1))
    assert steady_arguments(twice, same_time) is None  # ON CONFLICT touches a row once
    assert steady_arguments(Flush(node_upserts=[node("jobs")]), same_time) is None
    assert steady_arguments(Flush(clear_items=["jobs"]), same_time) is None


async def _rows(url: str, sql: str) -> list[Any]:
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
    try:
        return list(await conn.fetch(sql))
    finally:
        await conn.close()


async def test_a_steady_commit_writes_what_the_general_path_would(pg: str) -> None:
    backend = PostgresBackend(pg)
    try:
        await backend.load()
        await backend.write(Flush(node_upserts=[node("jobs")]))  # the general path
        await backend.write(_steady_flush(range(1, 6)))
        locked = replace(
            item("jobs", "i2", seq=2), locked_by="s1", lock_jid="w@example.org/r", deliveries=1
        )
        acked = [_event(EventKind.ACKED, "i1"), _event(EventKind.DELIVERED, "i2")]
        await backend.write(
            Flush(item_deletes=[("jobs", "i1")], item_upserts=[locked], events=acked)
        )
        rows = await _rows(pg, "SELECT item_id, seq, locked_by, deliveries FROM items ORDER BY seq")
        assert [tuple(r) for r in rows] == [
            ("i2", 2, "s1", 1),
            ("i3", 3, None, 0),
            ("i4", 4, None, 0),
            ("i5", 5, None, 0),
        ]
        ledger = [(e.kind, e.item_id) for e in await backend.ledger_events("jobs")]
        published = [(EventKind.PUBLISHED, f"i{s}") for s in range(1, 6)]
        assert ledger == [*published, (EventKind.ACKED, "i1"), (EventKind.DELIVERED, "i2")]
    finally:
        await backend.close()


async def test_a_general_commit_is_looked_up_by_its_transaction_id(pg: str) -> None:
    """The general path (BEGIN … COMMIT) keeps the transaction-id lookup: the id its
    fencing check read is the one the lookup asks about."""
    seen: list[int] = []

    class Recording(PostgresBackend):
        async def _check_fence(self, conn: asyncpg.Connection) -> int:
            xid = await super()._check_fence(conn)
            seen.append(xid)
            return xid

    backend = Recording(pg)
    try:
        await backend.load()
        await backend.write(Flush(node_upserts=[node("jobs")]))
        assert len(seen) == 1
        assert await backend._outcome(seen[0]) == "committed"
    finally:
        await backend.close()


class _AnswerLost:
    """A connection whose ``fetchrow`` loses its answer: after the server ran the
    statement (*after*), or before sending it."""

    def __init__(self, conn: asyncpg.Connection, after: bool) -> None:
        self._conn, self._after = conn, after

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    async def fetchrow(self, *args: Any, **kwargs: Any) -> Any:
        if self._after:
            await self._conn.fetchrow(*args, **kwargs)
        raise asyncpg.ConnectionDoesNotExistError("connection was closed in the middle")


class LosingAnswers(PostgresBackend):
    """Loses the answer of the next steady statement (``_AnswerLost``)."""

    lose: bool | None = None  # None: nothing lost

    async def _write_steady(self, conn: asyncpg.Connection, flush: Flush, arrays: Any) -> None:
        after, self.lose = self.lose, None
        if after is not None:
            conn = _AnswerLost(conn, after)  # type: ignore[assignment]
        return await super()._write_steady(conn, flush, arrays)


@pytest.mark.parametrize("after", [True, False], ids=["committed", "not-sent"])
async def test_a_steady_commit_whose_answer_is_lost_is_looked_up_by_its_mark(
    pg: str, after: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Committed: the write succeeds (no error, nothing written twice). Not sent:
    the write fails, surely not committed, so the store may write it again."""
    backend = LosingAnswers(pg)
    try:
        await backend.load()
        await backend.write(Flush(node_upserts=[node("jobs")]))
        await backend.write(_steady_flush(range(1, 3)))
        backend.lose = after
        with caplog.at_level(logging.INFO, "xmpp_queue.storage.store"):
            if after:
                await backend.write(_steady_flush(range(3, 5)))
            else:
                with pytest.raises(FlushFailed) as failed:
                    await backend.write(_steady_flush(range(3, 5)))
                assert not failed.value.maybe_committed
        confirmed = [r.getMessage() for r in caplog.records if "commit_confirmed" in r.getMessage()]
        assert confirmed == (
            ["event=commit_confirmed serial=2 after=ConnectionDoesNotExistError"] if after else []
        )
        rows = await _rows(pg, "SELECT item_id FROM items ORDER BY seq")
        assert [r[0] for r in rows] == (["i1", "i2", "i3", "i4"] if after else ["i1", "i2"])
        assert len(await backend.ledger_events("jobs")) == (4 if after else 2)
        await backend.write(_steady_flush(range(5, 6)))  # the backend serves on
        assert len(await backend.ledger_events("jobs")) == (5 if after else 3)
    finally:
        await backend.close()
    marks = await _rows(pg, f"SELECT 1 FROM commit_marks WHERE writer = '{backend._writer}'")
    assert marks == []  # deleted at close


async def test_a_mark_deleted_under_a_live_writer_comes_back_and_is_never_misread(
    pg: str,
) -> None:
    """Another process's load deletes marks a day old, a live but idle writer's too.
    Its next commit (answered) makes the row again; a lost answer meanwhile cannot
    be looked up, so it counts as maybe committed, never as surely not."""
    backend = LosingAnswers(pg)
    drop = f"DELETE FROM commit_marks WHERE writer = '{backend._writer}' RETURNING 1"
    mark = f"SELECT serial FROM commit_marks WHERE writer = '{backend._writer}'"
    try:
        await backend.load()
        await backend.write(Flush(node_upserts=[node("jobs")]))
        assert await _rows(pg, drop)
        await backend.write(_steady_flush(range(1, 3)))
        assert [r[0] for r in await _rows(pg, mark)] == [1]
        assert await _rows(pg, drop)
        backend.lose = True  # committed, but its mark had no row to set
        with pytest.raises(FlushFailed) as failed:
            await backend.write(_steady_flush(range(3, 5)))
        assert failed.value.maybe_committed
        rows = await _rows(pg, "SELECT item_id FROM items ORDER BY seq")
        assert [r[0] for r in rows] == ["i1", "i2", "i3", "i4"]
    finally:
        await backend.close()


async def test_a_session_killed_in_a_steady_commit_is_an_outage_and_nothing_is_written(
    pg: str,
) -> None:
    """A real lost answer: the statement waits for the lock another session holds on
    the writer's mark, and the server ends its session meanwhile. The lookup waits
    until the old session is gone and reads the mark: not committed."""
    backend = PostgresBackend(pg)
    blocker = await asyncpg.connect(pg.replace("postgresql+asyncpg", "postgresql"))
    try:
        await backend.load()
        await backend.write(Flush(node_upserts=[node("jobs")]))
        await backend.write(_steady_flush(range(1, 3)))
        await blocker.execute("BEGIN")
        await blocker.execute(
            "SELECT FROM commit_marks WHERE writer = $1 FOR UPDATE", backend._writer
        )
        writing = asyncio.ensure_future(backend.write(_steady_flush(range(3, 5))))
        for _ in range(100):  # until the statement waits for the lock
            waiting = await blocker.fetchval(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND datname = current_database()"
            )
            if waiting is not None:
                break
            await asyncio.sleep(0.02)
        assert waiting is not None
        await blocker.execute("SELECT pg_terminate_backend($1)", waiting)
        with pytest.raises(FlushFailed) as failed:
            await writing
        await blocker.execute("COMMIT")
        assert not failed.value.maybe_committed
        rows = await _rows(pg, "SELECT item_id FROM items ORDER BY seq")
        assert [r[0] for r in rows] == ["i1", "i2"]
        await backend.write(_steady_flush(range(3, 5)))  # written again, once
        assert len(await backend.ledger_events("jobs")) == 4
    finally:
        await blocker.close()
        await backend.close()


@pytest.mark.parametrize("steady", [True, False], ids=["steady", "general"])
async def test_a_fenced_out_commit_writes_and_locks_nothing(pg: str, steady: bool) -> None:
    name = f"queue-{uuid.uuid4().hex[:8]}.example.org"
    old, new = PostgresLease(pg, name, holder="a:1"), PostgresLease(pg, name, holder="b:2")
    backend = None
    try:
        await old.try_acquire()
        backend = PostgresBackend(pg, old.fence)
        await backend.load()
        await backend.write(Flush(node_upserts=[node("jobs")]))
        await backend.write(_steady_flush(range(1, 3)))
        await old.release()
        assert await new.try_acquire() == 2
        late = _steady_flush(range(3, 5), ("i1",))
        if not steady:
            late.aff_deletes.append(("jobs", "nobody@example.org"))
        assert (steady_arguments(late, same_time) is not None) is steady
        with pytest.raises(FlushFailed) as failed:
            await backend.write(late)
        assert isinstance(failed.value.error, NotActive)
        assert not failed.value.maybe_committed
        rows = await _rows(pg, "SELECT item_id FROM items ORDER BY seq")
        assert [r[0] for r in rows] == ["i1", "i2"]
        assert len(await backend.ledger_events("jobs")) == 2
        marks = await _rows(
            pg, f"SELECT serial FROM commit_marks WHERE writer = '{backend._writer}'"
        )
        assert [r[0] for r in marks] == [1]  # set by the commit before; the refused one set none
        # No row of the refused commit stays locked: the new holder writes at once.
        conn = await asyncpg.connect(pg.replace("postgresql+asyncpg", "postgresql"))
        try:
            await conn.execute("SET lock_timeout = '1s'")
            await conn.execute("DELETE FROM items WHERE item_id = 'i1'")
        finally:
            await conn.close()
    finally:
        if backend is not None:
            await backend.close()
        await old.close()
        await new.close()


async def test_the_steady_statement_probes_the_index_of_a_table_the_planner_thinks_small(
    pg: str,
) -> None:
    """The items table churns: a scan would read every dead row at every commit."""
    conn = await asyncpg.connect(pg.replace("postgresql+asyncpg", "postgresql"))
    try:
        await conn.execute("ANALYZE items")  # empty: a scan would look cheapest
        await conn.execute(SESSION_PLANNER)  # the backend's session
        await conn.execute("BEGIN")
        # The plan that runs: the generic one, kept with the prepared statement.
        await conn.execute(f"PREPARE steady AS {STEADY}")
        nulls = ", ".join(["NULL"] * STEADY.count("::"))
        explained = await conn.fetch(f"EXPLAIN EXECUTE steady({nulls})")
        plan = "\n".join(r[0] for r in explained)
        await conn.execute("ROLLBACK")
    finally:
        await conn.close()
    assert "Seq Scan" not in plan, plan
    assert "Tid Scan on items" in plan, plan  # rows found by key, then by row id


async def test_each_row_type_lists_the_fields_the_code_sends_with_their_columns_types(
    pg: str,
) -> None:
    """The steady statement binds arrays of rows of the ``steady_*`` types: a field
    added to the code's rows (or a column's type changed) without the type altered
    by a migration would fail every steady commit."""
    fields_of = (("node_id", "item_id"), ITEM_FIELDS, ITEM_COLD_FIELDS, LEDGER_FIELDS)
    parts = dict(zip(ROW_TYPES, fields_of, strict=True))
    tables = {"steady_event": "queue_events"}
    attributes = (
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
        " JOIN pg_class c ON c.oid = a.attrelid WHERE c.relname = $1"
        " AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
    )
    conn = await asyncpg.connect(pg.replace("postgresql+asyncpg", "postgresql"))
    try:
        for row_type, fields in parts.items():
            declared = [tuple(r) for r in await conn.fetch(attributes, row_type)]
            columns = dict(
                tuple(r) for r in await conn.fetch(attributes, tables.get(row_type, "items"))
            )
            assert declared == [(f, columns[f]) for f in fields], row_type
    finally:
        await conn.close()


async def test_the_session_never_compiles_a_statement(pg: str) -> None:
    """With scans priced out, a statement that must scan (the stale commit marks'
    delete at every load) looked to the planner like 10^10 cost units, and the
    server compiled it with LLVM at each execution (40-150 ms on a slow machine).
    JIT stays off for the session, through a load (asyncpg's type lookup saves and
    restores ``jit`` at session level) and a steady commit."""
    backend = PostgresBackend(pg)
    try:
        await backend.load()
        await backend.write(Flush(node_upserts=[node("jobs")]))
        await backend.write(_steady_flush(range(1, 3)))
        conn = await backend._connection()
        assert await conn.fetchval("SHOW jit") == "off"
        explained = await conn.fetch(f"EXPLAIN (ANALYZE) {_STALE_MARKS}")
        assert not any("JIT" in r[0] for r in explained), explained
        # Where the server can compile, the same statement would be, with scans off.
        fresh = await asyncpg.connect(pg.replace("postgresql+asyncpg", "postgresql"))
        try:
            if await fresh.fetchval("SELECT pg_jit_available() AND current_setting('jit')::bool"):
                await fresh.execute("SET enable_seqscan = off")
                compiled = await fresh.fetch(f"EXPLAIN {_STALE_MARKS}")
                assert any("JIT" in r[0] for r in compiled), compiled
        finally:
            await fresh.close()
    finally:
        await backend.close()


async def test_the_general_path_probes_the_index_of_a_table_the_planner_thinks_small(
    pg: str,
) -> None:
    """The general path (a commit that also changes nodes or subscriptions) finds
    item rows by their key too, never by a scan of the churned table (with the
    planner's defaults it planned one). Both plans are checked: the one for the
    values (an ``executemany``'s first rows) and the generic one a prepared
    statement may settle on."""
    flush = _steady_flush(range(1, 3), deletes=("i9",))
    item_statements = [
        (sql, rows[0])
        for sql, rows in write_plan(flush, POSTGRES, same_time)
        if sql.startswith(("DELETE FROM items", "UPDATE items"))
    ]
    assert item_statements, "no statement of the general path finds item rows"
    conn = await asyncpg.connect(pg.replace("postgresql+asyncpg", "postgresql"))
    plans = []
    try:
        await conn.execute("ANALYZE items")  # empty: a scan would look cheapest
        for mode in ("auto", "force_generic_plan"):
            await conn.execute(f"{SESSION_PLANNER}; BEGIN; SET LOCAL plan_cache_mode = {mode}")
            for sql, values in item_statements:
                explained = await conn.fetch(f"EXPLAIN {sql}", *values)
                plans.append("\n".join(r[0] for r in explained))
            await conn.execute("ROLLBACK")
    finally:
        await conn.close()
    assert len(plans) == 2 * len(item_statements)
    for plan in plans:
        assert "Seq Scan on items" not in plan, plan
        assert "Index Scan" in plan, plan  # a real plan, not one folded away
