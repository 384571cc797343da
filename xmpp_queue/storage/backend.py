"""What the store needs from persistence: load the state once, write each commit.

The store (``store.py``) keeps the whole state in memory and is the only
implementation of the core's ports; a backend only persists. Three exist:

- ``backend_memory.MemoryBackend``: nothing persists (unit, protocol and admin
  tests; ``demo --memory``); committed ledger rows are kept in a list so ledger
  reads behave as with a database;
- ``backend_sqlite.SqliteBackend`` and ``backend_postgres.PostgresBackend``
  (opened by ``backend_sql.open_sql_backend``): the migrated schema, written
  with one transaction per commit.

A backend reports a failed write as :class:`FlushFailed`, saying whether the
database may have committed anyway (then the store reloads rather than guess).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import Item
from xmpp_queue.storage.flush import Flush
from xmpp_queue.storage.state import MemoryState

if TYPE_CHECKING:
    from xmpp_queue.storage.lease import Fence


class FlushFailed(Exception):
    """A write failed. ``maybe_committed``: the failure came with or after COMMIT,
    so the database may hold the batch after all (memory must be reloaded)."""

    def __init__(self, error: BaseException, maybe_committed: bool) -> None:
        super().__init__(str(error))
        self.error = error
        self.maybe_committed = maybe_committed


class Backend(Protocol):
    keeps_payloads: bool
    """Whether payloads written can be read back (:meth:`payloads`): if so, the
    store may drop waiting items' payloads from memory after a commit."""

    async def load(self) -> MemoryState: ...

    async def write(self, flush: Flush) -> None:
        """Write *flush* in one transaction and commit; raise FlushFailed."""

    def write_now(self, flush: Flush) -> bool:
        """Write *flush* here, without yielding to the event loop, when this backend
        commits on the loop anyway (SQLite while its commits stay quick, memory);
        False: nothing was written, :meth:`write` must. Raises as :meth:`write`.

        Why: a commit that is done before the call returns settles its batch with
        no task, shield or callback turn between the commit and the answers."""

    async def ledger_count(self, node_id: str, kind: EventKind, since: datetime) -> int: ...

    async def payloads(self, node_id: str, item_ids: list[str]) -> dict[str, str | None]: ...

    async def ledger_events(self, node_id: str | None) -> list[LedgerEvent]: ...

    async def items_by_seq(self, node_id: str, seqs: list[int]) -> list[Item]:
        """Committed rows, whole, in seq order (cold items: ``backlog``)."""

    async def item_by_id(self, node_id: str, item_id: str) -> Item | None: ...

    async def tail_ids(self, node_id: str, after: int, upto: int) -> list[tuple[int, str]]:
        """(seq, item id) of plain waiting items with *after* < seq <= *upto*."""

    async def close(self) -> None: ...


async def open_backend(url: str | None, fence: Fence | None = None) -> Backend:
    """The backend for a database URL; None means no persistence at all. With a
    *fence* (PostgreSQL only) every commit first checks that the lease is ours."""
    if url is None:
        from xmpp_queue.storage.backend_memory import MemoryBackend

        return MemoryBackend()
    from xmpp_queue.storage.backend_sql import open_sql_backend

    return await open_sql_backend(url, fence)
