"""The SQL backends of the store: load everything at start, write each commit's Flush.

Two backends with one face (:class:`Backend`):

- :class:`SqliteBackend` runs the stdlib ``sqlite3`` connection of
  ``engine.make_sqlite_engine`` (so the same WAL / ``synchronous=FULL`` /
  foreign-key pragmas as every other connection) on one worker thread. A
  commit is ``BEGIN IMMEDIATE``, a handful of ``executemany`` calls and
  ``COMMIT`` (the one fsync), all on that thread: the event loop keeps parsing
  stanzas while the disk syncs, and sqlite3 releases the GIL while it works.
- :class:`PostgresBackend` talks to asyncpg directly: its ``executemany`` runs
  a prepared statement over all rows in one pipelined round trip, and it
  encodes datetimes in C. Going through SQLAlchemy would add a bind processor
  call per value and a cursor adaptation per statement, the very per-row
  Python this store exists to avoid.

The SQL text is compiled once from SQLAlchemy constructs on ``schema`` (the
dialects' ``insert().on_conflict_do_update``), so table and column names have
one source. Values bypass SQLAlchemy's type processing, so this module encodes
them the way ``schema.UtcDateTime`` and ``codec`` do: on SQLite a timestamp is
the text SQLAlchemy writes (``YYYY-MM-DD HH:MM:SS.ffffff``, UTC), so the SQL
store and the pipeline read these rows like their own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import asyncpg
from sqlalchemy import (
    String,
    Table,
    bindparam,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import asyncpg as asyncpg_dialect
from sqlalchemy.engine import Dialect, Engine, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement, ColumnElement

from xmpp_queue.core.errors import NotActive, StorageUnavailable
from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import Item, Subscription
from xmpp_queue.storage import codec, schema
from xmpp_queue.storage.backend import Backend, FlushFailed
from xmpp_queue.storage.changes import Flush
from xmpp_queue.storage.engine import is_sqlite, make_sqlite_engine
from xmpp_queue.storage.lease import FENCE_CHECK, Fence
from xmpp_queue.storage.load import (
    AFFILIATION_FIELDS,
    ITEM_COLD_FIELDS,
    ITEM_FIELDS,
    LEDGER_FIELDS,
    NODE_FIELDS,
    SNAPSHOT_FIELDS,
    SUBSCRIPTION_FIELDS,
    StateBuilder,
)
from xmpp_queue.storage.state import COLD, EMPTY_HEADERS, MemoryState

log = logging.getLogger("xmpp_queue.storage.store")
T = TypeVar("T")

# PostgreSQL sequences are moved this far past the ids handed out, so a commit
# touches them once per this many new items (another writer never collides).
_SEQUENCE_STEP = 4096


async def open_sql_backend(url: str, fence: Fence | None = None) -> Backend:
    if is_sqlite(url):
        if fence is not None:
            raise ValueError("a leader lease needs PostgreSQL; SQLite runs one process")
        return SqliteBackend(url)
    return PostgresBackend(url, fence)


# --- statements ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Statements:
    """Every statement the store runs, as driver SQL for one dialect."""

    clear_items: str
    clear_subs: str
    clear_affs: str
    clear_snapshots: str
    snapshot_insert: str
    load_snapshots: str
    item_delete: str
    sub_delete: str
    aff_delete: str
    node_delete: str
    node_upsert: str
    aff_upsert: str
    sub_upsert: str
    item_upsert: str
    item_update_cold: str
    payloads: str
    ledger_insert: str
    load_nodes: str
    load_affs: str
    load_subs: str
    load_items: str
    ledger_all: str
    ledger_for_node: str
    ledger_count: str
    ledger_finished: str
    ledger_last: str


def _upsert(
    insert_: Callable[[Table], Any], table: Table, fields: Sequence[str], keys: Sequence[str]
) -> ClauseElement:
    statement = insert_(table).values({f: bindparam(f) for f in fields})
    changing = {f: statement.excluded[f] for f in fields if f not in keys and f != "id"}
    changing.pop("seq", None)
    upsert: ClauseElement = statement.on_conflict_do_update(
        index_elements=[table.c[k] for k in keys], set_=changing
    )
    return upsert


def _key_delete(table: Table, keys: Sequence[str]) -> ClauseElement:
    return delete(table).where(*(table.c[k] == bindparam(k) for k in keys))


def _compile(statement: ClauseElement, dialect: Dialect, params: Sequence[str]) -> str:
    """Driver SQL whose positional parameters are exactly *params*, in order."""
    compiled = statement.compile(dialect=dialect)
    assert isinstance(compiled, SQLCompiler)
    order = tuple(compiled.positiontup or ())
    if order != tuple(params):
        raise AssertionError(f"parameter order {order} != {tuple(params)}")
    return compiled.string


def _statements(
    dialect: Dialect, insert_: Callable[[Table], Any], id_list: ColumnElement[bool]
) -> Statements:
    """*id_list*: the dialect's way to test ``item_id`` against one array-ish
    parameter ``ids`` (one statement text whatever the number of ids)."""
    n, a, s, i, ledger = (
        schema.nodes,
        schema.affiliations,
        schema.subscriptions,
        schema.items,
        schema.ledger,
    )
    by_node = ("node_id",)
    ledger_columns = [ledger.c[f] for f in LEDGER_FIELDS]

    def c(statement: ClauseElement, params: Sequence[str] = ()) -> str:
        return _compile(statement, dialect, params)

    return Statements(
        clear_items=c(_key_delete(i, by_node), by_node),
        clear_subs=c(_key_delete(s, by_node), by_node),
        clear_affs=c(_key_delete(a, by_node), by_node),
        clear_snapshots=c(_key_delete(schema.snapshots, by_node), by_node),
        snapshot_insert=c(
            insert(schema.snapshots).values({f: bindparam(f) for f in SNAPSHOT_FIELDS}),
            SNAPSHOT_FIELDS,
        ),
        load_snapshots=c(select(*(schema.snapshots.c[f] for f in SNAPSHOT_FIELDS))),
        item_delete=c(_key_delete(i, ("node_id", "item_id")), ("node_id", "item_id")),
        sub_delete=c(_key_delete(s, ("node_id", "subid")), ("node_id", "subid")),
        aff_delete=c(_key_delete(a, ("node_id", "jid")), ("node_id", "jid")),
        node_delete=c(_key_delete(n, by_node), by_node),
        node_upsert=c(_upsert(insert_, n, NODE_FIELDS, by_node), NODE_FIELDS),
        aff_upsert=c(
            _upsert(insert_, a, AFFILIATION_FIELDS, ("node_id", "jid")), AFFILIATION_FIELDS
        ),
        sub_upsert=c(
            _upsert(insert_, s, SUBSCRIPTION_FIELDS, ("node_id", "subid")), SUBSCRIPTION_FIELDS
        ),
        item_upsert=c(_upsert(insert_, i, ITEM_FIELDS, ("node_id", "item_id")), ITEM_FIELDS),
        item_update_cold=c(
            update(i)
            .where(i.c.node_id == bindparam("node_id"), i.c.item_id == bindparam("item_id"))
            .values({f: bindparam(f) for f in ITEM_COLD_FIELDS[:-2]}),
            ITEM_COLD_FIELDS,
        ),
        payloads=c(
            select(i.c.item_id, i.c.payload).where(i.c.node_id == bindparam("node"), id_list),
            ("node", "ids"),
        ),
        ledger_insert=c(
            insert(ledger).values({f: bindparam(f) for f in LEDGER_FIELDS}), LEDGER_FIELDS
        ),
        load_nodes=c(select(*(n.c[f] for f in NODE_FIELDS))),
        load_affs=c(select(*(a.c[f] for f in AFFILIATION_FIELDS))),
        load_subs=c(select(*(s.c[f] for f in SUBSCRIPTION_FIELDS)).order_by(s.c.id)),
        # Without payloads: those are fetched when a read needs them (COLD).
        load_items=c(
            select(
                *(i.c.payload.is_(None) if f == "payload" else i.c[f] for f in ITEM_FIELDS)
            ).order_by(i.c.seq)
        ),
        ledger_all=c(select(*ledger_columns).order_by(ledger.c.id)),
        ledger_for_node=c(
            select(*ledger_columns).where(ledger.c.node == bindparam("node")).order_by(ledger.c.id),
            ("node",),
        ),
        ledger_count=c(
            select(func.count()).where(
                ledger.c.node == bindparam("node"),
                ledger.c.kind == bindparam("kind"),
                ledger.c.at >= bindparam("since"),
            ),
            ("node", "kind", "since"),
        ),
        # A dedup window after a restart: the acks and retracts of the window's
        # length before the node's last event (no clock needed at load).
        ledger_finished=c(
            select(ledger.c.item_id, ledger.c.at)
            .where(
                ledger.c.node == bindparam("node"),
                or_(
                    ledger.c.kind == literal_column("'acked'"),
                    ledger.c.kind == literal_column("'retracted'"),
                ),
                ledger.c.at >= bindparam("since"),
            )
            .order_by(ledger.c.id),
            ("node", "since"),
        ),
        ledger_last=c(
            select(func.max(ledger.c.at)).where(ledger.c.node == bindparam("node")), ("node",)
        ),
    )


_i = schema.items.c
SQLITE = _statements(
    sqlite.dialect(paramstyle="qmark"),
    sqlite.insert,
    _i.item_id.in_(select(literal_column("value")).select_from(func.json_each(bindparam("ids")))),
)
POSTGRES = _statements(
    asyncpg_dialect.dialect(),  # type: ignore[no-untyped-call]
    postgresql.insert,
    _i.item_id == func.any(bindparam("ids", type_=postgresql.ARRAY(String()))),
)


# --- rows ----------------------------------------------------------------------------

Encode = Callable[[datetime | None], Any]
_KIND_TEXT = {kind: kind.value for kind in EventKind}


def _sqlite_time(value: datetime) -> str:
    """The text SQLAlchemy's SQLite DATETIME writes. Values in memory are UTC."""
    return value.isoformat(" ", "microseconds")[:26]


