"""Rows in and out of the SQL backends: a commit's Flush as (statement, rows)
pairs, and the timestamps and ledger rows read back.

Values bypass SQLAlchemy's type processing, so this module encodes them the way
``schema.UtcDateTime`` and ``codec`` do: on SQLite a timestamp is the text
SQLAlchemy writes (``YYYY-MM-DD HH:MM:SS.ffffff``, UTC), so the SQL store and the
pipeline read these rows like their own; asyncpg encodes datetimes itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import Item, Subscription
from xmpp_queue.storage import codec
from xmpp_queue.storage.flush import Flush
from xmpp_queue.storage.item_values import COLD, EMPTY_HEADERS
from xmpp_queue.storage.sql_statements import Statements

Encode = Callable[[datetime | None], Any]
_KIND_TEXT = {kind: kind.value for kind in EventKind}


def sqlite_time(value: datetime) -> str:
    """The text SQLAlchemy's SQLite DATETIME writes. Values in memory are UTC."""
    return value.isoformat(" ", "microseconds")[:26]


def sqlite_times() -> Encode:
    """A timestamp encoder for one flush: the moments of one batch repeat (an
    operation's clock reading is its item's publish time, lock time and ledger
    time), so each distinct one is formatted once."""
    memo: dict[datetime, str] = {}

    def encode(value: datetime | None) -> str | None:
        if value is None:
            return None
        found = memo.get(value)
        if found is None:
            found = memo[value] = sqlite_time(value)
        return found

    return encode


def same_time(value: datetime | None) -> datetime | None:
    return value


def sqlite_when(text: Any) -> datetime | None:
    if text is None:
        return None
    if isinstance(text, datetime):
        return text if text.tzinfo is not None else text.replace(tzinfo=UTC)
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def postgres_when(value: Any) -> datetime | None:
    if value is None:
        return None
    assert isinstance(value, datetime)
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def item_rows(items: list[Item], t: Encode) -> list[tuple[Any, ...]]:
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


def cold_item_rows(items: list[Item], t: Encode) -> list[tuple[Any, ...]]:
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


def event_rows(events: list[LedgerEvent], t: Encode) -> list[tuple[Any, ...]]:
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


def ledger_event(row: Sequence[Any], when: Callable[[Any], datetime | None]) -> LedgerEvent:
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
        (q.item_upsert, item_rows(flush.item_upserts, t)),
        (q.item_update_cold, cold_item_rows(flush.item_upserts, t)),
        (q.ledger_insert, event_rows(flush.events, t)),
    ]
    return [(sql, rows) for sql, rows in plan if rows]
