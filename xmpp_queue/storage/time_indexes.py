"""The store-wide time indexes: lock deadlines, waiting items' expiry, retry delays.

The deadline timer asks "what came due?" after every batch; these heaps answer
in O(log n) per due entry, never by a scan of the nodes (see
``docs/architecture.md``, "Timers cost what is due"). Each heap uses lazy
deletion: an entry is checked against the item (or node) it names when it
surfaces, and a heap grown to twice its live size is rebuilt. A base class of
:class:`~xmpp_queue.storage.state.MemoryState`, which owns the heaps and counters
declared here; ``item_placement`` files items into them.
"""

from __future__ import annotations

import heapq
from datetime import datetime

from xmpp_queue.core.model import Item
from xmpp_queue.storage.node_state import NodeState
from xmpp_queue.storage.ready import HEAP_SLACK, due
from xmpp_queue.storage.schedule import from_us, to_us

LockEntry = tuple[datetime, int, str, str]  # (lock_expires_at, seq, node_id, item_id)
ExpiryEntry = tuple[datetime, int, str, str]  # (expires_at, seq, node_id, item_id)
DelayedEntry = tuple[datetime, str]  # (a node's earliest available_at, node_id)
ColdExpiryEntry = tuple[int, str]  # (a node's earliest cold expiry, microseconds; node_id)


