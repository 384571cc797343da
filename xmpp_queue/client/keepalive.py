"""Keeping a running handler's lock: extended before a third of it is gone.

Why: a lock that runs out while its handler still works hands the item to a
second worker, and the job runs twice at once. The length of a new lock is the
node's lock timeout (the worker reads it from the node's meta-data); each
extension asks for ``lock_extend`` seconds or that timeout again. Only jobs
whose handler still runs are kept (the runner's books), so a lock lives exactly
as long as its code, also through a drain, and no longer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from xmpp_queue.client.errors import StanzaError
from xmpp_queue.client.job import FALLBACK_LOCK, Job, QueueOps, WorkerStats

log = logging.getLogger("xmpp_queue.client")

# Conditions meaning "this lock is no longer yours" (XEP-0254 §2.3 / §2.4).
# "forbidden": the service no longer counts us as a subscriber (it saw us leave, e.g.
# across a server restart) and so released our locks.
LOCK_LOST = frozenset({"unexpected-request", "conflict", "item-not-found", "forbidden"})


class LockKeepAlive:
    """The extension part of :class:`~xmpp_queue.client.jobs.JobRunner`."""

    ops: QueueOps
    name: str
    stats: WorkerStats
    lock_extend: int | None  # seconds per extension; None: the lock timeout; 0: off
    lock_timeout: float | None  # the node's (a new lock's length), when known
    _held: dict[str, Job]
    _clock: Callable[[], float]

    def on_unlocked(self, item_id: str) -> None:
        raise NotImplementedError

    @property
    def extension(self) -> float:
        """Seconds each extension asks for: ``lock_extend``, else the node's lock
        timeout, else :data:`FALLBACK_LOCK`; 0 when extension is off."""
        if self.lock_extend is not None:
            return float(self.lock_extend)
        return self.lock_timeout or FALLBACK_LOCK

    @property
    def first_lock(self) -> float:
        """How long a new lock is taken to last: the node's lock timeout, never
        more than an extension (so the first one comes early enough whichever is
        known)."""
        known = [t for t in (self.lock_timeout, self.extension) if t]
        return min(known) if known else FALLBACK_LOCK

    async def extend_due(self) -> int:
        """Extend the locks held for a third of their length or more; returns how
        many were extended. A refused extension means the lock is already gone.

        With :meth:`extend_forever` checking every sixth of the shortest lock, a
        lock is extended before half of its time is gone, whatever its phase: the
        other half is the margin for the round trip on a busy machine. Only jobs
        whose handler still runs are held here, so a lock lives exactly as long
        as its code (also through a drain).
        """
        seconds = int(self.extension)
        if seconds <= 0:
            return 0
        now = self._clock()
        due = [j for j in self._held.values() if now - j.locked_at >= j.lock_for / 3]
        results = await asyncio.gather(
            *(self.ops.extend(j.node, j.item_id, seconds) for j in due),
            return_exceptions=True,
        )
        extended = 0
        for job, result in zip(due, results, strict=True):
            if result is None:
                job.locked_at, job.lock_for = now, float(seconds)
                extended += 1
            elif isinstance(result, StanzaError) and result.condition in LOCK_LOST:
                self.on_unlocked(job.item_id)
            else:
                log.warning(
                    "event=extend_failed worker=%s item=%s error=%r", self.name, job.item_id, result
                )
        self.stats.extended += extended
        return extended

    async def extend_forever(self) -> None:
        """Run :meth:`extend_due` every sixth of the shortest lock."""
        while True:
            await asyncio.sleep(max(0.05, self.first_lock / 6))
            await self.extend_due()
