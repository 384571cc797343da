"""A worker on a partitioned queue: one worker per partition, the window spread.

Why: a partitioned queue (docs/scaling.md) is k queue nodes ``jobs#0`` ...
``jobs#k-1``, each on its own shard, under one logical name. User code names
the logical queue (``Worker(account, "jobs", handle, queue_requests=8)``); on
start the worker learns from the public name that ``jobs`` is partitioned (the
first-contact lookup every node costs) and runs one worker per partition in its
place, each with its own stream (resource ``<name>-<i>``: a lock belongs to one
full JID, and each partition's shard sees its own subscriber), the same handler
and a share of the window: ``queue_requests`` spread as evenly as possible,
each partition at least 1 (so with fewer requests than partitions the window
grows to k). Their counts add up in the worker's ``stats``, their held locks in
its ``in_flight``. Stopping the worker
drains every partition's worker; the worker ends when they all have ended.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger("xmpp_queue.client")


def spread(window: int, parts: int) -> list[int]:
    """*window* over *parts* as evenly as possible, each at least 1."""
    return [max(1, window // parts + (1 if i < window % parts else 0)) for i in range(parts)]


class PartitionWorkers:
    """The per-partition workers standing in for one worker (module docstring)."""

    def __init__(self, parent: Any, children: list[Any]) -> None:
        self.parent = parent
        self.children = children
        self._watch: asyncio.Task[None] | None = None

    @property
    def in_flight(self) -> int:
        """Locks held over every partition (the logical worker's ``in_flight``)."""
        return sum(int(child.in_flight) for child in self.children)

    @property
    def reconnects(self) -> int:
        """Streams lost and logged in again, over every partition's worker."""
        return sum(int(child.reconnects) for child in self.children)

    async def start(self) -> None:
        started = []
        try:
            for child in self.children:
                await child.start()
                started.append(child)
        except BaseException:
            for child in started:
                child.abort()
            raise
        self._watch = asyncio.ensure_future(self._until_all_ended())

    async def _until_all_ended(self) -> None:
        await asyncio.gather(*(c.wait() for c in self.children))
        failures = [c._failure for c in self.children if c._failure is not None]
        if failures and self.parent._failure is None:
            self.parent._failure = failures[0]
        self.parent._finished.set()

    async def stop(self, grace: float | None) -> None:
        await asyncio.gather(*(c.stop(grace) for c in self.children))
        if self._watch is not None:
            await self._watch

    def abort(self) -> None:
        for child in self.children:
            child.abort()


async def spread_over_partitions(worker: Any, link: Any) -> bool:
    """When *worker*'s node is partitioned: close its own stream, start one worker
    per partition in its place, and return True (the module docstring)."""
    placements = worker.placements
    stream = getattr(link, "stream", None)  # a test's fake link has none
    if stream is not None and placements.known(worker.node) is None:
        await placements.resolve(stream, worker.node)
    parts = placements.partitions_of(worker.node)
    if not parts:
        return False
    bare, _, resource = worker.account.jid.partition("/")
    children = []
    for i, (part, share) in enumerate(
        zip(parts, spread(worker.queue_requests, len(parts)), strict=True)
    ):
        child = type(worker)(
            worker.account.replace(jid=f"{bare}/{resource}-{i}"),
            part,
            worker.handler,
            queue_requests=share,
            max_batch=worker.max_batch,
            ack_linger=worker.ack_linger,
            batch_wait=worker.batch_wait,
            lock_extend=worker.lock_extend,
            drain_grace=worker.drain_grace,
            name=f"{worker.name}-{i}",
            reconnect=worker.reconnect,
        )
        child.stats = worker.stats  # one set of counts for the logical queue
        children.append(child)
    log.info(
        "event=worker_partitioned worker=%s node=%s partitions=%d",
        worker.name,
        worker.node,
        len(parts),
    )
    group = PartitionWorkers(worker, children)
    await group.start()
    worker._parts = group
    worker._session.abort()  # its own stream subscribed to nothing: not needed
    return True