class TimeIndexes:
    """The heaps that say what comes due when (declared here, set by ``MemoryState``)."""

    nodes: dict[str, NodeState]
    lock_heap: list[LockEntry]
    locked_total: int
    expiry_heap: list[ExpiryEntry]
    expiring_total: int
    delayed_heap: list[DelayedEntry]
    delayed_filed: int
    cold_expiry_heap: list[ColdExpiryEntry]

    def _placed(self, ns: NodeState, item: Item) -> bool:
        """Whether *item* is the one of its key in the node's indexes."""
        if item.ordering_key is None:
            return True
        fifo = ns.queue.keys.get(item.ordering_key)
        return fifo is None or fifo.placed == item.seq

    # --- deadlines ---------------------------------------------------------------------

    def push_deadline(self, item: Item) -> None:
        assert item.lock_expires_at is not None
        heap = self.lock_heap
        heapq.heappush(heap, (item.lock_expires_at, item.seq, item.node, item.item_id))
        if len(heap) > 2 * self.locked_total + HEAP_SLACK:
            live = {e for e in heap if self._lock_entry_item(e) is not None}
            self.lock_heap = sorted(live)

    def _lock_entry_item(self, entry: LockEntry) -> Item | None:
        """The item a deadline entry names, if the entry is still true."""
        at, seq, node_id, item_id = entry
        ns = self.nodes.get(node_id)
        item = ns.items.get(item_id) if ns is not None else None
        if item is None or item.seq != seq or item.locked_by is None or item.lock_expires_at != at:
            return None
        return item

    def expired(self, now: datetime, limit: int) -> list[Item]:
        """Locked items with a deadline <= now, earliest first (then seq)."""
        return due(self.lock_heap, self._lock_entry_item, now, limit)

    def next_lock_deadline(self) -> datetime | None:
        heap = self.lock_heap
        while heap and self._lock_entry_item(heap[0]) is None:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    # --- item expiry (pubsub#item_expire, an item's Expires/TTL) ----------------------

    def push_expiry(self, item: Item) -> None:
        """Index a waiting item's expiry; counted live until it is locked or removed."""
        assert item.expires_at is not None
        self.expiring_total += 1
        heap = self.expiry_heap
        heapq.heappush(heap, (item.expires_at, item.seq, item.node, item.item_id))
        if len(heap) > 2 * self.expiring_total + HEAP_SLACK:
            self.expiry_heap = sorted({e for e in heap if self._expiry_entry_item(e) is not None})

    def _expiry_entry_item(self, entry: ExpiryEntry) -> Item | None:
        at, seq, node_id, item_id = entry
        ns = self.nodes.get(node_id)
        item = ns.items.get(item_id) if ns is not None else None
        if item is None or item.seq != seq or item.locked_by is not None or item.expires_at != at:
            return None
        return item

    def expired_waiting(self, now: datetime, limit: int) -> list[Item]:
        """Waiting items whose expiry is <= now, earliest first (entries stay until
        the caller moves or removes the items, then they are stale)."""
        return due(self.expiry_heap, self._expiry_entry_item, now, limit)

    def next_item_expiry(self) -> datetime | None:
        heap = self.expiry_heap
        while heap and self._expiry_entry_item(heap[0]) is None:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def compact_expiry(self) -> None:
        """Drop stale entries once they outnumber the live ones (items gone cold)."""
        if len(self.expiry_heap) > 2 * self.expiring_total + HEAP_SLACK:
            live = {e for e in self.expiry_heap if self._expiry_entry_item(e) is not None}
            self.expiry_heap = sorted(live)

    # --- cold items' expiry (``tail``: a node's (expires, seq) pairs) -------------------

    def file_cold_expiry(self, ns: NodeState) -> None:
        """File *ns* under its earliest cold expiry (call when that changed); an
        entry is live while it names the node's earliest (lazy deletion)."""
        tail = ns.queue.tail
        at = tail.earliest_expiry() if tail is not None else None
        if at is None:
            return
        heap = self.cold_expiry_heap
        heapq.heappush(heap, (at, ns.node.node_id))
        if len(heap) > 2 * len(self.nodes) + HEAP_SLACK:
            live = {e for e in heap if self._cold_expiry_node(e) is not None}
            self.cold_expiry_heap = sorted(live)

    def _cold_expiry_node(self, entry: ColdExpiryEntry) -> NodeState | None:
        ns = self.nodes.get(entry[1])
        tail = ns.queue.tail if ns is not None else None
        if tail is None or tail.earliest_expiry() != entry[0]:
            return None
        return ns

    def cold_expired(self, now: datetime, limit: int) -> list[tuple[NodeState, list[int]]]:
        """Nodes with cold items expired by *now*, and their seqs, up to *limit*
        in all (the caller brings them back; their entries stay until that
        changes the node's earliest expiry)."""
        heap, at = self.cold_expiry_heap, to_us(now)
        found: list[tuple[NodeState, list[int]]] = []
        kept: list[ColdExpiryEntry] = []
        while heap and heap[0][0] <= at and limit > 0:
            entry = heapq.heappop(heap)
            ns = self._cold_expiry_node(entry)
            if ns is None or any(f[0] is ns for f in found):
                continue
            kept.append(entry)
            assert ns.queue.tail is not None
            seqs = ns.queue.tail.expiry.upto(at, limit)
            found.append((ns, seqs))
            limit -= len(seqs)
        for entry in kept:
            heapq.heappush(heap, entry)
        return found

    def next_cold_expiry(self) -> datetime | None:
        heap = self.cold_expiry_heap
        while heap and self._cold_expiry_node(heap[0]) is None:
            heapq.heappop(heap)
        return from_us(heap[0][0]) if heap else None

    # --- retry delays --------------------------------------------------------------------

    def _delayed_entry_live(self, ns: NodeState, entry: tuple[datetime, int, str]) -> bool:
        at, seq, item_id = entry
        item = ns.items.get(item_id)
        return (
            item is not None
            and item.seq == seq
            and item.locked_by is None
            and item.available_at == at
            and seq not in ns.queue.ready
            and self._placed(ns, item)
        )

    def _rebuild_delayed(self, ns: NodeState) -> None:
        q = ns.queue
        q.delayed = sorted({e for e in q.delayed if self._delayed_entry_live(ns, e)})
        q.delayed_live = len(q.delayed)

    def rebuild_delayed(self, ns: NodeState) -> None:
        """Drop the stale entries of the node's delayed heap (items gone cold)."""
        self._rebuild_delayed(ns)

    def promote_due(self, ns: NodeState, now: datetime) -> None:
        """Move delayed items whose time has come into the ready queue (cold ones
        into their cold tail's ready levels, still cold)."""
        q = ns.queue
        heap = q.delayed
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            if self._delayed_entry_live(ns, entry):
                q.delayed_live -= 1
                q.ready.add(entry[1], entry[2], ns.items[entry[2]].priority)
        tail = q.tail
        if tail is not None and len(tail.due):
            tail.promote(to_us(now))
        self._refile_delayed(ns)

    def has_delayed(self, ns: NodeState) -> bool:
        """Whether the node holds delayed items, whole or cold (stale entries count)."""
        tail = ns.queue.tail
        return bool(ns.queue.delayed) or (tail is not None and len(tail.due) > 0)

    def promoted_while_cold(self, ns: NodeState, item: Item) -> None:
        """*item*, just made whole again, came due while it was cold: it is ready,
        not delayed (``set_item`` filed it by its ``available_at``)."""
        q = ns.queue
        if item.available_at is not None and q.ready.add_if_absent(
            item.seq, item.item_id, item.priority
        ):
            q.delayed_live -= 1  # its heap entry is stale now (the seq is ready)
            self._refile_delayed(ns)  # not under that (past) time: no idle wake-up

    def _file_delayed(self, ns: NodeState, at: datetime | None) -> None:
        """File *ns* under *at* in the store-wide heap (None: take it out)."""
        q = ns.queue
        if q.delayed_due == at:
            return
        self.delayed_filed += (at is not None) - (q.delayed_due is not None)
        q.delayed_due = at
        if at is None:
            return
        heap = self.delayed_heap
        heapq.heappush(heap, (at, ns.node.node_id))
        if len(heap) > 2 * self.delayed_filed + HEAP_SLACK:
            self.delayed_heap = sorted({e for e in heap if self._delayed_node(e) is not None})
            self.delayed_filed = len(self.delayed_heap)

    def _refile_delayed(self, ns: NodeState) -> None:
        """File *ns* under its earliest live delayed entry or cold due time
        (dropping stale heads)."""
        heap = ns.queue.delayed
        while heap and not self._delayed_entry_live(ns, heap[0]):
            heapq.heappop(heap)
        at = heap[0][0] if heap else None
        tail = ns.queue.tail
        cold = tail.earliest_due() if tail is not None else None
        if cold is not None:
            cold_at = from_us(cold)
            if at is None or cold_at < at:
                at = cold_at
        self._file_delayed(ns, at)

    def refile_delayed(self, ns: NodeState) -> None:
        """File *ns* under its earliest delayed time, whole or cold (after a load)."""
        self._refile_delayed(ns)

    def _delayed_node(self, entry: DelayedEntry) -> NodeState | None:
        """The node a delayed-heap entry names, if it is still filed under that time."""
        ns = self.nodes.get(entry[1])
        if ns is None or ns.queue.delayed_due != entry[0]:
            return None
        return ns

    def due_delayed_nodes(self, now: datetime, limit: int) -> list[str]:
        """Up to *limit* nodes whose earliest delayed item came due by *now*,
        earliest first. Their due items move to the ready index and each node is
        filed again under its next delayed time: the caller dispatches them.
        Costs O(log n) per node returned; nodes with nothing due are not looked at."""
        heap = self.delayed_heap
        found: list[str] = []
        while heap and len(found) < limit and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            ns = self._delayed_node(entry)
            if ns is None:
                continue
            self._file_delayed(ns, None)  # its entry is gone; promote files it again
            self.promote_due(ns, now)
            found.append(entry[1])
        return found

    def next_retry(self) -> datetime | None:
        """The earliest time a node is filed under (may be past: a tick is due)."""
        heap = self.delayed_heap
        while heap and self._delayed_node(heap[0]) is None:
            heapq.heappop(heap)
        return heap[0][0] if heap else None