def _sqlite_times() -> Encode:
    """A timestamp encoder for one flush: the moments of one batch repeat (an
    operation's clock reading is its item's publish time, lock time and ledger
    time), so each distinct one is formatted once."""
    memo: dict[datetime, str] = {}

    def encode(value: datetime | None) -> str | None:
        if value is None:
            return None
        found = memo.get(value)
        if found is None:
            found = memo[value] = _sqlite_time(value)
        return found

    return encode


def _same_time(value: datetime | None) -> datetime | None:
    return value


def _sqlite_when(text: Any) -> datetime | None:
    if text is None:
        return None
    if isinstance(text, datetime):
        return text if text.tzinfo is not None else text.replace(tzinfo=UTC)
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _postgres_when(value: Any) -> datetime | None:
    if value is None:
        return None
    assert isinstance(value, datetime)
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def _item_rows(items: list[Item], t: Encode) -> list[tuple[Any, ...]]:
    """Upsert rows of items whose payload is in memory."""
    return [
        (
            i.seq,
            i.node,
            i.item_id,
            i.publisher,
            i.payload,
            i.payload_size,
            t(i.published_at),
            t(i.updated_at),
            i.locked_by,
            i.lock_jid,
            t(i.locked_at),
            t(i.lock_expires_at),
            t(i.available_at),
            i.deliveries,
            None if i.headers is EMPTY_HEADERS else codec.encode_headers(i.headers),
            i.priority,
            t(i.expires_at),
            i.ordering_key,
            t(i.acked_at),
        )
        for i in items
        if i.payload is not COLD
    ]


