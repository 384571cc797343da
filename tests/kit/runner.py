"""Stand-ins for the JobRunner's tests: the requests it sends, recorded, and a
handler that blocks each job until the test lets it finish."""

from __future__ import annotations

import asyncio

from xmpp_queue.client.errors import StanzaError
from xmpp_queue.client.jobs import Job


class FakeOps:
    """Records the requests; ``refuse`` maps (verb, item) to the error to raise."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.refuse: dict[tuple[str, str], StanzaError] = {}
        self.reasons: dict[str, str] = {}

    async def _call(self, verb: str, item_id: str) -> None:
        self.calls.append((verb, item_id))
        error = self.refuse.get((verb, item_id))
        if error is not None:
            raise error

    async def retract(self, node: str, item_id: str) -> None:
        await self._call("retract", item_id)

    async def unlock(self, node: str, item_id: str, reason: str = "") -> None:
        if reason:
            self.reasons[item_id] = reason
        await self._call("unlock", item_id)

    async def extend(self, node: str, item_id: str, seconds: int) -> None:
        await self._call(f"extend{seconds}", item_id)


class Gate:
    """A handler that blocks each job until the test opens its gate."""

    def __init__(self, fail: set[str] | None = None) -> None:
        self.started: dict[str, Job] = {}
        self.gates: dict[str, asyncio.Event] = {}
        self.fail = fail or set()

    async def __call__(self, job: Job) -> None:
        self.started[job.item_id] = job
        gate = self.gates.setdefault(job.item_id, asyncio.Event())
        await gate.wait()
        if job.item_id in self.fail:
            raise RuntimeError(f"cannot do {job.item_id}")

    def open(self, item_id: str) -> None:
        self.gates.setdefault(item_id, asyncio.Event()).set()


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)
