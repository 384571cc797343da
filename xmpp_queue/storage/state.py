"""The in-memory half of :class:`~xmpp_queue.storage.store.StateStore`.

Every node, affiliation, subscription and item lives here, with the indexes
the queue asks for on every operation, so that no read needs the database:

- per node, ``items`` in publish (seq) order and a :class:`QueueIndex`: the
  ready items (unlocked, available) as a heap of seqs, the delayed ones (retry
  back-off) as a heap of ``available_at``, the locked item ids, the lock count
  and the locked item ids per subid (a departure releases what it holds without
  a scan), and the ``RoomIndex`` dispatch asks who gets the next item;
- store-wide, the subscriptions by JID (``subscribers.py``);
- store-wide, one heap of lock deadlines (``expired_locks``/``next_deadline``
  without a scan), one heap of waiting items' expiry times, one heap of each
  delayed node's earliest ``available_at`` (``due_delayed_nodes``: the timer
  finds the nodes whose delayed items came due without looking at the others),
  and the running seq and subscription-id counters.

Heaps use lazy deletion: an entry is checked against the item it names when it
reaches the top, and a heap that grew to twice its live size is rebuilt. So a
lock, an unlock or an ack costs O(log n) whatever the backlog, and a million
waiting items cost nothing per operation.

Items are the core's frozen :class:`Item` values: a change makes a new value
(:func:`with_lock` and friends build it with one constructor call, several
times cheaper than ``dataclasses.replace``), so a value handed to a caller is
never changed under it, and identity (``is``) says whether a stored value is
still the one that was read. Every change of an item goes through
:meth:`MemoryState.set_item`, which keeps the indexes in step; transactions
(``changes``) record what they replaced through the same path.

Nothing here imports SQLAlchemy: this module is plain data structures.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Final

from xmpp_queue.core.model import Affiliation, Item, Node, Snapshot, Subscription, copy_item
from xmpp_queue.core.ordering_config import is_ordered
from xmpp_queue.core.queue.dispatch import RoomIndex
from xmpp_queue.storage.ordered import KeyFifo
from xmpp_queue.storage.ready import HEAP_SLACK, ReadyLevels, by_priority, due
from xmpp_queue.storage.retention import RetainedIndex
from xmpp_queue.storage.subscribers import SubscriberIndex
from xmpp_queue.storage.tail import ColdTail
from xmpp_queue.storage.unused import UnusedIndex

EMPTY_HEADERS: Mapping[str, str] = MappingProxyType({})
"""Shared by every item without headers (nearly all): an empty dict each is 64 bytes."""

COLD: Final[str] = "\x00payload kept in the database\x00"
"""The ``payload`` of an item whose payload is not in memory, compared by identity.

