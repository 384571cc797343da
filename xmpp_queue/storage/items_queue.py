"""The items repository's queue verbs: ready items, locks, deadlines, queue stats.

What only a queue asks of its items (XEP-0254): the next ready ones (with the
payloads of what comes next prefetched), lock, unlock and extend, who holds
what, what came due, and the figures of a queue. Each answers from the indexes
of ``MemoryState`` without a scan. A part of ``items_repo.ItemsRepo``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from xmpp_queue.core.model import Item, copy_item
from xmpp_queue.core.ports import QueueStats
from xmpp_queue.storage import backlog
from xmpp_queue.storage.item_values import (
    COLD,
    PREFETCH,
    frozen_headers,
    utc,
    utc_opt,
    with_deadline,
    with_lock,
    without_lock,
)
from xmpp_queue.storage.node_state import NodeState
from xmpp_queue.storage.payload_warming import PayloadWarming


class QueueItems(PayloadWarming):
    """The queue's view of its items (see the module docstring)."""

    async def next_ready(self, node_id: str, now: datetime, limit: int) -> list[Item]:
        ns = self._s.nodes.get(node_id)
        if ns is None or limit <= 0:
            return []
        tail = ns.queue.tail
        if tail:
            if tail.due:  # what came due joins the cold ready levels first
                self._s.promote_due(ns, now)
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
        item = ns.items.get(item_id) if ns is not None else None
        if item is None and ns is not None and ns.queue.tail:  # inlined: the hot path
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

    async def held_by(self, node_id: str, subid: str) -> int:
        ns = self._s.nodes.get(node_id)
        return ns.queue.loads.get(subid, 0) if ns is not None else 0

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
        for ns, seqs in self._s.cold_expired(now, limit):  # cold ones come back whole
            await backlog.bring_back_seqs(self._s, ns, self._reader, seqs)
        return self._s.expired_waiting(now, limit)

    async def due_delayed_nodes(self, now: datetime, limit: int) -> list[str]:
        if limit <= 0:
            return []
        return self._s.due_delayed_nodes(now, limit)

    async def hold_dispatch(self, node_id: str, until: datetime) -> None:
        self._s.holds.hold(node_id, utc(until))

    async def due_held_nodes(self, now: datetime, limit: int) -> list[str]:
        return [n for n in self._s.holds.due(utc(now), limit) if n in self._s.nodes]

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
            self._s.next_cold_expiry(),
            self._s.retention.next_due(self._s.nodes),
            self._s.unused.next_due(self._s.nodes, now),
            self._s.holds.next_due(),
        ]
        return min((m for m in moments if m is not None), default=None)

    async def queue_stats(self, node_id: str) -> QueueStats:
        ns = self._s.nodes.get(node_id)
        if ns is None:
            return QueueStats(0, 0, None)
        if ns.queue.tail:
            await backlog.ensure_heads(self._s, ns, self._reader, 1)  # the oldest, whole
        in_flight = len(ns.queue.locked)
        tail = ns.queue.tail
        return QueueStats(
            backlog=backlog.count(ns) - in_flight,
            in_flight=in_flight,
            oldest_waiting=await self._oldest_waiting(ns),
            delayed=ns.queue.delayed_live + (tail.delayed_count() if tail is not None else 0),
        )

    async def _oldest_waiting(self, ns: NodeState) -> datetime | None:
        """published_at of the first unlocked item in publish order (publish
        order is publish-time order): the lowest ready or delayed seq (a cold
        delayed one read from its row, not kept)."""
        q = ns.queue
        candidates = [ns.items[i] for i in q.ready.first(1)]
        candidates += [
            i
            for _, _, item_id in q.delayed
            if (i := ns.items.get(item_id)) is not None and i.locked_by is None
        ]
        oldest = min(candidates, key=lambda i: i.seq) if candidates else None
        cold = q.tail.first_delayed() if q.tail is not None else None
        if cold is not None and (oldest is None or cold < oldest.seq):
            rows = await self._reader.items_by_seq(ns.node.node_id, [cold])
            oldest = rows[0] if rows else oldest
        return oldest.published_at if oldest is not None else None

    async def count_locked(self) -> int:
        return self._s.locked_total
