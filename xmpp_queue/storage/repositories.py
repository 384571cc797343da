"""The core's repositories over the write-behind store's memory.

Reads answer from :class:`MemoryState` alone; writes record the key's
original value in the transaction's :class:`ChangeSet` first and then change
memory through :meth:`MemoryState.set_item` (items) or the node's dicts, so
the next operation of the same batch sees them. Guards that the SQL store gets
from constraints (a missing node, a duplicate key) raise ``ValueError`` here
before anything changes: the core checks first, so these mean a bug, and the
commit batcher answers a bug by rolling the batch back.

The items repository has modules of its own (``items_repo`` and its parts
``items_retained``, ``items_queue``, ``payload_warming``); this module holds the
nodes, affiliations, subscriptions and ledger repositories.

Only the ledger reads the database (``count``/``events``: history is not kept
in memory); they see the committed rows plus this transaction's pending ones.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Protocol

from xmpp_queue.core.errors import NodeExists
from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import (
    Affiliation,
    AffiliationEntry,
    Node,
    NodeConfig,
    Snapshot,
    Subscription,
)
from xmpp_queue.core.topic_bindings import Binding
from xmpp_queue.storage.changes import ChangeSet
from xmpp_queue.storage.item_values import utc, utc_opt
from xmpp_queue.storage.node_state import NodeState
from xmpp_queue.storage.state import MemoryState


def node_state_of(state: MemoryState, node_id: str) -> NodeState:
    """The node's state; a missing node is a bug of the caller (the core creates it first)."""
    ns = state.nodes.get(node_id)
    if ns is None:
        raise ValueError(f"no node {node_id!r} (the core must create it first)")
    return ns


class NodesRepo:
    def __init__(self, state: MemoryState, changes: ChangeSet) -> None:
        self._s = state
        self._c = changes

    async def get(self, node_id: str) -> Node | None:
        ns = self._s.nodes.get(node_id)
        return ns.node if ns is not None else None

    async def add(self, node: Node) -> None:
        if node.node_id in self._s.nodes:
            raise NodeExists(node.node_id)
        created = utc(node.created_at)
        if created is not node.created_at:
            node = dataclasses.replace(node, created_at=created)
        self._c.touch_node(node.node_id)
        self._s.nodes[node.node_id] = NodeState(node)
        self._s.note_binding(node)

    async def update_config(self, node_id: str, config: NodeConfig) -> None:
        ns = self._s.nodes.get(node_id)
        if ns is not None:
            self._c.touch_node(node_id)
            ns.node = dataclasses.replace(ns.node, config=config)
            self._s.note_binding(ns.node)

    async def remove(self, node_id: str) -> None:
        if node_id in self._s.nodes:
            self._c.touch_node(node_id)
            self._c.dropped.add(node_id)
            self._s.drop_node(node_id)

    async def all(self) -> list[Node]:
        return [ns.node for _, ns in sorted(self._s.nodes.items())]

    async def bindings(self, topic: str) -> tuple[Binding, ...]:
        return self._s.bindings(topic)

    async def note_unused(self, node_id: str, now: datetime) -> bool:
        ns = self._s.nodes.get(node_id)
        return ns is not None and self._s.unused.file(ns, now)

    async def unused_due(self, now: datetime, limit: int) -> list[str]:
        if limit <= 0:
            return []
        return self._s.unused.due(self._s.nodes, now, limit)

    async def snapshots(self, node_id: str) -> list[Snapshot]:
        ns = self._s.nodes.get(node_id)
        return sorted(ns.snapshots.values(), key=lambda x: x.name) if ns is not None else []

    async def take_snapshot(self, node_id: str, name: str, at: datetime) -> Snapshot:
        ns = node_state_of(self._s, node_id)
        snapshot = Snapshot(node_id, name, utc(at), self._s.next_seq)
        self._c.touch_node(node_id)
        ns.snapshots = {**ns.snapshots, name: snapshot}  # replaced: a node-level change
        return snapshot

    async def drop_snapshot(self, node_id: str, name: str) -> bool:
        ns = self._s.nodes.get(node_id)
        if ns is None or name not in ns.snapshots:
            return False
        self._c.touch_node(node_id)
        ns.snapshots = {k: v for k, v in ns.snapshots.items() if k != name}
        return True


