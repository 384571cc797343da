"""The store-wide index of retained items' expiry (``pubsub#queue_retain_acked``).

A retained item (acked, kept for a seek: ``Item.acked_at`` set) sits in its
node's ``NodeState.retained``, out of every queue index, with its payload in
the database. It must go when its retention ends, and finding those must cost
what is due, not the number of retained items: one heap of
``(until, seq, node_id, item_id, acked_at)``, lazily cleaned like the other
deadline heaps of ``time_indexes``. An entry is live while its node still retains
that item with that seq and ack time (a replayed and acked again item has a
newer entry; the old one is skipped).

``until`` is the ack time plus the node's retention *when the item was
acked*: shortening the retention later lets the items already retained keep
their time (they expire at the later time), lengthening it is seen when the
entry surfaces (it is filed again under the new time). A reload files every
item under the node's current retention.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Protocol

from xmpp_queue.core.model import Item, Node

RetainedEntry = tuple[datetime, int, str, str, datetime]
SLACK = 64


class HasRetained(Protocol):
    node: Node
    retained: dict[str, Item]


def retained_until(node: Node, item: Item) -> datetime:
    assert item.acked_at is not None
    return item.acked_at + timedelta(seconds=node.config.queue_retain_acked)


class RetainedIndex:
    """Expiry times of every retained item of the store (see the module docstring)."""

    __slots__ = ("heap", "total")

    def __init__(self) -> None:
        self.heap: list[RetainedEntry] = []
        self.total = 0  # live retained items, store-wide

    def push(self, node: Node, item: Item) -> None:
        assert item.acked_at is not None
        until = retained_until(node, item)
        heapq.heappush(self.heap, (until, item.seq, item.node, item.item_id, item.acked_at))

    def rebuild(self, nodes: Mapping[str, HasRetained]) -> None:
        self.heap = []
        self.total = 0
        for ns in nodes.values():
            for item in ns.retained.values():
                self.total += 1
                self.push(ns.node, item)

    def compact(self, nodes: Mapping[str, HasRetained]) -> None:
        if len(self.heap) > 2 * self.total + SLACK:
            self.heap = sorted({e for e in self.heap if _live(nodes, e) is not None})

    def due(self, nodes: Mapping[str, HasRetained], now: datetime, limit: int) -> list[Item]:
        """Retained items whose retention ended by *now*, earliest first. Their
        entries stay until the caller removes them (then they are stale)."""
        found: list[Item] = []
        kept: list[RetainedEntry] = []
        seen: set[tuple[str, str]] = set()
        heap = self.heap
        while heap and len(found) < limit and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            item = _live(nodes, entry)
            if item is None or (entry[2], entry[3]) in seen:
                continue
            ns = nodes[entry[2]]
            until = retained_until(ns.node, item)
            if until > now:  # the retention was lengthened since: file it again
                heapq.heappush(heap, (until, *entry[1:]))
                continue
            seen.add((entry[2], entry[3]))
            kept.append(entry)
            found.append(item)
        for entry in kept:
            heapq.heappush(heap, entry)
        return found

    def next_due(self, nodes: Mapping[str, HasRetained]) -> datetime | None:
        heap = self.heap
        while heap and _live(nodes, heap[0]) is None:
            heapq.heappop(heap)
        return heap[0][0] if heap else None


def _live(nodes: Mapping[str, HasRetained], entry: RetainedEntry) -> Item | None:
    _, seq, node_id, item_id, acked_at = entry
    ns = nodes.get(node_id)
    item = ns.retained.get(item_id) if ns is not None else None
    if item is None or item.seq != seq or item.acked_at != acked_at:
        return None
    return item
