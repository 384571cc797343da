"""Flush: the rows one commit writes, the one thing a backend is handed.

The change set (``changes``) works out the difference between what a
transaction found and what memory holds now (``commit_plan``); the result is a
:class:`Flush`, plain lists of values grouped in the order foreign keys need,
so a backend writes it without knowing anything of the store's memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xmpp_queue.core.ledger import LedgerEvent
from xmpp_queue.core.model import Affiliation, Item, Node, Snapshot, Subscription

ItemKey = tuple[str, str]  # (node_id, item_id)
SubKey = tuple[str, str]  # (node_id, subid)
AffKey = tuple[str, str]  # (node_id, jid)


@dataclass(slots=True)
class Flush:
    """The rows one commit writes, grouped in the order foreign keys need.

    Deletes of children, then of nodes; then upserts of nodes, then of their
    children; then the ledger rows. ``max_seq``/``max_sub_id`` are the highest
    ids handed out so far (PostgreSQL moves its sequences past them).
    """

    clear_nodes: list[str] = field(default_factory=list)  # every child row goes
    clear_items: list[str] = field(default_factory=list)  # purge: item rows go
    item_deletes: list[ItemKey] = field(default_factory=list)
    sub_deletes: list[SubKey] = field(default_factory=list)
    aff_deletes: list[AffKey] = field(default_factory=list)
    node_deletes: list[str] = field(default_factory=list)
    node_upserts: list[Node] = field(default_factory=list)
    aff_upserts: list[tuple[str, str, Affiliation]] = field(default_factory=list)
    sub_upserts: list[tuple[int, Subscription]] = field(default_factory=list)
    item_upserts: list[Item] = field(default_factory=list)
    # Nodes whose snapshots changed: their rows are replaced by these.
    snapshot_nodes: list[tuple[str, list[Snapshot]]] = field(default_factory=list)
    events: list[LedgerEvent] = field(default_factory=list)
    max_seq: int = 0
    max_sub_id: int = 0

    def empty(self) -> bool:
        return not (
            self.clear_nodes
            or self.clear_items
            or self.item_deletes
            or self.sub_deletes
            or self.aff_deletes
            or self.node_deletes
            or self.node_upserts
            or self.aff_upserts
            or self.sub_upserts
            or self.item_upserts
            or self.snapshot_nodes
            or self.events
        )
