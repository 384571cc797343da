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

Items are the core's frozen :class:`Item` values (``item_values``: a change
makes a new value, so a value handed to a caller is never changed under it).
Every change of an item goes through :meth:`MemoryState.set_item`, which keeps
the indexes in step; transactions (``changes``) record what they replaced
through the same path.

The parts, one module each: ``item_values`` (the stored values and their
constructors), ``node_state`` (one node and its :class:`QueueIndex`),
``time_indexes`` (the store-wide heaps of what comes due), ``item_placement``
(``set_item`` and the per-node indexes it keeps) and this module, the whole
state: bindings (``topic_index``), retention, cooling payloads, purges, recounts and reads.

Nothing here imports SQLAlchemy: this module is plain data structures.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from xmpp_queue.core.model import Item, Node, Subscription
from xmpp_queue.core.topic_bindings import Binding
from xmpp_queue.storage.dispatch_holds import DispatchHolds
from xmpp_queue.storage.item_placement import ItemPlacement
from xmpp_queue.storage.item_values import COLD, with_payload_value
from xmpp_queue.storage.node_state import NodeState, QueueIndex
from xmpp_queue.storage.ready import by_priority
from xmpp_queue.storage.retention import RetainedIndex
from xmpp_queue.storage.subscribers import SubscriberIndex
from xmpp_queue.storage.time_indexes import (
    ColdExpiryEntry,
    DelayedEntry,
    ExpiryEntry,
    LockEntry,
)
from xmpp_queue.storage.topic_index import TopicIndex
from xmpp_queue.storage.unused import UnusedIndex

HOT_WINDOW = 1024
"""A node keeps payloads in memory for about this many waiting items (its head)."""


class MemoryState(ItemPlacement):
    """Every node of the store plus the store-wide deadline index and counters."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeState] = {}
        self.lock_heap: list[LockEntry] = []
        self.locked_total = 0
        # Waiting items with an expiry time (locked ones are not due: a worker has them).
        self.expiry_heap: list[ExpiryEntry] = []
        self.expiring_total = 0
        self.cold_expiry_heap: list[ColdExpiryEntry] = []  # nodes by earliest cold expiry
        # Nodes with delayed items, by their earliest available_at: an entry is live
        # while the node is still filed under that time (QueueIndex.delayed_due).
        self.delayed_heap: list[DelayedEntry] = []
        self.delayed_filed = 0  # nodes filed (live entries)
        self.next_seq = 1
        self.next_sub_id = 1
        # Who holds which subscription, and who gets the next item (subscribers.py).
        self.subscribers = SubscriberIndex(self.nodes)
        # Each topic's bound queues with their compiled filters (``topic_index``):
        # exact after every change, rebuilt by ``recount`` after an undo.
        self.topics = TopicIndex()
        self.retention = RetainedIndex()  # retained items by the end of their retention
        self.unused = UnusedIndex()  # unsubscribed bound queues (queue_expire_after)
        self.holds = DispatchHolds()  # queues holding a short batch (queue_batch_wait)

    def note_binding(self, node: Node) -> None:
        """*node* was added or reconfigured: keep the topic index in step."""
        self.topics.file(node)

    def bindings(self, topic: str) -> tuple[Binding, ...]:
        """The queues bound to *topic* now, with their compiled filters: one lookup."""
        return self.topics.of(topic)

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
            self.topics.forget(node_id)
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
        self.topics.rebuild(ns.node for ns in self.nodes.values())
        self.expiring_total = 0
        self.expiry_heap = []
        self.delayed_heap, self.delayed_filed = [], 0
        self.cold_expiry_heap = []
        self.retention.rebuild(self.nodes)
        self.unused.rebuild(self.nodes)
        for ns in self.nodes.values():
            for item in ns.items.values():
                if item.expires_at is not None and item.locked_by is None:
                    self.push_expiry(item)
            ns.queue.delayed_due = None  # the heap was emptied: file every node anew
            if self.has_delayed(ns):
                self._refile_delayed(ns)
            self.file_cold_expiry(ns)
            for item_id in ns.queue.locked:
                self.push_deadline(ns.items[item_id])

    # --- reads -------------------------------------------------------------------------

    def ready_items(self, ns: NodeState, now: datetime, limit: int) -> list[Item]:
        """Up to *limit* ready items in dispatch order: highest priority first, seq
        order within a level; an item waiting longer than the node's
        ``queue_priority_age`` counts as high (so low levels are never starved)."""
        q = ns.queue
        if q.delayed or (q.tail is not None and q.tail.due):  # hot or cold delayed items
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
