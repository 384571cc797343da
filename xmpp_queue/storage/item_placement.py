"""The one way an item changes: :meth:`ItemPlacement.set_item`, and the indexes it
keeps in step (ready, delayed, locked, loads per subscription, ordering keys).

Every write of an item goes through ``set_item`` (transactions record what they
replaced through the same path), so an index can never disagree with the items:
an item is unindexed as it was, stored, and indexed as it is. On an ordered queue
only the head of each ordering key is placed in the ready, delayed or locked
index (``ordered``); a cold head waits unplaced until a dispatch reads it back.
A base class of :class:`~xmpp_queue.storage.state.MemoryState`.
"""

from __future__ import annotations

import heapq

from xmpp_queue.core.model import Item
from xmpp_queue.core.ordering_config import is_ordered
from xmpp_queue.storage.node_state import NodeState
from xmpp_queue.storage.ordered import KeyFifo
from xmpp_queue.storage.ready import HEAP_SLACK
from xmpp_queue.storage.subscribers import SubscriberIndex
from xmpp_queue.storage.time_indexes import TimeIndexes


class ItemPlacement(TimeIndexes):
    """Places each stored item in its node's indexes (see the module docstring)."""

    subscribers: SubscriberIndex

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

    def forget_cold_member(self, ns: NodeState, seq: int) -> None:
        """A cold member of an ordering key whose row is missing: out of its key."""
        for key, fifo in list(ns.queue.keys.items()):
            if fifo.is_cold(seq):
                fifo.remove(seq)
                self._settle_key(ns, key)
                return

    def settle_key(self, ns: NodeState, key: str) -> None:
        """Place the member of *key* that should be offered (a load's cold keys)."""
        self._settle_key(ns, key)

    def _settle_key(self, ns: NodeState, key: str) -> None:
        """Place the member of *key* that should be offered (see ``ordered``)."""
        q = ns.queue
        fifo = q.keys.get(key)
        if fifo is None:
            return
        want = fifo.wanted()
        tail = q.tail
        if want is not None and fifo.is_cold(want):
            # Not in memory: placed once a dispatch reads it back (``backlog``).
            assert tail is not None
            tail.cold_heads.add(key)
            want = None
        elif tail is not None and tail.cold_heads:
            tail.cold_heads.discard(key)
        if want != fifo.placed:
            if fifo.placed is not None:
                self._unplace(ns, ns.items[fifo.members[fifo.placed]])
            fifo.placed = want
            if want is not None:
                self._place(ns, ns.items[fifo.members[want]])
        if not fifo:
            del q.keys[key]

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
