"""ReadCache: what one SQL transaction already read and nobody else can change.

Why: the service runs a burst of operations in one transaction (group commit),
and each publish re-reads the same few rows: the node, the publisher's
affiliation, the node's subscriptions and the per-subscriber lock counts. Within
one transaction this store is the only writer that matters (SQLite: BEGIN
IMMEDIATE holds the write lock; PostgreSQL: the service is the one writer of
its schema), so these reads are served from memory after the first one.

Rules: reads fill; every write through the repositories drops what it may have
changed, except lock counts, which lock/unlock adjust exactly (a successful
conditional lock adds one to its subid; a successful unlock removes one).
Values are frozen dataclasses; lists and dicts are copied on the way out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xmpp_queue.core.model import Affiliation, Node, Subscription


@dataclass(slots=True)
class ReadCache:
    nodes: dict[str, Node | None] = field(default_factory=dict)
    affiliations: dict[tuple[str, str], Affiliation] = field(default_factory=dict)
    subscriptions: dict[str, list[Subscription]] = field(default_factory=dict)
    in_flight: dict[str, dict[str, int]] = field(default_factory=dict)

    def forget_node(self, node_id: str) -> None:
        """Drop everything known about *node_id* (created, reconfigured or removed)."""
        self.nodes.pop(node_id, None)
        self.subscriptions.pop(node_id, None)
        self.in_flight.pop(node_id, None)
        for key in [k for k in self.affiliations if k[0] == node_id]:
            del self.affiliations[key]

    def locked(self, node_id: str, subid: str) -> None:
        loads = self.in_flight.get(node_id)
        if loads is not None:
            loads[subid] = loads.get(subid, 0) + 1

    def unlocked(self, node_id: str, subid: str) -> None:
        loads = self.in_flight.get(node_id)
        if loads is None:
            return
        left = loads.get(subid, 0) - 1
        if left > 0:
            loads[subid] = left
        else:
            loads.pop(subid, None)
