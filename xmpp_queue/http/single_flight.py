"""One read in flight at a time, shared by every caller that asks meanwhile.

Why: the dashboard's reads (the queue overview, the deployment's queues) are
whole-store or whole-database passes that several requests (page polls,
``/metrics`` scrapes) ask for at once. The first caller starts the read; the
others await the same one. A caller that goes away (a closed connection
cancels its handler) does not cancel the read the others wait for: it is
awaited through ``asyncio.shield``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    """The read in flight, if any (module docstring)."""

    def __init__(self) -> None:
        self._pending: asyncio.Future[T] | None = None

    def begin(self, read: Callable[[], Awaitable[T]]) -> asyncio.Future[T]:
        """The read in flight, or *read* started now (it is called only then). A
        finished read is never handed out again: the next caller starts a new one."""
        if self._pending is None or self._pending.done():
            self._pending = asyncio.ensure_future(read())
        return self._pending

    async def join(self, read: Callable[[], Awaitable[T]]) -> T:
        """The result of the read in flight, or of *read* started now."""
        return await asyncio.shield(self.begin(read))
