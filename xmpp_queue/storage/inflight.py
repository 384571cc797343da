"""One commit handed to the backend and not yet settled (the commit pipeline).

Why a pipeline: a durable commit waits on the disk (fsync) or on the database's
round trip, while memory is already the truth. So the store lets the next
transaction run its operations against memory while the previous one's write is
in flight, and starts that transaction's write when the previous one settled.
The rules, kept by ``store.py`` and proved by the property tests:

- **At most one commit in flight.** A transaction that hands off its changes
  while another commit is in flight first waits for it; so writes reach the
  database in the order their transactions ran, and the rows of commit N+1
  never land before those of N.
- **Durable before told.** The awaitable a hand-off returns resolves only when
  the write committed; a caller answers and sends effects after that.
- **A failure takes everything built on it.** When commit N fails, the
  transaction running on top of it (N+1) fails too, however its own operations
  went: its changes are undone first, then N's, so memory equals the last
  durable state again (undo in the reverse order of the changes). When nobody
  builds on N, N's changes are undone as soon as it fails.

``InFlight`` is the record the store keeps for that: the handed-off
:class:`~xmpp_queue.storage.changes.ChangeSet` (its originals undo it), the
plan being written (a snapshot: frozen rows, taken at hand-off), the future the
callers wait on, and whether a transaction is building on top of it (then that
transaction undoes it on failure, not the write's completion).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from xmpp_queue.storage.changes import ChangeSet
from xmpp_queue.storage.flush import Flush


@dataclass(slots=True, eq=False)
class InFlight:
    """A handed-off commit (see the module docstring)."""

    changes: ChangeSet
    flush: Flush
    done: asyncio.Future[None]
    dependent: bool = False  # a transaction is running on top of these changes
    failed: BaseException | None = None
    maybe_committed: bool = False
    undone: bool = False
    task: asyncio.Task[None] | None = field(default=None, repr=False)  # the write

    def settled(self) -> bool:
        return self.done.done()


def durable_now() -> asyncio.Future[None]:
    """An already-resolved hand-off: a transaction that changed nothing."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future
