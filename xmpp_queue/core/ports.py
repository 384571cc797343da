"""The interfaces the core needs from the outside world; storage implements them.

The core owns these (storage imports core, never the reverse). They are shaped
for queues: a queue can hold millions of items, so nothing loads a whole node;
dispatch asks for the next few ready items and for the per-subscriber loads,
and locks are taken and released with conditional writes that report whether
they won (a lock taken twice, an ack racing a timeout: the loser sees False).

One :class:`Transaction` is one database transaction. The service runs a batch
of operations in one transaction and commits once (group commit), so nothing
here commits on its own. A repository raises core errors, never driver errors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import (
    Affiliation,
    AffiliationEntry,
    Item,
    ItemPage,
    Node,
    NodeConfig,
    PageRequest,
    Snapshot,
    Subscription,
)
from xmpp_queue.core.topic_bindings import Binding


class Clock(Protocol):
    """Returns the current time as an aware UTC datetime."""

    def __call__(self) -> datetime: ...


class IdFactory(Protocol):
    """Returns a new unique id (item ids, subids, instant node names)."""

    def __call__(self) -> str: ...


@dataclass(frozen=True, slots=True)
class QueueStats:
    """Counts of one queue node, for admins and status."""

    backlog: int  # items not locked (waiting, including delayed ones)
    in_flight: int  # locked items
    oldest_waiting: datetime | None  # published_at of the oldest unlocked item
    delayed: int = 0  # of the backlog: held back until a later time (delay, retry)


class NodeRepository(Protocol):
    async def get(self, node_id: str) -> Node | None: ...

    async def add(self, node: Node) -> None:
        """Insert; raises NodeExists if the id is taken."""

    async def update_config(self, node_id: str, config: NodeConfig) -> None: ...

    async def remove(self, node_id: str) -> None:
        """Delete the node with its items, subscriptions and affiliations."""

    async def all(self) -> list[Node]: ...

    async def bindings(self, topic: str) -> Sequence[Binding]:
        """The queue nodes whose ``queue_topic`` is *topic*, each with its compiled
        filter, ordered by queue id. Every publish to a topic asks this: it comes
        from an index kept exact at each change of a binding (never a scan of
        every node, nor a filter parsed per publish)."""

    async def note_unused(self, node_id: str, now: datetime) -> bool:
        """File *node_id* for deletion at *now* plus its ``queue_expire_after`` when
        it is a bound queue with that set and no subscriber, unless already filed
        since its last subscription change. True when newly filed."""

    async def unused_due(self, now: datetime, limit: int) -> list[str]:
        """Bound queues unsubscribed past their ``queue_expire_after`` by *now*,
        from an index (what is due, never a scan of every node)."""

    async def snapshots(self, node_id: str) -> list[Snapshot]:
        """The node's named snapshots, by name."""

    async def take_snapshot(self, node_id: str, name: str, at: datetime) -> Snapshot:
        """Record (or replace) snapshot *name* of the node as of now."""

    async def drop_snapshot(self, node_id: str, name: str) -> bool: ...


class AffiliationRepository(Protocol):
    async def get(self, node_id: str, jid: str) -> Affiliation:
        """The affiliation of a bare JID (Affiliation.NONE when there is none)."""

    async def set(self, node_id: str, jid: str, affiliation: Affiliation) -> None:
        """Set or (with Affiliation.NONE) remove the affiliation of a bare JID."""

    async def for_node(self, node_id: str) -> list[AffiliationEntry]: ...

    async def for_jid(self, jid: str) -> list[AffiliationEntry]: ...


class SubscriptionRepository(Protocol):
    async def add(self, subscription: Subscription) -> None: ...

    async def update(self, subscription: Subscription) -> None:
        """Replace the stored subscription with the same (node, subid)."""

    async def remove(self, node_id: str, subid: str) -> None: ...

    async def get(self, node_id: str, subid: str) -> Subscription | None: ...

    async def for_node(self, node_id: str) -> list[Subscription]:
        """Every subscription of a node, oldest first (dispatch's round-robin order)."""

    async def for_jid(self, jid: str, node_id: str | None = None) -> list[Subscription]:
        """Subscriptions held by exactly this JID string (bare or full), oldest first;
        costs what the JID holds, not the number of subscriptions."""

    async def for_account(self, bare_jid: str) -> list[Subscription]:
        """Subscriptions of every JID with this bare JID, on every node."""

    async def next_with_room(self, node_id: str, avoid: str | None = None) -> Subscription | None:
        """The queue subscription the next item goes to (``core.queue.dispatch``'s
        rule), not *avoid* while another has room; None when nobody has room.
        O(log subscribers): dispatch asks it at the end of every queue operation."""

    async def count(self) -> int: ...


