"""A backend whose writes wait for the test's word: the commit pipeline, held still.

Wraps the real backend of a :class:`StateStore` (memory, SQLite or PostgreSQL).
While ``hold`` is on, every write stops before reaching the database until the
test decides it: :meth:`GatedBackend.release` lets it through (the real write
runs), :meth:`GatedBackend.fail` makes it fail as a full disk or a lost database
would (the database is not touched). So a test can keep batch N's commit "in
flight" as long as it likes, run batch N+1 meanwhile, and check what nobody may
see yet. Everything else (load, reads, close) goes straight to the real backend.
"""

from __future__ import annotations

import asyncio
from typing import Any

from xmpp_queue.storage.backend import FlushFailed
from xmpp_queue.storage.flush import Flush
from xmpp_queue.storage.store import StateStore


class GatedBackend:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.keeps_payloads: bool = inner.keeps_payloads
        self.hold = False
        self.held: list[asyncio.Future[BaseException | None]] = []  # one per write, in order
        self.flushes: list[Flush] = []  # what each held write was asked to write

    @classmethod
    def around(cls, store: StateStore) -> GatedBackend:
        """Put a gate between *store* and its backend; returns the gate."""
        gate = cls(store.backend)
        store.backend = gate  # type: ignore[assignment]
        return gate

    async def write(self, flush: Flush) -> None:
        if not self.hold:
            await self.inner.write(flush)
            return
        decision: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
        self.held.append(decision)
        self.flushes.append(flush)
        error = await decision
        if error is not None:
            raise FlushFailed(error, maybe_committed=getattr(error, "uncertain", False))
        await self.inner.write(flush)

    def write_now(self, flush: Flush) -> bool:
        """Held writes never happen here and now: they go to :meth:`write`."""
        return False if self.hold else bool(self.inner.write_now(flush))

    def release(self, n: int) -> None:
        """Let held write number *n* (0: the first held) reach the database."""
        self.held[n].set_result(None)

    def fail(self, n: int, error: BaseException) -> None:
        """Fail held write number *n*; an *error* with ``uncertain = True`` says the
        database may have committed it (the store reloads then)."""
        self.held[n].set_result(error)

    async def arrived(self, n: int, unless: list[asyncio.Future[Any]]) -> bool:
        """Wait until *n* writes were held (True), or every one of *unless* is done
        first (False: their batches wrote nothing)."""
        while len(self.held) < n:
            if all(f.done() for f in unless):
                return len(self.held) >= n
            await asyncio.sleep(0.001)
        return True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class WriteRefused(Exception):
    """The simulated failure of a held write (not an outage: never retried)."""

    def __init__(self, uncertain: bool = False) -> None:
        super().__init__("simulated: the database refused the commit")
        self.uncertain = uncertain