def _cold_item_rows(items: list[Item], t: Encode) -> list[tuple[Any, ...]]:
    """UPDATE rows (all but the payload) of items whose payload stayed in the database."""
    return [
        (
            i.publisher,
            i.payload_size,
            t(i.published_at),
            t(i.updated_at),
            i.locked_by,
            i.lock_jid,
            t(i.locked_at),
            t(i.lock_expires_at),
            t(i.available_at),
            i.deliveries,
            None if i.headers is EMPTY_HEADERS else codec.encode_headers(i.headers),
            i.priority,
            t(i.expires_at),
            i.ordering_key,
            t(i.acked_at),
            i.node,
            i.item_id,
        )
        for i in items
        if i.payload is COLD
    ]


def _sub_row(sub_id: int, s: Subscription, t: Encode) -> tuple[Any, ...]:
    return (
        sub_id,
        s.node,
        s.subid,
        s.jid,
        s.state.value,
        s.queue_requests,
        codec.encode_options(s.options),
        t(s.created_at),
        t(s.last_activity),
    )


def _event_rows(events: list[LedgerEvent], t: Encode) -> list[tuple[Any, ...]]:
    kinds = _KIND_TEXT
    return [
        (
            t(e.at),
            kinds[e.kind],
            e.node,
            e.item_id,
            e.subscriber,
            e.deliveries,
            e.payload_size,
            e.attributes,
            e.reason,
        )
        for e in events
    ]