class AffiliationsRepo:
    def __init__(self, state: MemoryState, changes: ChangeSet) -> None:
        self._s = state
        self._c = changes

    async def get(self, node_id: str, jid: str) -> Affiliation:
        ns = self._s.nodes.get(node_id)
        if ns is None:
            return Affiliation.NONE
        return ns.affiliations.get(jid, Affiliation.NONE)

    async def set(self, node_id: str, jid: str, affiliation: Affiliation) -> None:
        ns = self._s.nodes.get(node_id)
        if ns is None:
            if affiliation is Affiliation.NONE:
                return
            ns = node_state_of(self._s, node_id)
        if affiliation is Affiliation.NONE:
            if jid in ns.affiliations:
                self._c.touch_affiliation(node_id, jid)
                del ns.affiliations[jid]
            return
        self._c.touch_affiliation(node_id, jid)
        ns.affiliations[jid] = affiliation

    async def for_node(self, node_id: str) -> list[AffiliationEntry]:
        ns = self._s.nodes.get(node_id)
        if ns is None:
            return []
        return [AffiliationEntry(node_id, j, a) for j, a in sorted(ns.affiliations.items())]

    async def for_jid(self, jid: str) -> list[AffiliationEntry]:
        return [
            AffiliationEntry(node_id, jid, ns.affiliations[jid])
            for node_id, ns in sorted(self._s.nodes.items())
            if jid in ns.affiliations
        ]


def _utc_subscription(sub: Subscription) -> Subscription:
    created, last = utc(sub.created_at), utc_opt(sub.last_activity)
    if created is sub.created_at and last is sub.last_activity:
        return sub
    return dataclasses.replace(sub, created_at=created, last_activity=last)


class SubscriptionsRepo:
    def __init__(self, state: MemoryState, changes: ChangeSet) -> None:
        self._s = state
        self._c = changes

    async def add(self, subscription: Subscription) -> None:
        sub = _utc_subscription(subscription)
        ns = node_state_of(self._s, sub.node)
        if sub.subid in ns.subs:
            raise ValueError(f"subscription {sub.subid!r} exists on node {sub.node!r}")
        self._c.touch_sub(sub.node, sub.subid)
        ns.subs[sub.subid] = sub
        ns.sub_ids[sub.subid] = self._s.next_sub_id
        self._s.next_sub_id += 1
        self._s.subscribers.index_sub(ns, sub)
        self._s.unused.touch(sub.node)

    async def update(self, subscription: Subscription) -> None:
        sub = _utc_subscription(subscription)
        ns = self._s.nodes.get(sub.node)
        if ns is not None and sub.subid in ns.subs:
            self._c.touch_sub(sub.node, sub.subid)
            ns.subs[sub.subid] = sub
            self._s.subscribers.index_sub(ns, sub)

    async def remove(self, node_id: str, subid: str) -> None:
        ns = self._s.nodes.get(node_id)
        if ns is not None and subid in ns.subs:
            self._c.touch_sub(node_id, subid)
            del ns.subs[subid]
            del ns.sub_ids[subid]
            self._s.unused.touch(node_id)

    async def get(self, node_id: str, subid: str) -> Subscription | None:
        ns = self._s.nodes.get(node_id)
        return ns.subs.get(subid) if ns is not None else None

    async def for_node(self, node_id: str) -> list[Subscription]:
        ns = self._s.nodes.get(node_id)
        return list(ns.subs.values()) if ns is not None else []

    async def for_jid(self, jid: str, node_id: str | None = None) -> list[Subscription]:
        return self._s.subscribers.subs_of_jid(jid, node_id)

    async def for_account(self, bare_jid: str) -> list[Subscription]:
        return self._s.subscribers.subs_of_account(bare_jid)

    async def next_with_room(self, node_id: str, avoid: str | None = None) -> Subscription | None:
        ns = self._s.nodes.get(node_id)
        return self._s.subscribers.next_with_room(ns, avoid) if ns is not None else None

    async def count(self) -> int:
        return sum(len(ns.subs) for ns in self._s.nodes.values())


class LedgerReader(Protocol):
    """The database side of ledger reads (committed rows only)."""

    async def ledger_count(self, node_id: str, kind: EventKind, since: datetime) -> int: ...

    async def ledger_events(self, node_id: str | None) -> list[LedgerEvent]: ...


class LedgerRepo:
    """Appends are buffered until commit; reads are committed rows + pending ones."""

    def __init__(self, changes: ChangeSet, reader: LedgerReader) -> None:
        self._c = changes
        self._reader = reader

    def append(self, event: LedgerEvent) -> None:
        if event.at.tzinfo is not UTC:
            event = dataclasses.replace(event, at=utc(event.at))
        self._c.events.append(event)

    async def count(self, node_id: str, kind: EventKind, since: datetime) -> int:
        stored = await self._reader.ledger_count(node_id, kind, since)
        pending = sum(
            1 for e in self._c.events if e.node == node_id and e.kind == kind and e.at >= since
        )
        return stored + pending

    async def events(self, node_id: str | None = None) -> list[LedgerEvent]:
        stored = await self._reader.ledger_events(node_id)
        return stored + [e for e in self._c.events if node_id is None or e.node == node_id]
