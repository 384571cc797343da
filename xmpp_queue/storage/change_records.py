"""What one transaction changed: the original value of every key it touched.

Before the first change of a key, the store's repositories call a ``touch_*``
method here, which records the key's value as the transaction (or the current
savepoint level) found it; a node-level change records a shallow copy of the
whole :class:`NodeState`. Those records are all that commit (``commit_plan``)
and undo (``undo``) need. The base of :class:`~xmpp_queue.storage.changes.ChangeSet`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Self

from xmpp_queue.core.ledger import FINISHED, LedgerEvent
from xmpp_queue.core.model import Affiliation, Item, Subscription
from xmpp_queue.storage.flush import AffKey, ItemKey, SubKey
from xmpp_queue.storage.node_state import NodeState
from xmpp_queue.storage.state import MemoryState


@dataclass(slots=True)
class Level:
    """The records of the levels below an open savepoint."""

    nodes: dict[str, NodeState | None]
    dropped: set[str]
    purged: set[str]
    items: dict[ItemKey, Item | None]
    subs: dict[SubKey, tuple[Subscription, int] | None]
    affiliations: dict[AffKey, Affiliation | None]
    retained: dict[ItemKey, Item | None]
    events: int  # how many ledger rows were buffered when the savepoint began


class ChangeRecords:
    """The records of one transaction (see the module docstring)."""

    __slots__ = (
        "_below",
        "affiliations",
        "dropped",
        "earlier",
        "events",
        "items",
        "nodes",
        "purged",
        "retained",
        "state",
        "subs",
    )

    def __init__(self, state: MemoryState) -> None:
        self.state = state
        # node id -> snapshot taken before the first node-level change (None: absent)
        self.nodes: dict[str, NodeState | None] = {}
        self.dropped: set[str] = set()
        self.purged: set[str] = set()
        self.items: dict[ItemKey, Item | None] = {}
        self.subs: dict[SubKey, tuple[Subscription, int] | None] = {}
        self.affiliations: dict[AffKey, Affiliation | None] = {}
        # Retained items (``NodeState.retained``), recorded like ``items``.
        self.retained: dict[ItemKey, Item | None] = {}
        self.events: list[LedgerEvent] = []
        # The ledger rows of the commit still in flight below this one (the
        # commit pipeline, ``inflight.py``): pending too, for the dedup window.
        self.earlier: list[LedgerEvent] = []
        self._below: list[Level] = []

    def __bool__(self) -> bool:
        if self._below:
            return True  # an open savepoint: something may have changed below it
        return bool(
            self.nodes
            or self.items
            or self.subs
            or self.affiliations
            or self.retained
            or self.events
        )

    def finished_pending(self, node_id: str, item_id: str, since: datetime) -> bool:
        """Whether this transaction's (not yet committed) ledger rows ack or retract
        *item_id* at or after *since*: the dedup window before the commit (this
        transaction's rows and those of the commit in flight before it)."""
        for event in (*reversed(self.events), *reversed(self.earlier)):
            if (
                event.item_id == item_id
                and event.node == node_id
                and event.kind in FINISHED
                and event.at >= since
            ):
                return True
        return False

    def _origin(self, node_id: str) -> NodeState | None:
        """The node as the transaction found it, for keys not touched yet."""
        if node_id in self.nodes:
            return self.nodes[node_id]
        return self.state.nodes.get(node_id)

    def touch_node(self, node_id: str) -> None:
        if node_id not in self.nodes:
            ns = self.state.nodes.get(node_id)
            self.nodes[node_id] = ns.copy() if ns is not None else None

    def touch_item(self, node_id: str, item_id: str) -> None:
        key = (node_id, item_id)
        if key not in self.items:
            # _origin() inlined: this runs for every item write.
            nodes = self.nodes
            origin = nodes[node_id] if node_id in nodes else self.state.nodes.get(node_id)
            self.items[key] = origin.items.get(item_id) if origin is not None else None

    def touch_retained(self, node_id: str, item_id: str) -> None:
        key = (node_id, item_id)
        if key not in self.retained:
            origin = self._origin(node_id)
            self.retained[key] = origin.retained.get(item_id) if origin is not None else None

    def touch_sub(self, node_id: str, subid: str) -> None:
        key = (node_id, subid)
        if key not in self.subs:
            origin = self._origin(node_id)
            if origin is None or subid not in origin.subs:
                self.subs[key] = None
            else:
                self.subs[key] = (origin.subs[subid], origin.sub_ids[subid])

    def touch_affiliation(self, node_id: str, jid: str) -> None:
        key = (node_id, jid)
        if key not in self.affiliations:
            origin = self._origin(node_id)
            self.affiliations[key] = origin.affiliations.get(jid) if origin is not None else None

    def detach(self) -> Self:
        """Hand the records to a new change set (a commit in flight keeps them
        to undo itself) and start afresh, as after a commit."""
        if self._below:
            raise RuntimeError("a savepoint is still open")
        handed = type(self)(self.state)
        handed.nodes, handed.dropped, handed.purged = self.nodes, self.dropped, self.purged
        handed.items, handed.subs, handed.affiliations = self.items, self.subs, self.affiliations
        handed.retained, handed.events = self.retained, self.events
        self.clear()
        return handed

    def clear(self) -> None:
        self.nodes = {}
        self.dropped = set()
        self.purged = set()
        self.items = {}
        self.subs = {}
        self.affiliations = {}
        self.retained = {}
        self.events = []
