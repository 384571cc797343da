"""The store-wide index of bound queues without subscribers (``pubsub#queue_expire_after``).

A queue bound to a topic, with ``queue_expire_after`` > 0 and no subscriber,
is deleted once it has been so for that long. Finding those must cost what is
due, never a scan of every node: one heap of ``(deadline, node_id, gen,
since)`` entries, lazily checked when one surfaces, like the other deadline
heaps of ``time_indexes``.

``gen`` is a store-wide counter stamped on a node at each subscription added
or removed through the repository (``touch``). An entry is live while its
node is still an eligible, subscriberless bound queue with the same stamp: a
subscriber that came back (and maybe left again) makes it stale. Stamps need
no clock, so the storage layer stays clock-free; the deadline comes from the
core (``file``, at the end of each operation that touched the node) or, for
nodes known only without a time (at load, after a rollback put whole nodes
back), from the first ``next_due``/``due`` call, which passes the time: such
nodes wait in ``pending`` and are filed at that moment plus their delay. So a
restart starts the clock again (a queue is never deleted earlier than its
delay after the last moment the service saw it unsubscribed; it may be later
by the downtime). A rollback can leave a stale entry or stamp, never a wrong
deletion: every entry is checked against the node as it is when it surfaces.

``until`` is ``since`` plus the node's delay *now*: a lengthened delay is seen
when the entry surfaces (filed again), a shortened one fires at the old time.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Protocol

from xmpp_queue.core.model import Node, Subscription

UnusedEntry = tuple[datetime, str, int, datetime]  # (until, node_id, gen, since)
SLACK = 64


class HasSubs(Protocol):
    node: Node
    subs: dict[str, Subscription]


def eligible(node: Node) -> bool:
    cfg = node.config
    return cfg.queue and bool(cfg.queue_topic) and cfg.queue_expire_after > 0


def _until(node: Node, since: datetime) -> datetime:
    return since + timedelta(seconds=node.config.queue_expire_after)


class UnusedIndex:
    """Deadlines of unsubscribed bound queues (see the module docstring)."""

    __slots__ = ("filed", "gen", "heap", "pending", "stamps")

    def __init__(self) -> None:
        self.heap: list[UnusedEntry] = []
        self.gen = 0
        self.stamps: dict[str, int] = {}  # node -> gen of its last subscription change
        self.filed: dict[str, int] = {}  # node -> the stamp it has a live entry for
        self.pending: dict[str, None] = {}  # nodes to file at the next time given

    def touch(self, node_id: str) -> None:
        """A subscription of *node_id* was added or removed."""
        self.gen += 1
        self.stamps[node_id] = self.gen

    def file(self, ns: HasSubs, now: datetime) -> bool:
        """File *ns* from *now* if it is an eligible queue with no subscriber and not
        already filed since its last subscription change. True when filed."""
        node_id = ns.node.node_id
        if ns.subs or not eligible(ns.node):
            return False
        stamp = self.stamps.get(node_id, 0)
        if self.filed.get(node_id) == stamp:
            return False
        self.filed[node_id] = stamp
        self.pending.pop(node_id, None)
        heapq.heappush(self.heap, (_until(ns.node, now), node_id, stamp, now))
        return True

    def rebuild(self, nodes: Mapping[str, HasSubs]) -> None:
        """After a load or whole nodes put back: every eligible node waits for a time."""
        self.filed = {}
        self.pending = {n: None for n, ns in nodes.items() if not ns.subs and eligible(ns.node)}
        self.compact(nodes)

    def compact(self, nodes: Mapping[str, HasSubs]) -> None:
        if len(self.heap) > 2 * len(nodes) + SLACK:
            self.heap = [e for e in self.heap if e[1] in nodes]
            heapq.heapify(self.heap)

    def _file_pending(self, nodes: Mapping[str, HasSubs], now: datetime) -> None:
        for node_id in list(self.pending):
            ns = nodes.get(node_id)
            self.pending.pop(node_id, None)
            if ns is not None:
                self.file(ns, now)

    def _settle_top(self, nodes: Mapping[str, HasSubs], now: datetime) -> UnusedEntry | None:
        """Drop or refile stale entries at the top; the live top entry, or None."""
        heap = self.heap
        while heap:
            until, node_id, stamp, since = heap[0]
            ns = nodes.get(node_id)
            current = self.stamps.get(node_id, 0)
            if ns is None or ns.subs or not eligible(ns.node):
                heapq.heappop(heap)
                if self.filed.get(node_id) == stamp:
                    del self.filed[node_id]
                continue
            if stamp != current:
                heapq.heappop(heap)  # the subscriptions changed since it was filed
                if self.filed.get(node_id) != current:
                    self.file(ns, max(now, since))  # e.g. a rolled-back change: start again
                continue
            fresh = _until(ns.node, since)
            if fresh > until:  # the delay was lengthened since: file it again
                heapq.heapreplace(heap, (fresh, node_id, stamp, since))
                continue
            return heap[0]
        return None

    def due(self, nodes: Mapping[str, HasSubs], now: datetime, limit: int) -> list[str]:
        """Queues unused past their delay by *now*, earliest first. Their entries stay
        until the caller deletes the nodes (then they are stale), so a rolled-back
        deletion is found again."""
        self._file_pending(nodes, now)
        found: list[str] = []
        kept: list[UnusedEntry] = []
        while len(found) < limit:
            top = self._settle_top(nodes, now)
            if top is None or top[0] > now:
                break
            heapq.heappop(self.heap)
            if top[1] not in found:
                found.append(top[1])
                kept.append(top)
        for entry in kept:
            heapq.heappush(self.heap, entry)
        return found

    def next_due(self, nodes: Mapping[str, HasSubs], now: datetime) -> datetime | None:
        self._file_pending(nodes, now)
        top = self._settle_top(nodes, now)
        return top[0] if top is not None else None
