"""SqlItems: items and their queue state, the hot half of the SQL store.

Every dispatch, ack and timeout runs through here, so each method is one or
two prepared statements over an index (see ``schema.ItemRow``): next_ready
reads ``(node_id, locked_by IS NULL, seq)``, locks are single conditional
UPDATEs whose row count says whether this caller won, and the deadline queries
read the ``lock_expires_at`` / ``available_at`` indexes. Nothing loads a whole
node except the purge (``remove_all``), which leaves the payloads out. Lock
counts per subscriber are kept in the transaction's ReadCache (``in_flight``
is asked before every dispatch).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import BindParameter, bindparam, case, delete, func, insert, select, update

from xmpp_queue.core.errors import PageNotFound
from xmpp_queue.core.model import Item, ItemPage, PageRequest
from xmpp_queue.core.ports import QueueStats
from xmpp_queue.storage import codec, schema

if TYPE_CHECKING:
    from xmpp_queue.storage.sql import SqlTransaction

_i = schema.items.c
_NODE = _i.node_id == bindparam("b_node")
_KEY = (_NODE, _i.item_id == bindparam("b_item"))
_LOCKED = _i.locked_by.is_not(None)
_UNLOCKED = _i.locked_by.is_(None)
_SELECT = select(*codec.ITEM_COLUMNS)

INSERT = insert(schema.items)
GET = _SELECT.where(*_KEY)
SEQ_OF = select(_i.seq).where(*_KEY)
REPLACE_PAYLOAD = update(schema.items).where(*_KEY)
REMOVE = delete(schema.items).where(*_KEY)
REMOVE_RETURNING_HOLDER = REMOVE.returning(_i.locked_by)
REMOVE_ALL = delete(schema.items).where(_NODE)
ALL_NO_PAYLOAD = select(*codec.ITEM_COLUMNS_NO_PAYLOAD).where(_NODE).order_by(_i.seq)
ALL = _SELECT.where(_NODE).order_by(_i.seq)
COUNT = select(func.count()).where(_NODE)
COUNT_ALL = select(func.count()).select_from(schema.items)
COUNT_BEFORE = select(func.count()).where(_NODE, _i.seq < bindparam("b_seq"))
LATEST = _SELECT.where(_NODE).order_by(_i.seq.desc()).limit(bindparam("b_limit"))
OLDEST_IDS = select(_i.item_id).where(_NODE).order_by(_i.seq).limit(bindparam("b_limit"))

# Paging: a window over seq, forwards (from the start) or backwards (from the end).
_AFTER = _i.seq > bindparam("b_after")
_BEFORE = _i.seq < bindparam("b_before")
_WINDOW = _SELECT.where(_NODE, _AFTER, _BEFORE)
_LIMIT: BindParameter[int] = bindparam("b_limit")
_OFFSET: BindParameter[int] = bindparam("b_offset")
PAGE_FORWARD = _WINDOW.order_by(_i.seq).limit(_LIMIT).offset(_OFFSET)
PAGE_BACKWARD = _WINDOW.order_by(_i.seq.desc()).limit(_LIMIT).offset(_OFFSET)

NEXT_READY = (
    _SELECT.where(
        _NODE,
        _UNLOCKED,
        _i.available_at.is_(None) | (_i.available_at <= bindparam("b_now")),
    )
    .order_by(_i.seq)
    .limit(bindparam("b_limit"))
)
LOCK = (
    update(schema.items)
    .where(*_KEY, _UNLOCKED)
    .values(deliveries=_i.deliveries + 1, available_at=None)
)
_HELD = (*_KEY, _i.locked_by == bindparam("b_subid"))
UNLOCK = (
    update(schema.items)
    .where(*_HELD)
    .values(locked_by=None, lock_jid=None, locked_at=None, lock_expires_at=None)
)
EXTEND = update(schema.items).where(*_HELD)
IN_FLIGHT = select(_i.locked_by, func.count()).where(_NODE, _LOCKED).group_by(_i.locked_by)
LOCKED_BY = _SELECT.where(_NODE, _i.locked_by == bindparam("b_subid")).order_by(_i.seq)
LOCKED = _SELECT.where(_NODE, _LOCKED).order_by(_i.seq)
EXPIRED = (
    _SELECT.where(_LOCKED, _i.lock_expires_at <= bindparam("b_now"))
    .order_by(_i.lock_expires_at, _i.seq)
    .limit(bindparam("b_limit"))
)
NEXT_DEADLINE = select(
    select(func.min(_i.lock_expires_at)).where(_LOCKED).scalar_subquery(),
    select(func.min(_i.available_at))
    .where(_UNLOCKED, _i.available_at > bindparam("b_now"))
    .scalar_subquery(),
)
QUEUE_STATS = select(
    func.count(),
    func.count(_i.locked_by),
    func.min(case((_UNLOCKED, _i.published_at))),
).where(_NODE)
COUNT_LOCKED = select(func.count()).where(_LOCKED)

# Values that stand for "no bound" in the paging window (seq) and "no limit".
_NO_LOWER = 0
_NO_UPPER = 2**62
_NO_LIMIT = 2**62


class SqlItems:
    def __init__(self, tx: SqlTransaction) -> None:
        self._tx = tx

    async def _items(self, statement: Any, params: dict[str, Any]) -> list[Item]:
        return [codec.item_from_row(r) for r in await self._tx.rows(statement, params)]

    async def put(self, item: Item) -> Item:
        result = await self._tx.execute(INSERT, codec.item_values(item))
        key = result.inserted_primary_key
        assert key is not None and key[0] is not None, "the database assigns seq"
        seq = key[0]
        return dataclasses.replace(item, seq=int(seq), headers=dict(item.headers))

    async def replace_payload(
        self,
        node_id: str,
        item_id: str,
        payload: str | None,
        size: int,
        publisher: str,
        at: datetime,
    ) -> None:
        params = {
            "b_node": node_id,
            "b_item": item_id,
            "payload": payload,
            "payload_size": size,
            "publisher": publisher,
            "updated_at": at,
        }
        await self._tx.execute(REPLACE_PAYLOAD, params)

    async def get(self, node_id: str, item_id: str) -> Item | None:
        found = await self._items(GET, {"b_node": node_id, "b_item": item_id})
        return found[0] if found else None

    async def remove(self, node_id: str, item_id: str) -> bool:
        params = {"b_node": node_id, "b_item": item_id}
        if self._tx.conn.dialect.delete_returning:
            # An ack deletes a locked item: learn its holder in the same
            # statement, so the cached lock counts stay exact.
            rows = await self._tx.rows(REMOVE_RETURNING_HOLDER, params)
            if not rows:
                return False
            if rows[0][0] is not None:
                self._tx.cache.unlocked(node_id, rows[0][0])
            return True
        self._tx.cache.in_flight.pop(node_id, None)  # it may have been locked
        return (await self._tx.execute(REMOVE, params)).rowcount > 0

    async def remove_all(self, node_id: str) -> list[Item]:
        params = {"b_node": node_id}
        self._tx.cache.in_flight.pop(node_id, None)
        rows = await self._tx.rows(ALL_NO_PAYLOAD, params)
        await self._tx.execute(REMOVE_ALL, params)
        return [codec.item_from_row_no_payload(r) for r in rows]

    async def count(self, node_id: str) -> int:
        return int(await self._tx.scalar(COUNT, {"b_node": node_id}))

    async def count_all(self) -> int:
        return int(await self._tx.scalar(COUNT_ALL))

    async def page(self, node_id: str, request: PageRequest) -> ItemPage:
        """XEP-0059 in SQL; the same rules as ``memory.page_of`` (see there)."""
        r = request
        if r.max is None and r.after is None and r.before is None and r.index is None:
            every = await self._items(ALL, {"b_node": node_id})
            return ItemPage(items=tuple(every), count=len(every))
        count = await self.count(node_id)
        lower = await self._seq_of(node_id, r.after, "after") if r.after is not None else None
        upper = await self._seq_of(node_id, r.before, "before") if r.before else None
        offset = 0
        if r.index is not None and r.after is None and r.before is None:
            offset = max(0, r.index)
        limit = max(0, r.max) if r.max is not None else None
        items: list[Item] = []
        if limit != 0:
            backwards = r.before is not None and limit is not None
            params = {
                "b_node": node_id,
                "b_after": _NO_LOWER if lower is None else lower,
                "b_before": _NO_UPPER if upper is None else upper,
                "b_limit": _NO_LIMIT if limit is None else limit,
                "b_offset": offset,
            }
            items = await self._items(PAGE_BACKWARD if backwards else PAGE_FORWARD, params)
            if backwards:
                items.reverse()
        first_index: int | None = None
        if items:
            if r.after is None and r.before is None:
                first_index = offset
            else:
                before = {"b_node": node_id, "b_seq": items[0].seq}
                first_index = int(await self._tx.scalar(COUNT_BEFORE, before))
        return ItemPage(items=tuple(items), count=count, first_index=first_index, paged=True)

    async def _seq_of(self, node_id: str, item_id: str, side: str) -> int:
        seq = await self._tx.scalar(SEQ_OF, {"b_node": node_id, "b_item": item_id})
        if seq is None:
            raise PageNotFound(f"no item {item_id} to page {side}")
        return int(seq)

    async def latest(self, node_id: str, limit: int) -> list[Item]:
        if limit <= 0:
            return []
        items = await self._items(LATEST, {"b_node": node_id, "b_limit": limit})
        items.reverse()
        return items

    async def oldest_ids(self, node_id: str, limit: int) -> list[str]:
        if limit <= 0:
            return []
        rows = await self._tx.rows(OLDEST_IDS, {"b_node": node_id, "b_limit": limit})
        return [r[0] for r in rows]

    # --- queue state ---------------------------------------------------------------

    async def next_ready(self, node_id: str, now: datetime, limit: int) -> list[Item]:
        if limit <= 0:
            return []
        return await self._items(NEXT_READY, {"b_node": node_id, "b_now": now, "b_limit": limit})

    async def lock(
        self, node_id: str, item_id: str, subid: str, jid: str, now: datetime, expires_at: datetime
    ) -> bool:
        params = {
            "b_node": node_id,
            "b_item": item_id,
            "locked_by": subid,
            "lock_jid": jid,
            "locked_at": now,
            "lock_expires_at": expires_at,
        }
        if (await self._tx.execute(LOCK, params)).rowcount != 1:
            return False
        self._tx.cache.locked(node_id, subid)
        return True

    async def unlock(
        self, node_id: str, item_id: str, subid: str, available_at: datetime | None
    ) -> bool:
        params = {
            "b_node": node_id,
            "b_item": item_id,
            "b_subid": subid,
            "available_at": available_at,
        }
        if (await self._tx.execute(UNLOCK, params)).rowcount != 1:
            return False
        self._tx.cache.unlocked(node_id, subid)
        return True

    async def extend(self, node_id: str, item_id: str, subid: str, expires_at: datetime) -> bool:
        params = {
            "b_node": node_id,
            "b_item": item_id,
            "b_subid": subid,
            "lock_expires_at": expires_at,
        }
        return (await self._tx.execute(EXTEND, params)).rowcount == 1

    async def in_flight(self, node_id: str) -> dict[str, int]:
        loads = self._tx.cache.in_flight.get(node_id)
        if loads is None:
            rows = await self._tx.rows(IN_FLIGHT, {"b_node": node_id})
            loads = self._tx.cache.in_flight[node_id] = {r[0]: int(r[1]) for r in rows}
        return dict(loads)

    async def locked_by(self, node_id: str, subid: str) -> list[Item]:
        return await self._items(LOCKED_BY, {"b_node": node_id, "b_subid": subid})

    async def locked(self, node_id: str) -> list[Item]:
        return await self._items(LOCKED, {"b_node": node_id})

    async def expired_locks(self, now: datetime, limit: int) -> list[Item]:
        if limit <= 0:
            return []
        return await self._items(EXPIRED, {"b_now": now, "b_limit": limit})

    async def next_deadline(self, now: datetime) -> datetime | None:
        row = (await self._tx.rows(NEXT_DEADLINE, {"b_now": now}))[0]
        moments = [m for m in row if m is not None]
        return min(moments, default=None)

    async def queue_stats(self, node_id: str) -> QueueStats:
        row = (await self._tx.rows(QUEUE_STATS, {"b_node": node_id}))[0]
        total, in_flight, oldest = row[0], row[1], row[2]
        return QueueStats(
            backlog=int(total) - int(in_flight), in_flight=int(in_flight), oldest_waiting=oldest
        )

    async def count_locked(self) -> int:
        return int(await self._tx.scalar(COUNT_LOCKED))
