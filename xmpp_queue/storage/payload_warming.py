"""Items handed out by the store carry their payloads, fetched if they were cold.

The tail of a long queue keeps its payloads in the database (``COLD``, see
``store``); every read that hands items to the core goes through
:meth:`PayloadWarming._warm`, which fetches the missing ones in one query and
keeps them. The base of the items repository's parts (``items_repo``,
``items_retained``, ``items_queue``), which share its state, change set and reader.
"""

from __future__ import annotations

from typing import Protocol

from xmpp_queue.core.model import Item
from xmpp_queue.storage import backlog
from xmpp_queue.storage.backlog import ColdReader
from xmpp_queue.storage.changes import ChangeSet
from xmpp_queue.storage.item_values import COLD, with_payload_value
from xmpp_queue.storage.node_state import NodeState
from xmpp_queue.storage.state import MemoryState


class PayloadReader(ColdReader, Protocol):
    """Fetches payloads and cold items kept in the database (committed items only)."""

    async def payloads(self, node_id: str, item_ids: list[str]) -> dict[str, str | None]: ...


class PayloadWarming:
    """The items repository's state, change set and payload reader, and the warming."""

    def __init__(self, state: MemoryState, changes: ChangeSet, reader: PayloadReader) -> None:
        self._s = state
        self._c = changes
        self._reader = reader

    async def _warm(
        self, ns: NodeState, items: list[Item], also: list[str] | None = None
    ) -> list[Item]:
        """*items* with every payload in hand: the cold ones (and the cold ones
        among the ids in *also*, a prefetch) are fetched in one query and kept."""
        cold = [i.item_id for i in items if i.payload is COLD]
        if not cold:
            return items
        stored = ns.items
        if also:
            cold += [x for x in also if (i := stored.get(x)) is not None and i.payload is COLD]
        fetched = await self._reader.payloads(ns.node.node_id, cold)
        for item_id in cold:
            current = stored.get(item_id)
            if current is not None and current.payload is COLD:
                # Same state, payload in hand: no index or change record moves.
                stored[item_id] = with_payload_value(current, fetched.get(item_id))
        return [stored.get(i.item_id, i) if i.payload is COLD else i for i in items]

    async def _find(self, ns: NodeState | None, item_id: str) -> Item | None:
        """The item *item_id* of *ns*, brought back whole if it was cold (``backlog``)."""
        if ns is None:
            return None
        found = ns.items.get(item_id)
        if found is None and ns.queue.tail:
            return await backlog.find(self._s, ns, self._reader, item_id)
        return found

    async def _warm_opt(self, ns: NodeState | None, items: list[Item]) -> list[Item]:
        return await self._warm(ns, items) if ns is not None else items