def _event(row: Sequence[Any], when: Callable[[Any], datetime | None]) -> LedgerEvent:
    at = when(row[0])
    assert at is not None
    return LedgerEvent(
        at, EventKind(row[1]), row[2], row[3], row[4], row[5], row[6], row[7], row[8]
    )


def write_plan(flush: Flush, q: Statements, t: Encode) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """(statement, rows) pairs in foreign-key order; empty groups left out."""
    cleared = [(n,) for n in flush.clear_nodes]
    plan: list[tuple[str, list[tuple[Any, ...]]]] = [
        (q.clear_items, cleared + [(n,) for n in flush.clear_items]),
        (q.clear_subs, cleared),
        (q.clear_affs, cleared),
        (q.clear_snapshots, cleared + [(n,) for n, _ in flush.snapshot_nodes]),
        (q.item_delete, flush.item_deletes),
        (q.sub_delete, flush.sub_deletes),
        (q.aff_delete, flush.aff_deletes),
        (q.node_delete, [(n,) for n in flush.node_deletes]),
        (
            q.node_upsert,
            [
                (n.node_id, codec.encode_config(n.config), n.creator, t(n.created_at))
                for n in flush.node_upserts
            ],
        ),
        (q.aff_upsert, [(n, j, a.value) for n, j, a in flush.aff_upserts]),
        (q.sub_upsert, [_sub_row(i, s, t) for i, s in flush.sub_upserts]),
        (
            q.snapshot_insert,
            [
                (x.node, x.name, t(x.created_at), x.mark_seq)
                for _, taken in flush.snapshot_nodes
                for x in taken
            ],
        ),
        (q.item_upsert, _item_rows(flush.item_upserts, t)),
        (q.item_update_cold, _cold_item_rows(flush.item_upserts, t)),
        (q.ledger_insert, _event_rows(flush.events, t)),
    ]
    return [(sql, rows) for sql, rows in plan if rows]


# --- SQLite ----------------------------------------------------------------------------

_SQLITE_BUGS = ("no such table", "no such column", "syntax error", "has no column")


