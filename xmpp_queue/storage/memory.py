"""MemoryStore: the in-memory twin of the SQL store, for unit tests and the demo.

It implements :mod:`xmpp_queue.core.ports` with dicts and imports only the core
and the standard library, so the core's unit tests stay fast and free of
SQLAlchemy. The storage contract suite (``tests/storage``) runs the same tests
on this store and on SQLite and PostgreSQL, so the two cannot drift apart.

Two simplifications, both safe for how the core uses a store:

- **No rollback.** Writes are applied immediately and a transaction left without
  ``commit()`` keeps them. The core guards before it writes (a raised
  :class:`~xmpp_queue.core.errors.PubSubError` never leaves a change behind),
  so only a bug or a driver failure would need a rollback, and this store has
  no driver to fail.
- **Orders are insertion orders.** Dicts keep insertion order, and items are
  inserted with a strictly increasing ``seq``, so a node's item dict is in
  publish order and its subscription dict in creation order (what the SQL store
  gets from its surrogate keys).

Transactions are serialised with one :class:`asyncio.Lock`, as the SQL store's
write transactions are (SQLite ``BEGIN IMMEDIATE``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from xmpp_queue.core.errors import NodeExists, PageNotFound
from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import (
    Affiliation,
    AffiliationEntry,
    Item,
    ItemPage,
    Node,
    NodeConfig,
    PageRequest,
    Subscription,
    bare,
)
from xmpp_queue.core.ports import (
    AffiliationRepository,
    EventLedger,
    ItemRepository,
    NodeRepository,
    QueueStats,
    Store,
    SubscriptionRepository,
    Transaction,
)


def _utc(value: datetime) -> datetime:
    """Aware UTC, as the SQL store returns it; naive datetimes are refused there too."""
    if value.tzinfo is UTC:
        return value
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r}: storage needs aware UTC datetimes")
    return value.astimezone(UTC)


def _utc_opt(value: datetime | None) -> datetime | None:
    return None if value is None else _utc(value)


def _utc_item(item: Item) -> Item:
    return dataclasses.replace(
        item,
        published_at=_utc(item.published_at),
        updated_at=_utc(item.updated_at),
        locked_at=_utc_opt(item.locked_at),
        lock_expires_at=_utc_opt(item.lock_expires_at),
        available_at=_utc_opt(item.available_at),
        headers=dict(item.headers),
    )


def _utc_subscription(sub: Subscription) -> Subscription:
    return dataclasses.replace(
        sub, created_at=_utc(sub.created_at), last_activity=_utc_opt(sub.last_activity)
    )


@dataclasses.dataclass(slots=True)
class _State:
    """Everything the store holds; shared by all its transactions."""

    nodes: dict[str, Node] = dataclasses.field(default_factory=dict)
    affiliations: dict[tuple[str, str], Affiliation] = dataclasses.field(default_factory=dict)
    # node_id -> subid -> subscription (creation order)
    subscriptions: dict[str, dict[str, Subscription]] = dataclasses.field(default_factory=dict)
    # node_id -> item_id -> item (publish order)
    items: dict[str, dict[str, Item]] = dataclasses.field(default_factory=dict)
    # (node_id, subid) -> creation number, for creation order across nodes
    sub_order: dict[tuple[str, str], int] = dataclasses.field(default_factory=dict)
    ledger: list[LedgerEvent] = dataclasses.field(default_factory=list)
    seq: itertools.count[int] = dataclasses.field(default_factory=lambda: itertools.count(1))
    sub_seq: itertools.count[int] = dataclasses.field(default_factory=lambda: itertools.count(1))


class MemoryNodes:
    def __init__(self, state: _State) -> None:
        self._s = state

    async def get(self, node_id: str) -> Node | None:
        return self._s.nodes.get(node_id)

    async def add(self, node: Node) -> None:
        if node.node_id in self._s.nodes:
            raise NodeExists(node.node_id)
        self._s.nodes[node.node_id] = dataclasses.replace(node, created_at=_utc(node.created_at))

    async def update_config(self, node_id: str, config: NodeConfig) -> None:
        node = self._s.nodes.get(node_id)
        if node is not None:
            self._s.nodes[node_id] = dataclasses.replace(node, config=config)

    async def remove(self, node_id: str) -> None:
        self._s.nodes.pop(node_id, None)
        self._s.items.pop(node_id, None)
        for subid in self._s.subscriptions.pop(node_id, {}):
            self._s.sub_order.pop((node_id, subid), None)
        for key in [k for k in self._s.affiliations if k[0] == node_id]:
            del self._s.affiliations[key]

    async def all(self) -> list[Node]:
        return [self._s.nodes[k] for k in sorted(self._s.nodes)]


class MemoryAffiliations:
    def __init__(self, state: _State) -> None:
        self._s = state

    async def get(self, node_id: str, jid: str) -> Affiliation:
        return self._s.affiliations.get((node_id, jid), Affiliation.NONE)

    async def set(self, node_id: str, jid: str, affiliation: Affiliation) -> None:
        if affiliation is Affiliation.NONE:
            self._s.affiliations.pop((node_id, jid), None)
        else:
            self._s.affiliations[(node_id, jid)] = affiliation

    async def for_node(self, node_id: str) -> list[AffiliationEntry]:
        found = [AffiliationEntry(n, j, a) for (n, j), a in self._s.affiliations.items()]
        return sorted((e for e in found if e.node == node_id), key=lambda e: e.jid)

    async def for_jid(self, jid: str) -> list[AffiliationEntry]:
        found = [AffiliationEntry(n, j, a) for (n, j), a in self._s.affiliations.items()]
        return sorted((e for e in found if e.jid == jid), key=lambda e: e.node)


class MemorySubscriptions:
    def __init__(self, state: _State) -> None:
        self._s = state

    def _every(self) -> Iterable[Subscription]:
        """Every subscription in creation order across nodes (the SQL surrogate id order)."""
        return sorted(
            (s for subs in self._s.subscriptions.values() for s in subs.values()),
            key=lambda s: self._s.sub_order[(s.node, s.subid)],
        )

    async def add(self, subscription: Subscription) -> None:
        self._s.sub_order[(subscription.node, subscription.subid)] = next(self._s.sub_seq)
        subs = self._s.subscriptions.setdefault(subscription.node, {})
        subs[subscription.subid] = _utc_subscription(subscription)

    async def update(self, subscription: Subscription) -> None:
        subs = self._s.subscriptions.get(subscription.node, {})
        if subscription.subid in subs:
            subs[subscription.subid] = _utc_subscription(subscription)

    async def remove(self, node_id: str, subid: str) -> None:
        self._s.subscriptions.get(node_id, {}).pop(subid, None)
        self._s.sub_order.pop((node_id, subid), None)

    async def get(self, node_id: str, subid: str) -> Subscription | None:
        return self._s.subscriptions.get(node_id, {}).get(subid)

    async def for_node(self, node_id: str) -> list[Subscription]:
        return list(self._s.subscriptions.get(node_id, {}).values())

    async def for_jid(self, jid: str, node_id: str | None = None) -> list[Subscription]:
        if node_id is not None:
            return [s for s in await self.for_node(node_id) if s.jid == jid]
        return [s for s in self._every() if s.jid == jid]

    async def for_account(self, bare_jid: str) -> list[Subscription]:
        return [s for s in self._every() if bare(s.jid) == bare_jid]

    async def count(self) -> int:
        return sum(len(subs) for subs in self._s.subscriptions.values())


def page_of(items: list[Item], request: PageRequest) -> ItemPage:
    """XEP-0059 over a node's items in publish order (shared rules, plain list).

    No paging field at all returns everything unpaged. ``after``/``before`` are
    exclusive item ids (PageNotFound when unknown), ``before == ""`` is the last
    page, ``index`` an offset; ``max`` caps the page (taken from the end when
    paging backwards). ``first_index`` is None when the page is empty.
    """
    r = request
    if r.max is None and r.after is None and r.before is None and r.index is None:
        return ItemPage(items=tuple(items), count=len(items))
    ids = [i.item_id for i in items]
    start, stop = 0, len(items)
    if r.after is not None:
        if r.after not in ids:
            raise PageNotFound(f"no item {r.after} to page after")
        start = ids.index(r.after) + 1
    if r.before:
        if r.before not in ids:
            raise PageNotFound(f"no item {r.before} to page before")
        stop = ids.index(r.before)
    if r.index is not None and r.after is None and r.before is None:
        start = max(0, r.index)
    start = min(start, stop)
    limit = max(0, r.max) if r.max is not None else None
    if r.before is not None and limit is not None:
        start = max(start, stop - limit)
    elif limit is not None:
        stop = min(stop, start + limit)
    chosen = tuple(items[start:stop])
    return ItemPage(
        items=chosen, count=len(items), first_index=start if chosen else None, paged=True
    )


class MemoryItems:
    def __init__(self, state: _State) -> None:
        self._s = state

    def _node(self, node_id: str) -> dict[str, Item]:
        return self._s.items.get(node_id, {})

    async def put(self, item: Item) -> Item:
        stored = dataclasses.replace(_utc_item(item), seq=next(self._s.seq))
        self._s.items.setdefault(item.node, {})[item.item_id] = stored
        return stored

    async def replace_payload(
        self,
        node_id: str,
        item_id: str,
        payload: str | None,
        size: int,
        publisher: str,
        at: datetime,
    ) -> None:
        items = self._node(node_id)
        old = items.get(item_id)
        if old is not None:
            items[item_id] = dataclasses.replace(
                old, payload=payload, payload_size=size, publisher=publisher, updated_at=_utc(at)
            )

    async def get(self, node_id: str, item_id: str) -> Item | None:
        return self._node(node_id).get(item_id)

    async def remove(self, node_id: str, item_id: str) -> bool:
        return self._node(node_id).pop(item_id, None) is not None

    async def remove_all(self, node_id: str) -> list[Item]:
        return list(self._s.items.pop(node_id, {}).values())

    async def count(self, node_id: str) -> int:
        return len(self._node(node_id))

    async def count_all(self) -> int:
        return sum(len(items) for items in self._s.items.values())

    async def page(self, node_id: str, request: PageRequest) -> ItemPage:
        return page_of(list(self._node(node_id).values()), request)

    async def latest(self, node_id: str, limit: int) -> list[Item]:
        if limit <= 0:
            return []
        return list(self._node(node_id).values())[-limit:]

    async def oldest_ids(self, node_id: str, limit: int) -> list[str]:
        return list(itertools.islice(self._node(node_id), max(0, limit)))

    # --- queue state ---------------------------------------------------------------

    async def next_ready(self, node_id: str, now: datetime, limit: int) -> list[Item]:
        ready = (
            i
            for i in self._node(node_id).values()
            if i.locked_by is None and (i.available_at is None or i.available_at <= now)
        )
        return list(itertools.islice(ready, max(0, limit)))

    async def lock(
        self, node_id: str, item_id: str, subid: str, jid: str, now: datetime, expires_at: datetime
    ) -> bool:
        items = self._node(node_id)
        item = items.get(item_id)
        if item is None or item.locked_by is not None:
            return False
        items[item_id] = dataclasses.replace(
            item,
            locked_by=subid,
            lock_jid=jid,
            locked_at=_utc(now),
            lock_expires_at=_utc(expires_at),
            available_at=None,
            deliveries=item.deliveries + 1,
        )
        return True

    async def unlock(
        self, node_id: str, item_id: str, subid: str, available_at: datetime | None
    ) -> bool:
        items = self._node(node_id)
        item = items.get(item_id)
        if item is None or item.locked_by != subid:
            return False
        items[item_id] = dataclasses.replace(
            item,
            locked_by=None,
            lock_jid=None,
            locked_at=None,
            lock_expires_at=None,
            available_at=_utc_opt(available_at),
        )
        return True

    async def extend(self, node_id: str, item_id: str, subid: str, expires_at: datetime) -> bool:
        items = self._node(node_id)
        item = items.get(item_id)
        if item is None or item.locked_by != subid:
            return False
        items[item_id] = dataclasses.replace(item, lock_expires_at=_utc(expires_at))
        return True

    async def in_flight(self, node_id: str) -> dict[str, int]:
        loads: dict[str, int] = {}
        for item in self._node(node_id).values():
            if item.locked_by is not None:
                loads[item.locked_by] = loads.get(item.locked_by, 0) + 1
        return loads

    async def locked_by(self, node_id: str, subid: str) -> list[Item]:
        return [i for i in self._node(node_id).values() if i.locked_by == subid]

    async def locked(self, node_id: str) -> list[Item]:
        return [i for i in self._node(node_id).values() if i.locked_by is not None]

    def _every_locked(self) -> Iterable[Item]:
        for items in self._s.items.values():
            for item in items.values():
                if item.locked_by is not None:
                    yield item

    async def expired_locks(self, now: datetime, limit: int) -> list[Item]:
        due = [i for i in self._every_locked() if i.lock_expires_at and i.lock_expires_at <= now]
        due.sort(key=lambda i: (i.lock_expires_at or now, i.seq))
        return due[: max(0, limit)]

    async def next_deadline(self, now: datetime) -> datetime | None:
        moments = [i.lock_expires_at for i in self._every_locked() if i.lock_expires_at]
        moments += [
            i.available_at
            for items in self._s.items.values()
            for i in items.values()
            if i.locked_by is None and i.available_at is not None and i.available_at > now
        ]
        return min(moments, default=None)

    async def queue_stats(self, node_id: str) -> QueueStats:
        waiting = [i for i in self._node(node_id).values() if i.locked_by is None]
        return QueueStats(
            backlog=len(waiting),
            in_flight=len(self._node(node_id)) - len(waiting),
            oldest_waiting=min((i.published_at for i in waiting), default=None),
        )

    async def count_locked(self) -> int:
        return sum(1 for _ in self._every_locked())


class MemoryLedger:
    def __init__(self, state: _State) -> None:
        self._s = state

    def append(self, event: LedgerEvent) -> None:
        self._s.ledger.append(dataclasses.replace(event, at=_utc(event.at)))

    async def count(self, node_id: str, kind: EventKind, since: datetime) -> int:
        return sum(
            1 for e in self._s.ledger if e.node == node_id and e.kind == kind and e.at >= since
        )

    async def events(self, node_id: str | None = None) -> list[LedgerEvent]:
        return [e for e in self._s.ledger if node_id is None or e.node == node_id]


class MemoryTransaction:
    """One "transaction": repositories over the shared state (writes apply at once)."""

    def __init__(self, state: _State) -> None:
        self.nodes: NodeRepository = MemoryNodes(state)
        self.affiliations: AffiliationRepository = MemoryAffiliations(state)
        self.subscriptions: SubscriptionRepository = MemorySubscriptions(state)
        self.items: ItemRepository = MemoryItems(state)
        self.ledger: EventLedger = MemoryLedger(state)
        self.committed = False

    async def commit(self) -> None:
        self.committed = True


class MemoryStore:
    """A :class:`~xmpp_queue.core.ports.Store` held in dicts (see the module docstring)."""

    def __init__(self) -> None:
        self._state = _State()
        self._lock = asyncio.Lock()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Transaction]:
        async with self._lock:
            yield MemoryTransaction(self._state)

    async def close(self) -> None:
        """Nothing to release; the data lives as long as the store object."""


def _conforms(store: MemoryStore) -> Store:
    """Let mypy check that MemoryStore satisfies the Store protocol."""
    return store
