"""One transaction of the :class:`~xmpp_queue.storage.store.StateStore`: the core's
repositories over the store's memory, and the record of what they changed.

Why apart from ``store.py``: the store decides when and where changes are written
(one commit in flight, ``inflight``); a transaction is only the view an operation
works through and the change set it leaves behind for that write.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from xmpp_queue.core.ports import (
    AffiliationRepository,
    EventLedger,
    ItemRepository,
    NodeRepository,
    Savepoint,
    SubscriptionRepository,
)
from xmpp_queue.storage.changes import ChangeSet
from xmpp_queue.storage.inflight import AfterInFlight
from xmpp_queue.storage.items_repo import ItemsRepo
from xmpp_queue.storage.repositories import (
    AffiliationsRepo,
    LedgerRepo,
    NodesRepo,
    SubscriptionsRepo,
)
from xmpp_queue.storage.state import MemoryState

if TYPE_CHECKING:
    from xmpp_queue.storage.store import StateStore


class StateTransaction:
    """Repositories over the store's memory plus the record of what changed."""

    def __init__(self, store: StateStore, state: MemoryState) -> None:
        self._store = store
        self.changes = ChangeSet(state)
        self.nodes: NodeRepository = NodesRepo(state, self.changes)
        self.affiliations: AffiliationRepository = AffiliationsRepo(state, self.changes)
        self.subscriptions: SubscriptionRepository = SubscriptionsRepo(state, self.changes)
        self.items: ItemRepository = ItemsRepo(state, self.changes, store.backend)
        self.ledger: EventLedger = LedgerRepo(self.changes, AfterInFlight(store))

    def savepoint(self) -> Savepoint:
        """One operation's mark: its changes can be undone alone (per-operation undo)."""
        return self.changes.savepoint()

    async def hand_off(self) -> asyncio.Future[None]:
        """Start writing what changed; the future resolves once it is durable.

        Waits for the commit in flight first (one at a time); raises, with
        this transaction's changes undone, if that commit failed."""
        return await self._store.hand_off(self)

    async def commit(self) -> None:
        """Write what changed and wait until durable; on failure memory is rolled back."""
        durable = await self.hand_off()
        await asyncio.shield(durable)

    def rollback(self) -> None:
        if self.changes:
            self.changes.rollback()