class ItemRepository(Protocol):
    async def put(self, item: Item) -> Item:
        """Insert a new item; the store assigns ``seq`` (publish order) and returns it."""

    async def replace_payload(
        self,
        node_id: str,
        item_id: str,
        payload: str | None,
        size: int,
        publisher: str,
        at: datetime,
        headers: Mapping[str, str] | None = None,
        priority: int | None = None,
        expires_at: datetime | None = None,
    ) -> None:
        """Re-publish of an existing id: new payload (and, when given, attributes,
        priority and expiry); queue state and position kept."""

    async def get(self, node_id: str, item_id: str) -> Item | None: ...

    async def remove(self, node_id: str, item_id: str) -> bool:
        """Delete; False when it was already gone."""

    async def move(
        self,
        node_id: str,
        item_id: str,
        target_node: str,
        target_item_id: str,
        headers: Mapping[str, str],
        at: datetime,
    ) -> Item:
        """Move an item to another node in one step (dead letters, redrive).

        It leaves *node_id* and becomes *target_item_id* of *target_node*: last in
        publish order, unlocked, with no deliveries, published at *at*, its payload
        and publisher kept, its headers replaced by *headers*. An item with that id
        already in the target is replaced. Both nodes must exist; returns the item.
        """

    async def remove_all(self, node_id: str) -> list[Item]:
        """Purge: delete every item of the node and return them (payloads may be None).
        Its retained items go too (not returned)."""

    # --- retention (pubsub#queue_retain_acked) --------------------------------------

    async def retain(self, node_id: str, item_id: str, at: datetime) -> bool:
        """The ack of a retaining queue: the item leaves the queue (no index, no
        count) and is kept, acked at *at*, payload in the database. False: gone."""

    async def retained(self, node_id: str) -> list[Item]:
        """The node's retained items in publish order (payloads None: metadata)."""

    async def retained_count(self, node_id: str) -> int: ...

    async def restore(self, node_id: str, item_id: str, at: datetime) -> Item | None:
        """A retained item back in the queue: waiting, a fresh delivery count, its
        old place in publish order. None when not retained (or the id is in use)."""

    async def drop_retained(self, node_id: str, item_id: str) -> bool: ...

    async def expired_retained(self, now: datetime, limit: int) -> list[Item]:
        """Retained items whose retention ended by *now*, earliest first, from an
        index (never a scan); they stay until dropped."""

    async def count(self, node_id: str) -> int: ...

    async def payload_bytes(self, node_id: str) -> int:
        """The payload bytes of every item of the node (``pubsub#max_bytes``), O(1)."""

    async def oldest_waiting(self, node_id: str, limit: int) -> list[Item]:
        """Up to *limit* unlocked items in publish order (a truncation's victims)."""

    async def count_all(self) -> int: ...

    async def page(
        self, node_id: str, request: PageRequest, max_bytes: int | None = None
    ) -> ItemPage:
        """XEP-0059 paging over the node's items in publish order; raises PageNotFound.

        Costs the page, not the node (no copy of its items). ``max_bytes``: the page
        stops before its payloads pass this many bytes (``paging.trim_to_bytes``)."""

    async def latest(self, node_id: str, limit: int) -> list[Item]:
        """The *limit* most recently published items, oldest first (§6.5.7 max_items)."""

    async def oldest_ids(self, node_id: str, limit: int) -> list[str]:
        """Ids of the *limit* oldest items (for max_items trimming)."""

    # --- queue state ---------------------------------------------------------------

    async def next_ready(self, node_id: str, now: datetime, limit: int) -> list[Item]:
        """Unlocked items whose ``available_at`` is unset or <= now, in publish order."""

    async def lock(
        self, node_id: str, item_id: str, subid: str, jid: str, now: datetime, expires_at: datetime
    ) -> bool:
        """Lock an unlocked item to a subscription and count a delivery.

        Conditional: False (and no change) when the item is gone or already locked.
        """

    async def unlock(
        self,
        node_id: str,
        item_id: str,
        subid: str,
        available_at: datetime | None,
        headers: Mapping[str, str] | None = None,
    ) -> bool:
        """Release a lock held by *subid*; False when it is not (any more) held by it.
        *headers*, when given, replace the item's (a failure's reason kept with it)."""

    async def extend(self, node_id: str, item_id: str, subid: str, expires_at: datetime) -> bool:
        """Move the deadline of a lock held by *subid*; False when it is not held by it."""

    async def in_flight(self, node_id: str) -> dict[str, int]:
        """Locked item counts per holding subid."""

    async def held_by(self, node_id: str, subid: str) -> int:
        """How many items *subid* holds on *node_id*: one subscriber's count, without
        reading every holder's (a dispatch asks it for each batch it waits for)."""

    async def locked_by(self, node_id: str, subid: str) -> list[Item]: ...

    async def locked(self, node_id: str) -> list[Item]: ...

    async def expired_waiting(self, now: datetime, limit: int) -> list[Item]:
        """Unlocked items whose ``expires_at`` is <= *now*, earliest first (an
        index, never a scan of the backlog)."""

    async def finished_since(self, node_id: str, item_id: str, since: datetime) -> bool:
        """Whether *item_id* was acked or retracted on *node_id* at or after
        *since* (the dedup window), in this transaction or a committed one."""

    async def expired_locks(self, now: datetime, limit: int) -> list[Item]:
        """Locked items whose deadline is <= now, earliest first, over all nodes."""

    async def due_delayed_nodes(self, now: datetime, limit: int) -> list[str]:
        """Up to *limit* nodes whose delayed items (retry back-off, a later start)
        came due by *now*, earliest first; those items are ready from now on, so the
        caller dispatches these nodes. Nodes with nothing due are never looked at."""

    async def hold_dispatch(self, node_id: str, until: datetime) -> None:
        """Wake *node_id*'s dispatch at *until*: it is holding a short batch for a
        subscriber (``pubsub#queue_batch_wait``). A hint, kept in memory only."""

    async def due_held_nodes(self, now: datetime, limit: int) -> list[str]:
        """Up to *limit* existing nodes whose dispatch hold ended by *now*, taken off
        the holds: the caller dispatches them."""

    async def next_deadline(self, now: datetime) -> datetime | None:
        """The earliest moment a timer must fire: a lock deadline, a waiting item's
        expiry, the time a node's delayed items come due, or a dispatch hold's end. It
        may be past (overdue: a tick is due at once) until a tick has taken what came
        due."""

    async def queue_stats(self, node_id: str) -> QueueStats: ...

    async def count_locked(self) -> int: ...


