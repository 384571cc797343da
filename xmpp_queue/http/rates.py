"""Rates for the dashboard's small charts: events per second, per queue, recently.

Why sampled here and not in the browser: a page opened now shows the last
minutes at once. Every ``interval`` seconds the cumulative published, delivered
and acked counts of each queue (``QueueMetrics.totals``, fed by committed
ledger events) are recorded; a rate is the difference of two samples over the
time between them. Memory is bounded: ``keep`` samples per node label, and node
labels are bounded by ``[http] max_nodes``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import deque
from collections.abc import Callable

from xmpp_queue.core.ledger import EventKind
from xmpp_queue.http.metrics import QueueMetrics

KINDS = (EventKind.PUBLISHED, EventKind.DELIVERED, EventKind.ACKED)
Sample = tuple[float, tuple[int, ...]]


class RateHistory:
    def __init__(
        self,
        metrics: QueueMetrics,
        interval: float = 2.0,
        keep: int = 61,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.metrics = metrics
        self.interval = interval
        self.keep = keep
        self._monotonic = monotonic
        self._samples: dict[str, deque[Sample]] = {}
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> None:
        now = self._monotonic()
        labels = {label for label, _ in self.metrics.totals}
        for label in labels:
            counts = tuple(self.metrics.totals[(label, k)] for k in KINDS)
            self._samples.setdefault(label, deque(maxlen=self.keep)).append((now, counts))

    def rates(self, node: str) -> dict[str, list[float]]:
        """Events per second, oldest first, keyed published / delivered / acked."""
        samples = list(self._samples.get(self.metrics.labels(node), ()))
        out: dict[str, list[float]] = {k.value: [] for k in KINDS}
        for (t0, c0), (t1, c1) in itertools.pairwise(samples):
            dt = max(t1 - t0, 1e-6)
            for kind, before, after in zip(KINDS, c0, c1, strict=True):
                out[kind.value].append(round((after - before) / dt, 2))
        return out

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="http-rates")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self.interval)