Payloads are most of a queued item's size, and a deep backlog is read from
its head only, so the tail of a long queue keeps its payloads in the database
(see ``store`` for the policy). A value carrying this marker never
leaves the store: every read that hands items out fetches the payloads first.
"""

HOT_WINDOW = 1024
"""A node keeps payloads in memory for about this many waiting items (its head)."""

PREFETCH = 256
"""A dispatch that meets a cold payload fetches this many of the next ones with it."""


def utc(value: datetime) -> datetime:
    """Aware UTC, as the SQL store returns it; naive datetimes are refused there too."""
    if value.tzinfo is UTC:
        return value
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r}: storage needs aware UTC datetimes")
    return value.astimezone(UTC)


def utc_opt(value: datetime | None) -> datetime | None:
    return None if value is None else utc(value)


def frozen_headers(headers: Mapping[str, str]) -> Mapping[str, str]:
    """Item headers as stored: the shared empty mapping, or a read-only copy."""
    if not headers:
        return EMPTY_HEADERS
    if isinstance(headers, MappingProxyType):
        return headers
    return MappingProxyType(dict(headers))


def stored_item(item: Item, seq: int) -> Item:
    """*item* as the store keeps it: the given seq, UTC times, frozen headers."""
    return copy_item(
        item,
        seq=seq,
        published_at=utc(item.published_at),
        updated_at=utc(item.updated_at),
        locked_at=utc_opt(item.locked_at),
        lock_expires_at=utc_opt(item.lock_expires_at),
        available_at=utc_opt(item.available_at),
        headers=frozen_headers(item.headers),
        priority=int(item.priority),
        expires_at=utc_opt(item.expires_at),
        acked_at=utc_opt(item.acked_at),
    )


def with_payload_value(i: Item, payload: str | None) -> Item:
    """The same item with its payload fetched (or, with COLD, dropped)."""
    return copy_item(i, payload=payload)


def with_lock(i: Item, subid: str, jid: str, locked_at: datetime, expires_at: datetime) -> Item:
    return copy_item(
        i,
        locked_by=subid,
        lock_jid=jid,
        locked_at=locked_at,
        lock_expires_at=expires_at,
        available_at=None,
        deliveries=i.deliveries + 1,
    )


def without_lock(i: Item, available_at: datetime | None) -> Item:
    return copy_item(
        i,
        locked_by=None,
        lock_jid=None,
        locked_at=None,
        lock_expires_at=None,
        available_at=available_at,
    )


def with_deadline(i: Item, expires_at: datetime) -> Item:
    return copy_item(i, lock_expires_at=expires_at)


def with_payload(
    i: Item, payload: str | None, size: int, publisher: str, updated_at: datetime
) -> Item:
    return copy_item(
        i, payload=payload, payload_size=size, publisher=publisher, updated_at=updated_at
    )


@dataclass(slots=True)
class QueueIndex:
    """Where each item of a node stands: ready, delayed or locked (exactly one),
    or, on an ordered queue, waiting behind an earlier item of its key (``keys``).

    One mutable object per node, replaced as a whole by a purge, so a
    transaction's snapshot of the node keeps the index that matched its items.
    """

    ready: ReadyLevels = field(default_factory=ReadyLevels)
    # (available_at, seq, item_id) of unlocked items held back by a retry delay
    delayed: list[tuple[datetime, int, str]] = field(default_factory=list)
    delayed_live: int = 0
    # The time this node is filed under in MemoryState.delayed_heap (None: not filed);
    # never later than the earliest live entry of ``delayed``.
    delayed_due: datetime | None = None
    locked: dict[str, None] = field(default_factory=dict)  # item ids, an ordered set
    loads: dict[str, int] = field(default_factory=dict)  # subid -> locked items
    held: dict[str, dict[str, None]] = field(default_factory=dict)  # subid -> its item ids
    room: RoomIndex = field(default_factory=RoomIndex)  # who gets the next item
    payload_bytes: int = 0  # of every item of the node (pubsub#max_bytes)
    keys: dict[str, KeyFifo] = field(default_factory=dict)  # ordered queues only
    tail: ColdTail | None = None  # committed plain waiting items kept as seqs (backlog.py)


@dataclass(slots=True)
class NodeState:
    """One node with everything that belongs to it.

    Containers are changed in place by single-key writes and replaced only by
    a purge (``items``, ``queue``); :meth:`copy` is the snapshot a transaction
    takes before a node-level change.
    """

    node: Node
    items: dict[str, Item] = field(default_factory=dict)  # seq order (see ``ordered``)
    subs: dict[str, Subscription] = field(default_factory=dict)  # creation order
    sub_ids: dict[str, int] = field(default_factory=dict)  # subid -> subscriptions.id
    affiliations: dict[str, Affiliation] = field(default_factory=dict)
    queue: QueueIndex = field(default_factory=QueueIndex)
    # False after a rollback put removed items back at the end of ``items``.
    ordered: bool = True
    # Dedup window: item id -> when it was acked or retracted, oldest first.
    # Committed facts only (the store adds them after each commit; see ``store``).
    finished: dict[str, datetime] = field(default_factory=dict)
    # Retained (acked, kept for a seek) items: in no queue index, payloads cold.
    retained: dict[str, Item] = field(default_factory=dict)
    # Named snapshots; replaced as a whole on a change (a node-level change).
    snapshots: dict[str, Snapshot] = field(default_factory=dict)

    def copy(self) -> NodeState:
        return NodeState(
            self.node,
            self.items,
            self.subs,
            self.sub_ids,
            self.affiliations,
            self.queue,
            self.ordered,
            self.finished,
            self.retained,
            self.snapshots,
        )

    def in_order(self) -> dict[str, Item]:
        """``items`` in seq order (sorting in place, once, after a rollback)."""
        if not self.ordered:
            ordered = sorted(self.items.values(), key=lambda i: i.seq)
            self.items.clear()
            self.items.update((i.item_id, i) for i in ordered)
            self.ordered = True
        return self.items

    def position(self, item_id: str) -> int | None:
        """Offset of *item_id* in publish order (None: not here), for XEP-0059 paging.

        A scan of the dict's keys in C (``operator.indexOf``): a few milliseconds
        for 800,000 items, and nothing is copied.
        """
        items = self.in_order()
        return operator.indexOf(items, item_id) if item_id in items else None

    def window(self, start: int, stop: int) -> list[Item]:
        """Items ``start:stop`` in publish order, walking from the nearer end
        (so the last page of a long node does not skip over all the others)."""
        items = self.in_order()
        count = len(items)
        stop = min(stop, count)
        if start >= stop:
            return []
        if start <= count - stop:
            return list(itertools.islice(items.values(), start, stop))
        tail = list(itertools.islice(reversed(items.values()), count - stop, count - start))
        tail.reverse()
        return tail

    def subs_in_order(self) -> None:
        ordered = sorted(self.subs.values(), key=lambda s: self.sub_ids[s.subid])
        self.subs.clear()
        self.subs.update((s.subid, s) for s in ordered)


LockEntry = tuple[datetime, int, str, str]  # (lock_expires_at, seq, node_id, item_id)
ExpiryEntry = tuple[datetime, int, str, str]  # (expires_at, seq, node_id, item_id)
DelayedEntry = tuple[datetime, str]  # (a node's earliest available_at, node_id)


class MemoryState:
    """Every node of the store plus the store-wide deadline index and counters."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeState] = {}
        self.lock_heap: list[LockEntry] = []
        self.locked_total = 0
        # Waiting items with an expiry time (locked ones are not due: a worker has them).
        self.expiry_heap: list[ExpiryEntry] = []
        self.expiring_total = 0
        # Nodes with delayed items, by their earliest available_at: an entry is live
        # while the node is still filed under that time (QueueIndex.delayed_due).
        self.delayed_heap: list[DelayedEntry] = []
        self.delayed_filed = 0  # nodes filed (live entries)
        self.next_seq = 1
        self.next_sub_id = 1
        # Who holds which subscription, and who gets the next item (subscribers.py).
        self.subscribers = SubscriberIndex(self.nodes)
        # Topic id -> queue ids that were ever bound to it in this process (a
        # superset: ``bound_to`` checks each one's current config, so a rollback
        # or an unbinding never leaves a wrong answer, only a stale key).
        self.bindings: dict[str, dict[str, None]] = {}
        self.retention = RetainedIndex()  # retained items by the end of their retention
        self.unused = UnusedIndex()  # unsubscribed bound queues (queue_expire_after)

    def note_binding(self, node: Node) -> None:
        """Index *node* under its topic when it is a bound queue (``bound_to``)."""
        topic = node.config.queue_topic
        if node.config.queue and topic:
            self.bindings.setdefault(topic, {})[node.node_id] = None

    def bound_to(self, topic: str) -> list[Node]:
        """The queues bound to *topic* now: costs its bindings, not every node."""
        found = []
        for queue_id in self.bindings.get(topic, ()):
            ns = self.nodes.get(queue_id)
            if ns is not None and ns.node.config.queue and ns.node.config.queue_topic == topic:
                found.append(ns.node)
        return found

    # --- the one way an item changes -------------------------------------------------

    def set_item(self, ns: NodeState, item_id: str, new: Item | None) -> Item | None:
        """Store *new* (None removes) under *item_id*; return what was there."""
        items = ns.items
        old = items.get(item_id)
        if old is not None:
            self._unindex(ns, old)
        if new is None:
            if old is not None:
                del items[item_id]
        else:
            items[item_id] = new
            self._index(ns, new)
        if old is not None and old.ordering_key is not None:
            if new is None or new.ordering_key != old.ordering_key:
                self._settle_key(ns, old.ordering_key)  # the next of its key, if any
        return old

    def set_retained(self, ns: NodeState, item_id: str, new: Item | None) -> Item | None:
        """Retain *new* (None: forget) under *item_id*; return what was retained."""
        old = ns.retained.pop(item_id, None)
        index = self.retention
        if old is not None:
            index.total -= 1
        if new is not None:
            ns.retained[item_id] = new
            index.total += 1
            index.push(ns.node, new)
            index.compact(self.nodes)
        return old

    def _index(self, ns: NodeState, item: Item) -> None:
        ns.queue.payload_bytes += item.payload_size  # every item, also one behind its key
        if item.locked_by is None and item.expires_at is not None:
            self.push_expiry(item)  # every waiting item, also one behind its key
        key = item.ordering_key
        if key is not None and is_ordered(ns.node.config):
            fifo = ns.queue.keys.get(key)
            if fifo is None:
                fifo = ns.queue.keys[key] = KeyFifo()
            fifo.add(item.seq, item.item_id, item.locked_by is not None)
            self._settle_key(ns, key)
            return
        self._place(ns, item)

    def _unindex(self, ns: NodeState, item: Item) -> None:
        if item.locked_by is None and item.expires_at is not None:
            self.expiring_total -= 1
        q = ns.queue
        q.payload_bytes -= item.payload_size
        key = item.ordering_key
        if key is not None:
            # By membership, not by the node's config: a rollback may put the
            # config back before the items.
            fifo = q.keys.get(key)
            if fifo is not None and fifo.remove(item.seq):
                if fifo.placed == item.seq:
                    fifo.placed = None
                    self._unplace(ns, item)
                return
        self._unplace(ns, item)

    def _settle_key(self, ns: NodeState, key: str) -> None:
        """Place the member of *key* that should be offered (see ``ordered``)."""
        q = ns.queue
        fifo = q.keys.get(key)
        if fifo is None:
            return
        want = fifo.wanted()
        if want != fifo.placed:
            if fifo.placed is not None:
                self._unplace(ns, ns.items[fifo.members[fifo.placed]])
            fifo.placed = want
            if want is not None:
                self._place(ns, ns.items[fifo.members[want]])
        if want is None:
            del q.keys[key]

    def _placed(self, ns: NodeState, item: Item) -> bool:
        """Whether *item* is the one of its key in the node's indexes."""
        if item.ordering_key is None:
            return True
        fifo = ns.queue.keys.get(item.ordering_key)
        return fifo is None or fifo.placed == item.seq

    def _place(self, ns: NodeState, item: Item) -> None:
        q = ns.queue
        if item.locked_by is not None:
            q.locked[item.item_id] = None
            q.loads[item.locked_by] = q.loads.get(item.locked_by, 0) + 1
            q.held.setdefault(item.locked_by, {})[item.item_id] = None
            self.locked_total += 1
            self.subscribers.offer_room(ns, item.locked_by)
            if item.lock_expires_at is not None:
                self.push_deadline(item)
            return
        if item.available_at is None:
            q.ready.add(item.seq, item.item_id, item.priority)
        else:
            heapq.heappush(q.delayed, (item.available_at, item.seq, item.item_id))
            q.delayed_live += 1
            if q.delayed_due is None or item.available_at < q.delayed_due:
                self._file_delayed(ns, item.available_at)
            if len(q.delayed) > 2 * q.delayed_live + HEAP_SLACK:
                self._rebuild_delayed(ns)

    def _unplace(self, ns: NodeState, item: Item) -> None:
        q = ns.queue
        if item.locked_by is not None:
            del q.locked[item.item_id]
            left = q.loads[item.locked_by] - 1
            held = q.held[item.locked_by]
            del held[item.item_id]
            if left:
                q.loads[item.locked_by] = left
            else:
                del q.loads[item.locked_by]
                del q.held[item.locked_by]
            self.locked_total -= 1
            self.subscribers.offer_room(ns, item.locked_by)
            return
        if not q.ready.discard(item.seq, item.priority) and item.available_at is not None:
            q.delayed_live -= 1

    def cool(self, items: list[Item]) -> int:
        """After a commit: drop from memory the payloads of waiting items at the
        tail of a long queue (they are in the database now). Returns how many."""
        cooled = 0
        nodes = self.nodes
        for item in items:
            if item.payload is None or item.payload is COLD or item.locked_by is not None:
                continue
            if item.acked_at is not None:  # retained: always cold once written
                held = nodes.get(item.node)
                if held is not None and held.retained.get(item.item_id) is item:
                    held.retained[item.item_id] = with_payload_value(item, COLD)
                    cooled += 1
                continue
            ns = nodes.get(item.node)
            if ns is None or len(ns.queue.ready) <= HOT_WINDOW:
                continue
            if ns.items.get(item.item_id) is item:
                ns.items[item.item_id] = with_payload_value(item, COLD)
                cooled += 1
        return cooled

    def clear_items(self, ns: NodeState) -> None:
        """Purge: fresh containers (the old ones stay intact for a snapshot)."""
        self.locked_total -= len(ns.queue.locked)
        self.expiring_total -= sum(
            1 for i in ns.items.values() if i.expires_at is not None and i.locked_by is None
        )
        self.delayed_filed -= ns.queue.delayed_due is not None
        self.retention.total -= len(ns.retained)
        ns.items = {}
        ns.retained = {}
        ns.queue = QueueIndex()
        ns.ordered = True
        for subid in ns.subs:
            self.subscribers.offer_room(ns, subid)

    def drop_node(self, node_id: str) -> NodeState | None:
        ns = self.nodes.pop(node_id, None)
        if ns is not None:
            self.locked_total -= len(ns.queue.locked)
            self.expiring_total -= sum(
                1 for i in ns.items.values() if i.expires_at is not None and i.locked_by is None
            )
            self.delayed_filed -= ns.queue.delayed_due is not None
            self.retention.total -= len(ns.retained)
        return ns

    def recount(self) -> None:
        """Re-derive the store-wide counters and indexes after whole nodes came back."""
        self.locked_total = sum(len(ns.queue.locked) for ns in self.nodes.values())
        for ns in self.nodes.values():
            self.note_binding(ns.node)
        self.expiring_total = 0
        self.expiry_heap = []
        self.delayed_heap, self.delayed_filed = [], 0
        self.retention.rebuild(self.nodes)
        self.unused.rebuild(self.nodes)
        for ns in self.nodes.values():
            for item in ns.items.values():
                if item.expires_at is not None and item.locked_by is None:
                    self.push_expiry(item)
            ns.queue.delayed_due = None  # the heap was emptied: file every node anew
            if ns.queue.delayed:
                self._refile_delayed(ns)
            for item_id in ns.queue.locked:
                self.push_deadline(ns.items[item_id])

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

    def promote_due(self, ns: NodeState, now: datetime) -> None:
        """Move delayed items whose time has come into the ready queue."""
        q = ns.queue
        heap = q.delayed
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            if self._delayed_entry_live(ns, entry):
                q.delayed_live -= 1
                q.ready.add(entry[1], entry[2], ns.items[entry[2]].priority)
        self._refile_delayed(ns)

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
        """File *ns* under its earliest live delayed entry (dropping stale heads)."""
        heap = ns.queue.delayed
        while heap and not self._delayed_entry_live(ns, heap[0]):
            heapq.heappop(heap)
        self._file_delayed(ns, heap[0][0] if heap else None)

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

    # --- reads -------------------------------------------------------------------------

    def ready_items(self, ns: NodeState, now: datetime, limit: int) -> list[Item]:
        """Up to *limit* ready items in dispatch order: highest priority first, seq
        order within a level; an item waiting longer than the node's
        ``queue_priority_age`` counts as high (so low levels are never starved)."""
        if ns.queue.delayed:
            self.promote_due(ns, now)
        items = ns.items
        levels = ns.queue.ready.live_levels()
        if not levels:
            return []
        if len(levels) == 1:
            found = [items[i] for i in levels[0][1].first(limit)]
        else:
            found = by_priority(items, levels, now, limit, ns.node.config.queue_priority_age)
        for i in found:
            if i.available_at is not None and i.available_at > now:
                # Promoted at a later clock reading: the clock went back since.
                return [i for i in found if i.available_at is None or i.available_at <= now]
        return found

    # --- dedup window ---------------------------------------------------------------

    def finished_since(self, ns: NodeState, item_id: str, since: datetime) -> bool:
        """Whether *item_id* was acked or retracted at or after *since* (committed)."""
        at = ns.finished.get(item_id)
        return at is not None and at >= since

    def note_finished(self, ns: NodeState, item_id: str, at: datetime) -> None:
        """Remember a committed ack/retract for the node's dedup window, and forget
        the ones that fell out of it (oldest first: O(1) per call, amortised)."""
        window = ns.node.config.queue_dedup_window
        finished = ns.finished
        finished.pop(item_id, None)
        finished[item_id] = at
        horizon = at.timestamp() - window
        while finished:
            oldest = next(iter(finished))
            if finished[oldest].timestamp() >= horizon:
                break
            del finished[oldest]

    def locked_items(self, ns: NodeState) -> list[Item]:
        found = [ns.items[i] for i in ns.queue.locked]
        found.sort(key=lambda i: i.seq)
        return found

    def all_subscriptions(self) -> Iterator[tuple[int, Subscription]]:
        for ns in self.nodes.values():
            ids = ns.sub_ids
            for sub in ns.subs.values():
                yield ids[sub.subid], sub