class EventLedger(Protocol):
    def append(self, event: LedgerEvent) -> None:
        """Record an event in the current transaction (may be buffered until commit)."""

    async def count(self, node_id: str, kind: EventKind, since: datetime) -> int: ...

    async def events(self, node_id: str | None = None) -> list[LedgerEvent]:
        """Every event (of a node), in order: for tests and small exports."""


class Savepoint(Protocol):
    """A mark inside a transaction: one operation's changes, undone or kept as a whole."""

    def rollback(self) -> None:
        """Undo every change (state and ledger rows) made since the mark."""

    def release(self) -> None:
        """Keep the changes made since the mark as part of the transaction."""


class Transaction(Protocol):
    """One database transaction with its repositories; rolled back unless committed."""

    nodes: NodeRepository
    affiliations: AffiliationRepository
    subscriptions: SubscriptionRepository
    items: ItemRepository
    ledger: EventLedger

    def savepoint(self) -> Savepoint:
        """Mark the current state; savepoints nest and end innermost first."""

    async def commit(self) -> None:
        """Write what changed and wait until it is durable (raises if it is not)."""

    async def hand_off(self) -> asyncio.Future[None]:
        """Start writing what changed; the future resolves once it is durable.

        The commit pipeline: the next transaction may run while this one's write
        is in flight, and hands off only after it settled. Raises (with this
        transaction's changes undone) if the commit in flight before it failed;
        the future fails if this one's write does. Either way memory is back at
        the last durable state, and nothing may be answered or sent as done."""


class Store(Protocol):
    """A storage backend: hands out transactions."""

    def transaction(self) -> AbstractAsyncContextManager[Transaction]:
        """Begin a transaction; leaving the block without commit() rolls it back."""

    async def close(self) -> None: ...


__all__: Sequence[str] = (
    "AffiliationRepository",
    "Clock",
    "EventLedger",
    "IdFactory",
    "ItemRepository",
    "NodeRepository",
    "QueueStats",
    "Savepoint",
    "Store",
    "SubscriptionRepository",
    "Transaction",
)
