"""The core's repositories over the write-behind store's memory.

Reads answer from :class:`MemoryState` alone; writes record the key's
original value in the transaction's :class:`ChangeSet` first and then change
memory through :meth:`MemoryState.set_item` (items) or the node's dicts, so
the next operation of the same batch sees them. Guards that the SQL store gets
from constraints (a missing node, a duplicate key) raise ``ValueError`` here
before anything changes: the core checks first, so these mean a bug, and the
commit batcher answers a bug by rolling the batch back.

Only the ledger reads the database (``count``/``events``: history is not kept
in memory); they see the committed rows plus this transaction's pending ones.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Protocol

from xmpp_queue.core.errors import NodeExists
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
    copy_item,
    new_item,
)
from xmpp_queue.core.paging import is_backward, is_unpaged, page_bounds, trim_to_bytes
from xmpp_queue.core.ports import QueueStats
from xmpp_queue.storage import backlog
from xmpp_queue.storage.backlog import ColdReader
from xmpp_queue.storage.changes import ChangeSet
from xmpp_queue.storage.state import (
    COLD,
    PREFETCH,
    MemoryState,
    NodeState,
    frozen_headers,
    stored_item,
    utc,
    utc_opt,
    with_deadline,
    with_lock,
    with_payload,
    with_payload_value,
    without_lock,
)


def _node_state(state: MemoryState, node_id: str) -> NodeState:
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

    async def bound_to(self, topic: str) -> list[Node]:
        return self._s.bound_to(topic)

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
        ns = _node_state(self._s, node_id)
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
            ns = _node_state(self._s, node_id)
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
        ns = _node_state(self._s, sub.node)
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


class PayloadReader(ColdReader, Protocol):
    """Fetches payloads and cold items kept in the database (committed items only)."""

    async def payloads(self, node_id: str, item_ids: list[str]) -> dict[str, str | None]: ...


class ItemsRepo:
    def __init__(self, state: MemoryState, changes: ChangeSet, reader: PayloadReader) -> None:
        self._s = state
        self._c = changes
        self._reader = reader

    async def _warm(
        self, ns: NodeState, items: list[Item], also: list[str] | None = None
    ) -> list[Item]:
        """*items* with every payload in hand: the cold ones (and the cold ones
        among the ids in *also*, a prefetch) are fetched in one query and kept."""
        cold = [i.item_id for i in items if i.payload is COLD]
        if not cold:
            return items
        stored = ns.items
        if also:
            cold += [x for x in also if (i := stored.get(x)) is not None and i.payload is COLD]
        fetched = await self._reader.payloads(ns.node.node_id, cold)
        for item_id in cold:
            current = stored.get(item_id)
            if current is not None and current.payload is COLD:
                # Same state, payload in hand: no index or change record moves.
                stored[item_id] = with_payload_value(current, fetched.get(item_id))
        return [stored.get(i.item_id, i) if i.payload is COLD else i for i in items]

    async def put(self, item: Item) -> Item:
        state = self._s
        ns = _node_state(state, item.node)
        if item.item_id in ns.items:
            raise ValueError(f"item {item.item_id!r} exists on node {item.node!r}")
        stored = stored_item(item, state.next_seq)
        state.next_seq += 1
        self._forget_retained(ns, item.item_id)
        self._c.touch_item(item.node, item.item_id)
        state.set_item(ns, item.item_id, stored)
        return stored

    def _forget_retained(self, ns: NodeState, item_id: str) -> None:
        """A new item with a retained item's id replaces it (one row per id)."""
        if item_id in ns.retained:
            self._c.touch_retained(ns.node.node_id, item_id)
            self._s.set_retained(ns, item_id, None)

    # --- retention (pubsub#queue_retain_acked) -----------------------------------------

    async def retain(self, node_id: str, item_id: str, at: datetime) -> bool:
        ns = self._s.nodes.get(node_id)
        item = await self._find(ns, item_id)
        if ns is None or item is None:
            return False
        kept = copy_item(
            without_lock(item, None), acked_at=utc(at), expires_at=None, updated_at=utc(at)
        )
        self._c.touch_item(node_id, item_id)
        self._s.set_item(ns, item_id, None)
        self._c.touch_retained(node_id, item_id)
        self._s.set_retained(ns, item_id, kept)
        return True

    async def retained(self, node_id: str) -> list[Item]:
        ns = self._s.nodes.get(node_id)
        if ns is None:
            return []
        found = sorted(ns.retained.values(), key=lambda i: i.seq)
        return [with_payload_value(i, None) if i.payload is COLD else i for i in found]

    async def retained_count(self, node_id: str) -> int:
        ns = self._s.nodes.get(node_id)
        return len(ns.retained) if ns is not None else 0

    async def restore(self, node_id: str, item_id: str, at: datetime) -> Item | None:
        ns = self._s.nodes.get(node_id)
        kept = ns.retained.get(item_id) if ns is not None else None
        if ns is None or kept is None or item_id in ns.items:
            return None
        back = copy_item(kept, acked_at=None, deliveries=0, updated_at=utc(at))
        self._c.touch_retained(node_id, item_id)
        self._s.set_retained(ns, item_id, None)
        self._c.touch_item(node_id, item_id)
        self._s.set_item(ns, item_id, back)
        ns.ordered = False  # an older seq at the end of the dict: sorted on demand
        return with_payload_value(back, None) if back.payload is COLD else back

    async def drop_retained(self, node_id: str, item_id: str) -> bool:
        ns = self._s.nodes.get(node_id)
        if ns is None or item_id not in ns.retained:
            return False
        self._c.touch_retained(node_id, item_id)
        self._s.set_retained(ns, item_id, None)
        return True

    async def expired_retained(self, now: datetime, limit: int) -> list[Item]:
        if limit <= 0:
            return []
        found = self._s.retention.due(self._s.nodes, now, limit)
        return [with_payload_value(i, None) if i.payload is COLD else i for i in found]

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
        ns = self._s.nodes.get(node_id)
        old = await self._find(ns, item_id)
        if ns is not None and old is not None:
            new = with_payload(old, payload, size, publisher, utc(at))
            if headers is not None:
                new = copy_item(
                    new,
                    headers=frozen_headers(headers),
                    priority=old.priority if priority is None else priority,
                    expires_at=utc_opt(expires_at),
                )
            self._c.touch_item(node_id, item_id)
            self._s.set_item(ns, item_id, new)

    async def _find(self, ns: NodeState | None, item_id: str) -> Item | None:
        """The item *item_id* of *ns*, brought back whole if it was cold."""
        if ns is None:
            return None
        found = ns.items.get(item_id)
        if found is None and ns.queue.tail:
            return await backlog.find(self._s, ns, self._reader, item_id)
        return found

    async def get(self, node_id: str, item_id: str) -> Item | None:
        ns = self._s.nodes.get(node_id)
        found = await self._find(ns, item_id)
        if found is not None and found.payload is COLD:
            assert ns is not None
            return (await self._warm(ns, [found]))[0]
        return found

    async def remove(self, node_id: str, item_id: str) -> bool:
        ns = self._s.nodes.get(node_id)
        if ns is None or await self._find(ns, item_id) is None:
            return False
        self._c.touch_item(node_id, item_id)
        self._s.set_item(ns, item_id, None)
        return True

    async def move(
        self,
        node_id: str,
        item_id: str,
        target_node: str,
        target_item_id: str,
        headers: Mapping[str, str],
        at: datetime,
    ) -> Item:
        state = self._s
        source = _node_state(state, node_id)
        target = _node_state(state, target_node)
        item = await self.get(node_id, item_id)  # with its payload in hand
        if item is None:
            raise ValueError(f"no item {item_id!r} on node {node_id!r} to move")
        when = utc(at)
        moved = stored_item(
            new_item(
                target_node,
                target_item_id,
                item.publisher,
                item.payload,
                item.payload_size,
                headers,
                when,
                priority=item.priority,
                ordering_key=item.ordering_key,
            ),
            state.next_seq,
        )
        state.next_seq += 1
        self._c.touch_item(node_id, item_id)
        state.set_item(source, item_id, None)
        await self._find(target, target_item_id)  # a cold one is recorded whole
        self._forget_retained(target, target_item_id)
        self._c.touch_item(target_node, target_item_id)
        state.set_item(target, target_item_id, None)
        state.set_item(target, target_item_id, moved)
        return moved

    async def remove_all(self, node_id: str) -> list[Item]:
        ns = self._s.nodes.get(node_id)
        if ns is None or not backlog.count(ns):
            return []
        every = await backlog.resolve(ns, self._reader, list(backlog.merged(ns)))
        self._c.touch_node(node_id)
        self._c.purged.add(node_id)
        removed = [
            with_payload_value(i, None) if i.payload is COLD else i for i in every
        ]  # the port allows purged items without payloads
        self._s.clear_items(ns)
        return removed

    async def count(self, node_id: str) -> int:
        ns = self._s.nodes.get(node_id)
        return backlog.count(ns) if ns is not None else 0

    async def payload_bytes(self, node_id: str) -> int:
        ns = self._s.nodes.get(node_id)
        return ns.queue.payload_bytes if ns is not None else 0

    async def oldest_waiting(self, node_id: str, limit: int) -> list[Item]:
        ns = self._s.nodes.get(node_id)
        if ns is None or limit <= 0:
            return []
        if ns.queue.tail:
            oldest = await backlog.oldest(self._s, ns, self._reader, limit, True)
            return await self._warm(ns, oldest)
        # Locked items are at the head (the oldest go out first): skipping them
        # costs at most the node's in-flight count.
        found = list(
            itertools.islice((i for i in ns.in_order().values() if i.locked_by is None), limit)
        )
        return await self._warm(ns, found)

    async def count_all(self) -> int:
        return sum(backlog.count(ns) for ns in self._s.nodes.values())

    async def page(
        self, node_id: str, request: PageRequest, max_bytes: int | None = None
    ) -> ItemPage:
        ns = self._s.nodes.get(node_id)
        if ns is not None and ns.queue.tail:
            return await self._page_cold(ns, request, max_bytes)
        count = len(ns.items) if ns is not None else 0
        if is_unpaged(request):
            chosen = ns.window(0, count) if ns is not None else []
            return ItemPage(items=tuple(await self._warm_opt(ns, chosen)), count=count)
        position = ns.position if ns is not None else (lambda _: None)
        start, stop = page_bounds(count, request, position)
        backward = is_backward(request)
        window = ns.window(start, stop) if ns is not None else []
        chosen = list(trim_to_bytes(window, max_bytes, backward))
        if backward:
            start = stop - len(chosen)
        return ItemPage(
            items=tuple(await self._warm_opt(ns, chosen)),
            count=count,
            first_index=start if chosen else None,
            paged=True,
            backward=backward,
        )

    async def _page_cold(
        self, ns: NodeState, request: PageRequest, max_bytes: int | None
    ) -> ItemPage:
        """:meth:`page` over a node with cold items: hot and cold merged in
        publish order, the cold ones of the page read from their rows."""
        reader = self._reader
        count = backlog.count(ns)
        if is_unpaged(request):
            every = await backlog.resolve(ns, reader, backlog.window(ns, 0, count))
            return ItemPage(items=tuple(await self._warm(ns, every)), count=count)
        named = [x for x in (request.after, request.before) if x]
        places = {x: await backlog.position(ns, reader, x) for x in named}
        start, stop = page_bounds(count, request, places.get)
        backward = is_backward(request)
        window = await backlog.resolve(ns, reader, backlog.window(ns, start, stop))
        chosen = list(trim_to_bytes(window, max_bytes, backward))
        if backward:
            start = stop - len(chosen)
        return ItemPage(
            items=tuple(await self._warm(ns, chosen)),
            count=count,
            first_index=start if chosen else None,
            paged=True,
            backward=backward,
        )

    async def _warm_opt(self, ns: NodeState | None, items: list[Item]) -> list[Item]:
        return await self._warm(ns, items) if ns is not None else items

    async def latest(self, node_id: str, limit: int) -> list[Item]:
        ns = self._s.nodes.get(node_id)
        if ns is None or limit <= 0:
            return []
        if ns.queue.tail:
            entries = list(itertools.islice(backlog.merged(ns, newest_first=True), limit))
            entries.reverse()
            return await self._warm(ns, await backlog.resolve(ns, self._reader, entries))
        newest = list(itertools.islice(reversed(ns.in_order().values()), limit))
        newest.reverse()
        return await self._warm(ns, newest)

    async def oldest_ids(self, node_id: str, limit: int) -> list[str]:
        ns = self._s.nodes.get(node_id)
        if ns is None or limit <= 0:
            return []
        if ns.queue.tail:
            oldest = await backlog.oldest(self._s, ns, self._reader, limit, False)
            return [i.item_id for i in oldest]
        return list(itertools.islice(ns.in_order(), limit))

    # --- queue state ---------------------------------------------------------------

    async def next_ready(self, node_id: str, now: datetime, limit: int) -> list[Item]:
        ns = self._s.nodes.get(node_id)
        if ns is None or limit <= 0:
            return []
        if ns.queue.tail:
            await backlog.ensure_heads(self._s, ns, self._reader, limit)
        ready = self._s.ready_items(ns, now, limit)
        if not any(i.payload is COLD for i in ready):
            return ready
        # The head of a long queue: fetch what comes next along with it.
        ahead = ns.queue.ready.first(len(ready) + PREFETCH)[len(ready) :]
        return await self._warm(ns, ready, ahead)

    async def lock(
        self, node_id: str, item_id: str, subid: str, jid: str, now: datetime, expires_at: datetime
    ) -> bool:
        ns = self._s.nodes.get(node_id)
        item = await self._find(ns, item_id)
        if ns is None or item is None or item.locked_by is not None:
            return False
        new = with_lock(item, subid, jid, utc(now), utc(expires_at))
        ns.queue.room.served(subid)  # round robin: behind its ties from now on
        self._c.touch_item(node_id, item_id)
        self._s.set_item(ns, item_id, new)
        return True

    async def unlock(
        self,
        node_id: str,
        item_id: str,
        subid: str,
        available_at: datetime | None,
        headers: Mapping[str, str] | None = None,
    ) -> bool:
        ns = self._s.nodes.get(node_id)
        item = ns.items.get(item_id) if ns is not None else None
        if ns is None or item is None or item.locked_by != subid:
            return False
        new = without_lock(item, utc_opt(available_at))
        if headers is not None:
            new = copy_item(new, headers=frozen_headers(headers))
        self._c.touch_item(node_id, item_id)
        self._s.set_item(ns, item_id, new)
        return True

    async def extend(self, node_id: str, item_id: str, subid: str, expires_at: datetime) -> bool:
        ns = self._s.nodes.get(node_id)
        item = ns.items.get(item_id) if ns is not None else None
        if ns is None or item is None or item.locked_by != subid:
            return False
        new = with_deadline(item, utc(expires_at))
        self._c.touch_item(node_id, item_id)
        self._s.set_item(ns, item_id, new)
        return True

    async def in_flight(self, node_id: str) -> dict[str, int]:
        ns = self._s.nodes.get(node_id)
        return dict(ns.queue.loads) if ns is not None else {}

    async def locked_by(self, node_id: str, subid: str) -> list[Item]:
        ns = self._s.nodes.get(node_id)
        held = ns.queue.held.get(subid) if ns is not None else None
        if ns is None or not held:
            return []
        mine = sorted((ns.items[i] for i in held), key=lambda i: i.seq)
        return await self._warm(ns, mine)

    async def locked(self, node_id: str) -> list[Item]:
        ns = self._s.nodes.get(node_id)
        return await self._warm(ns, self._s.locked_items(ns)) if ns is not None else []

    async def expired_locks(self, now: datetime, limit: int) -> list[Item]:
        if limit <= 0:
            return []
        due = self._s.expired(now, limit)
        if not any(i.payload is COLD for i in due):
            return due
        by_node: dict[str, list[Item]] = {}
        for i in due:
            by_node.setdefault(i.node, []).append(i)
        warm: dict[tuple[str, str], Item] = {}
        for node_id, items in by_node.items():
            for i in await self._warm(self._s.nodes[node_id], items):
                warm[(i.node, i.item_id)] = i
        return [warm[(i.node, i.item_id)] for i in due]

    async def expired_waiting(self, now: datetime, limit: int) -> list[Item]:
        if limit <= 0:
            return []
        return self._s.expired_waiting(now, limit)

    async def due_delayed_nodes(self, now: datetime, limit: int) -> list[str]:
        if limit <= 0:
            return []
        return self._s.due_delayed_nodes(now, limit)

    async def finished_since(self, node_id: str, item_id: str, since: datetime) -> bool:
        ns = self._s.nodes.get(node_id)
        if ns is None:
            return False
        if self._s.finished_since(ns, item_id, since):
            return True
        return self._c.finished_pending(node_id, item_id, since)

    async def next_deadline(self, now: datetime) -> datetime | None:
        moments = [
            self._s.next_lock_deadline(),
            self._s.next_retry(),
            self._s.next_item_expiry(),
            self._s.retention.next_due(self._s.nodes),
            self._s.unused.next_due(self._s.nodes, now),
        ]
        return min((m for m in moments if m is not None), default=None)

    async def queue_stats(self, node_id: str) -> QueueStats:
        ns = self._s.nodes.get(node_id)
        if ns is None:
            return QueueStats(0, 0, None)
        if ns.queue.tail:
            await backlog.ensure_heads(self._s, ns, self._reader, 1)  # the oldest, whole
        in_flight = len(ns.queue.locked)
        return QueueStats(
            backlog=backlog.count(ns) - in_flight,
            in_flight=in_flight,
            oldest_waiting=self._oldest_waiting(ns),
            delayed=ns.queue.delayed_live,
        )

    def _oldest_waiting(self, ns: NodeState) -> datetime | None:
        """published_at of the first unlocked item in publish order (publish
        order is publish-time order): the lowest ready or delayed seq."""
        q = ns.queue
        candidates = [ns.items[i] for i in q.ready.first(1)]
        candidates += [
            i
            for _, _, item_id in q.delayed
            if (i := ns.items.get(item_id)) is not None and i.locked_by is None
        ]
        if not candidates:
            return None
        return min(candidates, key=lambda i: i.seq).published_at

    async def count_locked(self) -> int:
        return self._s.locked_total


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