def _sqlite_outage(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return True
    if isinstance(exc, sqlite3.OperationalError):
        return not any(bug in str(exc).lower() for bug in _SQLITE_BUGS)
    return False


def _translate(exc: BaseException, outage: Callable[[BaseException], bool]) -> BaseException:
    if isinstance(exc, StorageUnavailable):
        return exc
    if outage(exc):
        error = StorageUnavailable(f"database unavailable: {type(exc).__name__}")
        error.__cause__ = exc
        return error
    return exc


class SqliteBackend:
    """SQLite on one worker thread (see the module docstring)."""

    keeps_payloads = True

    def __init__(self, url: str) -> None:
        self._engine: Engine = make_sqlite_engine(url)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="xmpp-queue-wb")
        self._raw: Any = None
        self._conn: sqlite3.Connection | None = None

    async def _run(self, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._worker, fn)
        except FlushFailed as failed:
            failed.error = _translate(failed.error, _sqlite_outage)
            raise
        except Exception as exc:
            raise _translate(exc, _sqlite_outage) from exc

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._raw = self._engine.raw_connection()  # pragmas: engine.py
            conn = self._raw.driver_connection
            assert isinstance(conn, sqlite3.Connection)
            self._conn = conn
        return self._conn

    async def load(self) -> MemoryState:
        return await self._run(self._load)

    def _load(self) -> MemoryState:
        conn = self._connection()
        builder = StateBuilder(_sqlite_when)
        conn.execute("BEGIN")  # one consistent snapshot
        try:
            builder.nodes(conn.execute(SQLITE.load_nodes))
            builder.affiliations(conn.execute(SQLITE.load_affs))
            builder.subscriptions(conn.execute(SQLITE.load_subs))
            builder.items(conn.execute(SQLITE.load_items))
            builder.snapshots(conn.execute(SQLITE.load_snapshots))
            for node_id, window in builder.dedup_nodes():
                last = _sqlite_when(conn.execute(SQLITE.ledger_last, (node_id,)).fetchone()[0])
                if last is not None:
                    since = _sqlite_time(last - timedelta(seconds=window))
                    builder.finished(
                        node_id, conn.execute(SQLITE.ledger_finished, (node_id, since))
                    )
            floor = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'items'").fetchone()
        finally:
            conn.execute("ROLLBACK")
        if builder.orphans:
            log.warning("event=orphan_rows count=%d action=ignored", builder.orphans)
        return builder.finish(seq_floor=floor[0] if floor else 0)

    async def write(self, flush: Flush) -> None:
        plan = write_plan(flush, SQLITE, _sqlite_times())
        await self._run(lambda: self._write(plan))

    def _write(self, plan: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
        conn = self._connection()
        try:
            conn.execute("BEGIN IMMEDIATE")
            for sql, rows in plan:
                conn.executemany(sql, rows)
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise FlushFailed(exc, maybe_committed=False) from exc
        try:
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            # A full disk refuses the commit's pages before any is written: surely
            # not committed. Other errors (an fsync that failed) may have committed.
            full = getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
            raise FlushFailed(exc, maybe_committed=not full) from exc

    async def payloads(self, node_id: str, item_ids: list[str]) -> dict[str, str | None]:
        params = (node_id, json.dumps(item_ids))
        rows = await self._run(
            lambda: self._connection().execute(SQLITE.payloads, params).fetchall()
        )
        return dict(rows)

    async def ledger_count(self, node_id: str, kind: EventKind, since: datetime) -> int:
        params = (node_id, kind.value, _sqlite_time(since.astimezone(UTC)))
        row = await self._run(lambda: self._connection().execute(SQLITE.ledger_count, params))
        return int(row.fetchone()[0])

    async def ledger_events(self, node_id: str | None) -> list[LedgerEvent]:
        def read() -> list[Any]:
            conn = self._connection()
            if node_id is None:
                return conn.execute(SQLITE.ledger_all).fetchall()
            return conn.execute(SQLITE.ledger_for_node, (node_id,)).fetchall()

        return [_event(r, _sqlite_when) for r in await self._run(read)]

    async def close(self) -> None:
        def shut() -> None:
            if self._raw is not None:
                self._raw.close()
                self._raw = self._conn = None
            self._engine.dispose()

        try:
            await asyncio.get_running_loop().run_in_executor(self._worker, shut)
        finally:
            self._worker.shutdown(wait=True)


# --- PostgreSQL ---------------------------------------------------------------------------


_POSTGRES_LOST = (
    OSError,
    TimeoutError,
    ConnectionError,
    asyncpg.exceptions.PostgresConnectionError,  # ConnectionDoesNotExistError ...
    asyncpg.exceptions.InterfaceError,  # "connection is closed"
    asyncpg.exceptions.InternalClientError,  # a protocol left mid-call by a killed peer
    asyncpg.exceptions.OperatorInterventionError,  # AdminShutdownError: pg_terminate_backend
)


def _postgres_outage(exc: BaseException) -> bool:
    """Whether *exc* means the database or our connection to it is gone (rather
    than a refused statement). Looks through wrappers: SQLAlchemy's ``DBAPIError``
    (``.orig``, ``connection_invalidated``) and exception chains."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, _POSTGRES_LOST):
            return True
        if isinstance(e, DBAPIError) and e.connection_invalidated:
            return True
        orig = getattr(e, "orig", None)
        todo += [orig if isinstance(orig, BaseException) else None, e.__cause__, e.__context__]
    return False


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
        # One connection carries one call at a time: a read (payloads, ledger) must
        # not interleave with a commit, nor with setting up a new connection.
        self._busy = asyncio.Lock()

    async def _connection(self) -> asyncpg.Connection:
        """The open connection, or a new one (the caller holds ``_busy``)."""
        if self._conn is None or self._conn.is_closed():
            self._conn = None
            try:
                conn = await asyncpg.connect(self._dsn)
                if self.fence is not None:
                    # A commit holds the lease row (the fencing check) until it ends. If
                    # this process froze mid-commit (SIGSTOP, a stalled VM), the server
                    # ends that transaction, releasing the row for a standby, before
                    # the lease term is over.
                    await conn.execute(
                        "SET idle_in_transaction_session_timeout = "
                        f"{int(self.fence.idle_limit * 1000)}"
                    )
            except Exception as exc:
                raise _translate(exc, _postgres_outage) from exc
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
        translated = _translate(exc, _postgres_outage)
        outage = isinstance(translated, StorageUnavailable)
        if outage and not isinstance(translated, NotActive) and self._conn is not None:
            self._conn.terminate()
            self._conn = None
        return translated

    async def load(self) -> MemoryState:
        async with self._busy:
            return await self._load()

    async def _load(self) -> MemoryState:
        conn = await self._connection()
        builder = StateBuilder(_postgres_when)
        try:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                builder.nodes(await conn.fetch(POSTGRES.load_nodes))
                builder.affiliations(await conn.fetch(POSTGRES.load_affs))
                builder.subscriptions(await conn.fetch(POSTGRES.load_subs))
                builder.items(await conn.fetch(POSTGRES.load_items))
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

    def _plan(self, flush: Flush) -> list[tuple[str, list[tuple[Any, ...]]]]:
        """The commit's statements and rows (a shard adds its placement rows)."""
        return write_plan(flush, POSTGRES, _same_time)

    async def _write(self, flush: Flush) -> None:
        plan = self._plan(flush)
        try:
            conn = await self._connection()
        except StorageUnavailable as exc:
            raise FlushFailed(exc, maybe_committed=False) from exc
        transaction = conn.transaction()
        try:
            await transaction.start()
            # The transaction's id lets a COMMIT whose answer was lost be looked up.
            if self.fence is not None:
                xid = await conn.fetchval(
                    FENCE_CHECK + " RETURNING txid_current()", self.fence.name, self.fence.token
                )
                if xid is None:
                    raise NotActive(f"lease {self.fence.name} is no longer ours; not committing")
            else:
                xid = await conn.fetchval("SELECT txid_current()")
            for sql, rows in plan:
                await conn.executemany(sql, rows)
            await self._reserve(conn, flush)
        except NotActive as exc:
            await transaction.rollback()
            fence = self.fence
            assert fence is not None
            log.error("event=commit_fenced name=%s token=%d", fence.name, fence.token)
            raise FlushFailed(exc, maybe_committed=False) from exc
        except BaseException as exc:
            if not conn.is_closed():
                try:
                    await transaction.rollback()
                except Exception:
                    pass
            raise FlushFailed(self._lost(exc), maybe_committed=False) from exc
        if conn.is_closed():  # lost before COMMIT was sent: certainly not committed
            closed = StorageUnavailable("database unavailable: connection closed before COMMIT")
            raise FlushFailed(self._lost(closed), maybe_committed=False)
        try:
            await transaction.commit()
        except BaseException as exc:
            lost = self._lost(exc)
            outcome = await self._outcome(xid) if lost is not exc else None
            if outcome == "committed":
                log.info("event=commit_confirmed xid=%d after=%s", xid, type(exc).__name__)
                return
            raise FlushFailed(lost, maybe_committed=outcome != "aborted") from exc

    async def _outcome(self, xid: int) -> str | None:
        """Whether transaction *xid* committed ("committed" / "aborted"), asked on a
        new connection after the old one died in its COMMIT; None if that cannot be
        learnt now. A killed session's transaction is "in progress" until the server
        has rolled it back: asked again for a moment."""
        try:
            conn = await self._connection()
            for _ in range(40):
                status = await conn.fetchval("SELECT txid_status($1)", xid)
                if status != "in progress":
                    return str(status) if status else None
                await asyncio.sleep(0.05)
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
        return [_event(r, _postgres_when) for r in rows]

    async def close(self) -> None:
        if self._conn is not None:
            try:
                await self._conn.close(timeout=5)
            except Exception:
                self._conn.terminate()
            self._conn = None
