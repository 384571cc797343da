"""The demo's numbers, read from the component's event ledger through the store.

Why the store's own readers (``Backend.ledger_count``, ``Backend.ledger_events``)
and no SQL here: the ledger's table and columns belong to the storage layer; the
demo only asks what happened to its queue. The component is the database's only
writer; these readers never write.
"""

from __future__ import annotations

from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from xmpp_queue.core.ledger import EventKind
from xmpp_queue.demo.plan import NODE
from xmpp_queue.storage.backend import Backend

SINCE_EVER = datetime(1970, 1, 1, tzinfo=UTC)
PROGRESS_KINDS = (EventKind.PUBLISHED, EventKind.ACKED, EventKind.DEAD_LETTERED)
SUMMARY_KINDS = (*PROGRESS_KINDS, EventKind.UNLOCKED, EventKind.EXPIRED)


class DemoLedger:
    """Counts of the demo queue's ledger events, by kind (``"acked"``: 12, ...)."""

    def __init__(self, db_url: str) -> None:
        self.db_url = db_url
        self._backend: Backend | None = None

    async def __aenter__(self) -> DemoLedger:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _reader(self) -> Backend:
        if self._backend is None:
            # Imported here: every ``xmpp-queue`` command builds the demo's parser.
            from xmpp_queue.storage.backend_sql import open_sql_backend

            self._backend = await open_sql_backend(self.db_url)
        return self._backend

    async def counts(self, kinds: tuple[EventKind, ...] = PROGRESS_KINDS) -> dict[str, int]:
        """How many events of each of *kinds* the demo queue has had so far."""
        reader = await self._reader()
        return {kind.value: await reader.ledger_count(NODE, kind, SINCE_EVER) for kind in kinds}

    async def summary(self) -> dict[str, Any]:
        """The service's account of the run: each kind's count, deliveries and
        redeliveries (a delivery of an item delivered before)."""
        counts = await self.counts(SUMMARY_KINDS)
        events = await (await self._reader()).ledger_events(NODE)
        delivered = [e.item_id for e in events if e.kind is EventKind.DELIVERED]
        return {
            "published": counts["published"],
            "acked": counts["acked"],
            "delivered": len(delivered),
            "redelivered": len(delivered) - len(set(delivered)),
            "unlocked": counts["unlocked"],
            "expired": counts["expired"],
            "dead_lettered": counts["dead_lettered"],
        }

    async def close(self) -> None:
        backend, self._backend = self._backend, None
        if backend is not None:
            await backend.close()
