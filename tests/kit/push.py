"""A push endpoint in the test process: a real aiohttp server that records what it was
sent and answers as the test says (statuses, a delay, hanging, or being down).

Why here: the push wire tests and the push fault tests share it, and the sink's
promises are about what a real HTTP server sees (how many POSTs at once, which
item at which attempt), not about what the component says it did.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web


@dataclass(frozen=True, slots=True)
class Seen:
    """One POST: the item, its delivery attempt, the status answered (-1: none), and
    how many POSTs were open at the receiver when it arrived (itself included)."""

    item: str
    attempt: int
    status: int
    concurrent: int


class Receiver:
    """``await Receiver().start()`` → listening on 127.0.0.1; :attr:`url` is the hook."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.statuses: list[int] = []  # answered in order, then :attr:`default`
        self.default = 204
        self.delay = 0.0  # seconds before answering
        self.hold = False  # never answer (the component is killed meanwhile)
        self.open = 0
        self.headers: list[dict[str, str]] = []  # of each POST, in arrival order
        self.bodies: list[bytes] = []
        self.arrived = asyncio.Condition()
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def start(self) -> Receiver:
        """Listen (again, on the same port after :meth:`stop`)."""
        app = web.Application()
        app.router.add_post("/hook", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        """Go down: connections are refused until :meth:`start`."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        body = json.loads(raw)
        self.headers.append(dict(request.headers))
        self.bodies.append(raw)
        status = self.statuses.pop(0) if self.statuses else self.default
        self.open += 1
        try:
            async with self.arrived:
                mark = -1 if self.hold else status
                self.seen.append(Seen(body["id"], body["delivery_attempt"], mark, self.open))
                self.arrived.notify_all()
            if self.hold:
                await asyncio.sleep(60)
            if self.delay:
                await asyncio.sleep(self.delay)
            return web.Response(status=status)
        finally:
            self.open -= 1

    def acked(self) -> set[str]:
        """Items answered with a 2xx."""
        return {s.item for s in self.seen if 200 <= s.status < 300}

    async def until(self, predicate: Callable[[list[Seen]], Any], within: float = 30) -> None:
        """Wait until *predicate* holds for what arrived; a timeout says what did."""
        try:
            async with self.arrived:
                await asyncio.wait_for(self.arrived.wait_for(lambda: predicate(self.seen)), within)
        except TimeoutError:
            raise AssertionError(f"not within {within} s; arrived: {self.seen}") from None
