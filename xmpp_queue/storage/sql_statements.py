"""Every statement the SQL backends run, compiled once per dialect.

The SQL text comes from SQLAlchemy constructs on ``schema`` (the dialects'
``insert().on_conflict_do_update``), so table and column names have one source;
the backends then run the driver SQL directly (``backend_sqlite``,
``backend_postgres``), with no SQLAlchemy on the hot path. Each statement's
parameter order is checked against the row tuples ``sql_rows`` builds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    Integer,
    String,
    Table,
    and_,
    bindparam,
    cast,
    delete,
    extract,
    func,
    insert,
    literal_column,
    not_,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.dialects.postgresql import asyncpg as asyncpg_dialect
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement, ColumnElement

from xmpp_queue.storage import schema
from xmpp_queue.storage.load import (
    AFFILIATION_FIELDS,
    ITEM_COLD_FIELDS,
    ITEM_FIELDS,
    LEDGER_FIELDS,
    NODE_FIELDS,
    SNAPSHOT_FIELDS,
    SUBSCRIPTION_FIELDS,
)


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
    load_tail: str
    load_delayed: str
    load_keyed: str
    load_schedule: str
    load_expiry: str
    items_by_seq: str
    item_by_id: str
    tail_ids: str
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


def coolable() -> ColumnElement[bool]:
    """A waiting item that may be kept as its seq (and due and expiry times)
    alone (``backlog.is_plain``): no lock or ordering key, not retained."""
    i = schema.items.c
    return and_(i.acked_at.is_(None), i.locked_by.is_(None), i.ordering_key.is_(None))


def plain_waiting() -> ColumnElement[bool]:
    """A waiting item that needs nothing in memory but its seq (``backlog``)."""
    return and_(coolable(), schema.items.c.available_at.is_(None))


def delayed_waiting() -> ColumnElement[bool]:
    """A waiting item kept as its seq and due time (``tail``, ``schedule``)."""
    return and_(coolable(), schema.items.c.available_at.is_not(None))


def keyed_waiting() -> ColumnElement[bool]:
    """A waiting item with an ordering key: on an ordered node (*ordered*, the
    dialect's test of ``node_id`` against the parameter ``ordered``) it is loaded
    as its (key, seq) alone (``backlog``, ``ordered``)."""
    i = schema.items.c
    return and_(i.acked_at.is_(None), i.locked_by.is_(None), i.ordering_key.is_not(None))


def expiring_waiting(ordered: ColumnElement[bool] | None = None) -> ColumnElement[bool]:
    """A cold waiting item whose expiry time stays in memory (``tail``): a plain
    one, or with *ordered* a keyed one of an ordered node too."""
    cold = coolable() if ordered is None else or_(coolable(), and_(keyed_waiting(), ordered))
    return and_(cold, schema.items.c.expires_at.is_not(None))


def waiting_unlocked() -> ColumnElement[bool]:
    """Every item that may be cold (plain or keyed): its id fills a tail's filter."""
    i = schema.items.c
    return and_(i.acked_at.is_(None), i.locked_by.is_(None))


def due_us(dialect: Dialect, at: ColumnElement[Any]) -> ColumnElement[Any]:
    """A time column (``available_at``, ``expires_at``) as whole microseconds since
    the epoch (``schedule.to_us``), computed by the database so a load converts no
    timestamp in Python."""
    million: ColumnElement[Any] = literal_column("1000000")
    if dialect.name == "sqlite":  # stored as 'YYYY-MM-DD HH:MM:SS.ffffff' (UTC)
        seconds = cast(func.strftime(literal_column("'%s'"), at), Integer)
        fraction = cast(func.substr(at, literal_column("21"), literal_column("6")), Integer)
        return seconds * million + fraction
    return cast(extract("epoch", at) * million, BigInteger)


def load_schedule(
    dialect: Dialect, where: ColumnElement[bool], expiry: bool = False
) -> ClauseElement:
    """Cold delayed items' (due, seq) in time order, or with *expiry* cold items'
    (expires, seq): on SQLite a row each, ordered (its aggregates keep no
    order); on PostgreSQL two arrays per node."""
    i = schema.items.c
    at = i.expires_at if expiry else i.available_at
    due, order = due_us(dialect, at), (at, i.seq)
    if dialect.name == "sqlite":
        return select(i.node_id, due, i.seq).where(where).order_by(i.node_id, *order)
    return (
        select(
            i.node_id,
            func.array_agg(aggregate_order_by(due, *order)),
            func.array_agg(aggregate_order_by(i.seq, *order)),
        )
        .where(where)
        .group_by(i.node_id)
    )


def _statements(
    dialect: Dialect,
    insert_: Callable[[Table], Any],
    id_list: ColumnElement[bool],
    seq_list: ColumnElement[bool],
    seqs_of: Callable[[ColumnElement[Any]], ColumnElement[Any]],
    ordered: ColumnElement[bool],
) -> Statements:
    """*id_list*: the dialect's way to test ``item_id`` against one array-ish
    parameter ``ids`` (one statement text whatever the number of ids);
    *seq_list* the same for ``seq`` and a parameter ``seqs``; *seqs_of* the
    aggregate that gathers a group's seqs into one value (a JSON or SQL array);
    *ordered* the test of ``node_id`` against the parameter ``ordered`` (the
    ordered nodes, whose keyed waiting items load as (key, seqs))."""
    n, a, s, i, ledger = (
        schema.nodes,
        schema.affiliations,
        schema.subscriptions,
        schema.items,
        schema.ledger,
    )
    by_node = ("node_id",)
    plain = plain_waiting()
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
        # Without payloads: those are fetched when a read needs them (COLD). Plain
        # waiting items are not read whole at all: their seqs form the cold tails.
        load_items=c(
            select(*(i.c.payload.is_(None) if f == "payload" else i.c[f] for f in ITEM_FIELDS))
            .where(not_(coolable()), not_(and_(keyed_waiting(), ordered)))
            .order_by(i.c.seq),
            ("ordered",),
        ),
        load_tail=c(
            select(i.c.node_id, i.c.priority, seqs_of(i.c.seq), func.sum(i.c.payload_size))
            .where(plain)
            .group_by(i.c.node_id, i.c.priority)
        ),
        load_delayed=c(
            select(i.c.node_id, i.c.priority, seqs_of(i.c.seq), func.sum(i.c.payload_size))
            .where(delayed_waiting())
            .group_by(i.c.node_id, i.c.priority)
        ),
        load_keyed=c(
            select(i.c.node_id, i.c.ordering_key, seqs_of(i.c.seq), func.sum(i.c.payload_size))
            .where(keyed_waiting(), ordered)
            .group_by(i.c.node_id, i.c.ordering_key),
            ("ordered",),
        ),
        load_schedule=c(load_schedule(dialect, delayed_waiting())),
        load_expiry=c(load_schedule(dialect, expiring_waiting(ordered), expiry=True), ("ordered",)),
        items_by_seq=c(
            select(*(i.c[f] for f in ITEM_FIELDS))
            .where(i.c.node_id == bindparam("node"), seq_list)
            .order_by(i.c.seq),
            ("node", "seqs"),
        ),
        tail_ids=c(
            select(i.c.seq, i.c.item_id)
            .where(
                i.c.node_id == bindparam("node"),
                i.c.seq > bindparam("after"),
                i.c.seq <= bindparam("upto"),
                waiting_unlocked(),
            )
            .order_by(i.c.seq)
            .limit(literal_column("5000"))  # a chunk of a few milliseconds
            .offset(literal_column("0")),
            ("node", "after", "upto"),
        ),
        item_by_id=c(
            select(*(i.c[f] for f in ITEM_FIELDS)).where(
                i.c.node_id == bindparam("node"), i.c.item_id == bindparam("item")
            ),
            ("node", "item"),
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
    _i.seq.in_(select(literal_column("value")).select_from(func.json_each(bindparam("seqs")))),
    func.json_group_array,
    _i.node_id.in_(
        select(literal_column("value")).select_from(func.json_each(bindparam("ordered")))
    ),
)
POSTGRES = _statements(
    asyncpg_dialect.dialect(),  # type: ignore[no-untyped-call]
    postgresql.insert,
    _i.item_id == func.any(bindparam("ids", type_=postgresql.ARRAY(String()))),
    _i.seq == func.any(bindparam("seqs", type_=postgresql.ARRAY(BigInteger()))),
    func.array_agg,
    _i.node_id == func.any(bindparam("ordered", type_=postgresql.ARRAY(String()))),
)
