"""SqlStore: the core's ports over SQLAlchemy 2 async (SQLite or PostgreSQL).

One :meth:`SqlStore.transaction` is one database transaction on one pooled
connection; leaving the block without ``commit()`` rolls it back. The
repositories speak SQLAlchemy Core (prepared ``select``/``insert``/``update``
statements built once at import, so each call only binds parameters and hits
the compiled cache) and never the ORM unit of work. Locks are conditional
updates whose row count says who won. Ledger rows are buffered and written
with one executemany insert at commit, or before a ledger read.

Driver errors never leave this module raw: a lost or unreachable database
becomes :class:`~xmpp_queue.core.errors.StorageUnavailable`, a taken node id
:class:`~xmpp_queue.core.errors.NodeExists`. Anything else (a constraint the
core should have guarded) propagates unchanged: it is a bug, and the commit
batcher answers it by rolling back and retrying operations one by one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Executable,
    Insert,
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, CursorResult
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from xmpp_queue.core.errors import NodeExists
from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import (
    Affiliation,
    AffiliationEntry,
    Node,
    NodeConfig,
    Subscription,
    bare,
)
from xmpp_queue.core.ports import (
    AffiliationRepository,
    EventLedger,
    ItemRepository,
    NodeRepository,
    Store,
    SubscriptionRepository,
    Transaction,
)
from xmpp_queue.storage import codec, schema
from xmpp_queue.storage.codec import AnyRow
from xmpp_queue.storage.engine import make_engine, make_sqlite_engine
from xmpp_queue.storage.errors import is_unavailable, translated_errors, unavailable
from xmpp_queue.storage.read_cache import ReadCache
from xmpp_queue.storage.sql_items import SqlItems
from xmpp_queue.storage.sqlite_fast import FastResult
from xmpp_queue.storage.sqlite_runner import BlockingSqliteConnection, SqliteRunner

# --- statements (built once) ---------------------------------------------------------

_n = schema.nodes.c
_a = schema.affiliations.c
_s = schema.subscriptions.c
_l = schema.ledger.c

NODE_GET = select(*codec.NODE_COLUMNS).where(_n.node_id == bindparam("b_node"))
NODE_ALL = select(*codec.NODE_COLUMNS).order_by(_n.node_id)
NODE_SET_CONFIG = update(schema.nodes).where(_n.node_id == bindparam("b_node"))
NODE_DELETES = tuple(
    delete(table).where(table.c.node_id == bindparam("b_node"))
    for table in (schema.items, schema.subscriptions, schema.affiliations, schema.nodes)
)

AFF_GET = select(_a.affiliation).where(
    _a.node_id == bindparam("b_node"), _a.jid == bindparam("b_jid")
)
AFF_DELETE = delete(schema.affiliations).where(
    _a.node_id == bindparam("b_node"), _a.jid == bindparam("b_jid")
)
AFF_FOR_NODE = (
    select(_a.node_id, _a.jid, _a.affiliation)
    .where(_a.node_id == bindparam("b_node"))
    .order_by(_a.jid)
)
AFF_FOR_JID = (
    select(_a.node_id, _a.jid, _a.affiliation)
    .where(_a.jid == bindparam("b_jid"))
    .order_by(_a.node_id)
)

_SUB_SELECT = select(*codec.SUBSCRIPTION_COLUMNS)
SUB_WHERE_KEY = (_s.node_id == bindparam("b_node"), _s.subid == bindparam("b_subid"))
SUB_UPDATE = update(schema.subscriptions).where(*SUB_WHERE_KEY)
SUB_DELETE = delete(schema.subscriptions).where(*SUB_WHERE_KEY)
SUB_GET = _SUB_SELECT.where(*SUB_WHERE_KEY)
SUB_FOR_NODE = _SUB_SELECT.where(_s.node_id == bindparam("b_node")).order_by(_s.id)
SUB_FOR_JID = _SUB_SELECT.where(_s.jid == bindparam("b_jid")).order_by(_s.id)
SUB_FOR_JID_NODE = _SUB_SELECT.where(
    _s.jid == bindparam("b_jid"), _s.node_id == bindparam("b_node")
).order_by(_s.id)
SUB_FOR_ACCOUNT = _SUB_SELECT.where(
    (_s.jid == bindparam("b_bare")) | _s.jid.like(bindparam("b_prefix"), escape="\\")
).order_by(_s.id)
SUB_INSERT = insert(schema.subscriptions)
SUB_COUNT = select(func.count()).select_from(schema.subscriptions)

LEDGER_INSERT = insert(schema.ledger)
LEDGER_ALL = select(*codec.LEDGER_COLUMNS).order_by(_l.id)
LEDGER_FOR_NODE = (
    select(*codec.LEDGER_COLUMNS).where(_l.node == bindparam("b_node")).order_by(_l.id)
)
LEDGER_COUNT = select(func.count()).where(
    _l.node == bindparam("b_node"), _l.kind == bindparam("b_kind"), _l.at >= bindparam("b_since")
)


def _like_prefix(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "/%"


# INSERT ... ON CONFLICT: both dialects have it, each with its own construct.
NODE_INSERT = {
    "postgresql": postgresql.insert(schema.nodes).on_conflict_do_nothing(
        index_elements=[_n.node_id]
    ),
    "sqlite": sqlite.insert(schema.nodes).on_conflict_do_nothing(index_elements=[_n.node_id]),
}


def _affiliation_upsert(insert_: Any) -> Insert:
    statement = insert_(schema.affiliations)
    upsert: Insert = statement.on_conflict_do_update(
        index_elements=[_a.node_id, _a.jid], set_={"affiliation": statement.excluded.affiliation}
    )
    return upsert


AFF_UPSERT = {
    "postgresql": _affiliation_upsert(postgresql.insert),
    "sqlite": _affiliation_upsert(sqlite.insert),
}


# --- the transaction --------------------------------------------------------------------


class SqlTransaction:
    """One database transaction and its repositories (see the module docstring)."""

    def __init__(self, conn: AsyncConnection | BlockingSqliteConnection) -> None:
        self.conn = conn
        self.dialect = conn.dialect.name
        self.pending_events: list[dict[str, Any]] = []
        self.cache = ReadCache()
        self.nodes: NodeRepository = SqlNodes(self)
        self.affiliations: AffiliationRepository = SqlAffiliations(self)
        self.subscriptions: SubscriptionRepository = SqlSubscriptions(self)
        self.items: ItemRepository = SqlItems(self)
        self.ledger: EventLedger = SqlLedger(self)

    async def execute(
        self,
        statement: Executable,
        params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    ) -> FastResult | CursorResult[*tuple[Any, ...]]:
        """Run one statement, turning an outage into StorageUnavailable."""
        # An inline try (free when nothing is raised) rather than the context
        # manager: this runs for every statement.
        try:
            return await self.conn.execute(statement, params)
        except (DBAPIError, OSError, sqlite3.Error) as exc:
            if is_unavailable(exc):
                raise unavailable(exc) from exc
            raise
        except StatementError as exc:
            # A bind value our types refused (a naive datetime): the caller's
            # ValueError, not SQLAlchemy's wrapper around it.
            if isinstance(exc.orig, ValueError):
                raise exc.orig from None
            raise

    async def rows(
        self, statement: Executable, params: Mapping[str, Any] | None = None
    ) -> list[AnyRow]:
        rows: list[AnyRow] = list((await self.execute(statement, params)).all())
        return rows

    async def scalar(self, statement: Executable, params: Mapping[str, Any] | None = None) -> Any:
        return (await self.execute(statement, params)).scalar()

    async def flush_ledger(self) -> None:
        if self.pending_events:
            events, self.pending_events = self.pending_events, []
            await self.execute(LEDGER_INSERT, events)

    async def commit(self) -> None:
        await self.flush_ledger()
        with translated_errors():
            await self.conn.commit()


# --- repositories -----------------------------------------------------------------------


class SqlNodes:
    def __init__(self, tx: SqlTransaction) -> None:
        self._tx = tx
        self._cache = tx.cache.nodes

    async def get(self, node_id: str) -> Node | None:
        if node_id in self._cache:
            return self._cache[node_id]
        rows = await self._tx.rows(NODE_GET, {"b_node": node_id})
        node = codec.node_from_row(rows[0]) if rows else None
        self._cache[node_id] = node
        return node

    async def add(self, node: Node) -> None:
        # ON CONFLICT DO NOTHING instead of catching IntegrityError: a failed
        # statement would abort the whole PostgreSQL transaction (the batch).
        self._tx.cache.forget_node(node.node_id)
        result = await self._tx.execute(NODE_INSERT[self._tx.dialect], codec.node_values(node))
        if result.rowcount == 0:
            raise NodeExists(node.node_id)

    async def update_config(self, node_id: str, config: NodeConfig) -> None:
        self._cache.pop(node_id, None)
        await self._tx.execute(
            NODE_SET_CONFIG, {"b_node": node_id, "config": codec.encode_config(config)}
        )

    async def remove(self, node_id: str) -> None:
        self._tx.cache.forget_node(node_id)
        # Explicit deletes rather than relying on ON DELETE CASCADE alone: a
        # SQLite connection opened without PRAGMA foreign_keys would skip it.
        for statement in NODE_DELETES:
            await self._tx.execute(statement, {"b_node": node_id})

    async def all(self) -> list[Node]:
        return [codec.node_from_row(r) for r in await self._tx.rows(NODE_ALL)]


class SqlAffiliations:
    def __init__(self, tx: SqlTransaction) -> None:
        self._tx = tx
        self._cache = tx.cache.affiliations

    async def get(self, node_id: str, jid: str) -> Affiliation:
        found = self._cache.get((node_id, jid))
        if found is not None:
            return found
        value = await self._tx.scalar(AFF_GET, {"b_node": node_id, "b_jid": jid})
        found = Affiliation(value) if value is not None else Affiliation.NONE
        self._cache[(node_id, jid)] = found
        return found

    async def set(self, node_id: str, jid: str, affiliation: Affiliation) -> None:
        self._cache.pop((node_id, jid), None)
        if affiliation is Affiliation.NONE:
            await self._tx.execute(AFF_DELETE, {"b_node": node_id, "b_jid": jid})
            return
        await self._tx.execute(
            AFF_UPSERT[self._tx.dialect],
            {"node_id": node_id, "jid": jid, "affiliation": affiliation.value},
        )

    async def for_node(self, node_id: str) -> list[AffiliationEntry]:
        rows = await self._tx.rows(AFF_FOR_NODE, {"b_node": node_id})
        return [AffiliationEntry(r[0], r[1], Affiliation(r[2])) for r in rows]

    async def for_jid(self, jid: str) -> list[AffiliationEntry]:
        rows = await self._tx.rows(AFF_FOR_JID, {"b_jid": jid})
        return [AffiliationEntry(r[0], r[1], Affiliation(r[2])) for r in rows]


class SqlSubscriptions:
    def __init__(self, tx: SqlTransaction) -> None:
        self._tx = tx
        self._cache = tx.cache.subscriptions

    async def add(self, subscription: Subscription) -> None:
        self._cache.pop(subscription.node, None)
        await self._tx.execute(SUB_INSERT, codec.subscription_values(subscription))

    async def update(self, subscription: Subscription) -> None:
        values = codec.subscription_values(subscription)
        del values["node_id"], values["subid"]
        values.update(b_node=subscription.node, b_subid=subscription.subid)
        self._cache.pop(subscription.node, None)
        await self._tx.execute(SUB_UPDATE, values)

    async def remove(self, node_id: str, subid: str) -> None:
        self._cache.pop(node_id, None)
        await self._tx.execute(SUB_DELETE, {"b_node": node_id, "b_subid": subid})

    async def get(self, node_id: str, subid: str) -> Subscription | None:
        rows = await self._tx.rows(SUB_GET, {"b_node": node_id, "b_subid": subid})
        return codec.subscription_from_row(rows[0]) if rows else None

    async def for_node(self, node_id: str) -> list[Subscription]:
        found = self._cache.get(node_id)
        if found is None:
            rows = await self._tx.rows(SUB_FOR_NODE, {"b_node": node_id})
            found = self._cache[node_id] = [codec.subscription_from_row(r) for r in rows]
        return list(found)

    async def for_jid(self, jid: str, node_id: str | None = None) -> list[Subscription]:
        if node_id is None:
            rows = await self._tx.rows(SUB_FOR_JID, {"b_jid": jid})
        else:
            rows = await self._tx.rows(SUB_FOR_JID_NODE, {"b_jid": jid, "b_node": node_id})
        return [codec.subscription_from_row(r) for r in rows]

    async def for_account(self, bare_jid: str) -> list[Subscription]:
        rows = await self._tx.rows(
            SUB_FOR_ACCOUNT, {"b_bare": bare_jid, "b_prefix": _like_prefix(bare_jid)}
        )
        found = (codec.subscription_from_row(r) for r in rows)
        # SQLite's LIKE ignores ASCII case; JIDs are compared exactly.
        return [s for s in found if bare(s.jid) == bare_jid]

    async def count(self) -> int:
        return int(await self._tx.scalar(SUB_COUNT))


class SqlLedger:
    def __init__(self, tx: SqlTransaction) -> None:
        self._tx = tx

    def append(self, event: LedgerEvent) -> None:
        self._tx.pending_events.append(codec.event_values(event))

    async def count(self, node_id: str, kind: EventKind, since: datetime) -> int:
        await self._tx.flush_ledger()
        params = {"b_node": node_id, "b_kind": kind.value, "b_since": since}
        return int(await self._tx.scalar(LEDGER_COUNT, params))

    async def events(self, node_id: str | None = None) -> list[LedgerEvent]:
        await self._tx.flush_ledger()
        if node_id is None:
            rows = await self._tx.rows(LEDGER_ALL)
        else:
            rows = await self._tx.rows(LEDGER_FOR_NODE, {"b_node": node_id})
        return [codec.event_from_row(r) for r in rows]


# --- the store ------------------------------------------------------------------------------


class SqlStore:
    """A :class:`~xmpp_queue.core.ports.Store` over SQLAlchemy.

    PostgreSQL transactions run on the async engine (asyncpg). SQLite ones run
    on a blocking pysqlite engine for the same file through a
    :class:`SqliteRunner` (one hop per transaction instead of several per
    statement; see ``sqlite_runner.py``); the async engine stays available as
    ``engine`` for migrations and ad-hoc queries.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.sqlite: SqliteRunner | None = None
        if engine.dialect.name == "sqlite":
            self.sqlite = SqliteRunner(make_sqlite_engine(engine.url))

    @classmethod
    async def open(cls, url: str | URL) -> SqlStore:
        """A store on a new engine for *url* (see ``engine.make_engine``).

        It does not migrate: run ``storage.migrations.upgrade`` first (the
        ``migrate`` command, or the app at start-up).
        """
        return cls(make_engine(url))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Transaction]:
        if self.sqlite is not None:
            async with self.sqlite.connection() as sqlite_conn:
                yield SqlTransaction(sqlite_conn)
            return
        with translated_errors():
            conn = await self.engine.connect()
        try:
            with translated_errors():
                await conn.begin()
            yield SqlTransaction(conn)
        finally:
            # Rolls back whatever was not committed, and returns the connection.
            await conn.close()

    async def close(self) -> None:
        if self.sqlite is not None:
            await self.sqlite.close()
        await self.engine.dispose()


def _conforms(store: SqlStore) -> Store:
    """Let mypy check that SqlStore satisfies the Store protocol."""
    return store
