"""The items repository's retention verbs (``pubsub#queue_retain_acked``).

A retained item was acked but is kept, out of every queue index, so an owner
may seek back to it (``core/replay.py``). It lives in ``NodeState.retained``;
these verbs move items in and out of there, recording each change in the
transaction like any other write. A part of ``items_repo.ItemsRepo``.
"""

from __future__ import annotations

from datetime import datetime

from xmpp_queue.core.model import Item, copy_item
from xmpp_queue.storage.item_values import COLD, utc, with_payload_value, without_lock
from xmpp_queue.storage.node_state import NodeState
from xmpp_queue.storage.payload_warming import PayloadWarming


class RetainedItems(PayloadWarming):
    """Retain, restore, forget and expire acked items kept for a seek."""

    def _forget_retained(self, ns: NodeState, item_id: str) -> None:
        """A new item with a retained item's id replaces it (one row per id)."""
        if item_id in ns.retained:
            self._c.touch_retained(ns.node.node_id, item_id)
            self._s.set_retained(ns, item_id, None)

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
