"""DeadlineScheduler: one timer for the nearest queue deadline.

Deadlines (lock expiry, retry delay) are stored data, so they survive restarts;
this keeps exactly one ``TimerHandle`` armed for the earliest of them. The
service tells it when that moment may have moved (``on_deadline_change``, after
each committed batch that touched locks); on fire it runs ``service.sweep()``,
sends the resulting notices through the outbox and re-arms. At start one tick
catches up on time spent down (Prefect's repossessor sweep, with time passed in).
A tick settles only the nodes where something came due (the store's time
indexes name them); the tick after a failed one settles every node, since the
failed one may have taken its due nodes from the indexes and then been undone.

It lives outside the XMPP package: it needs the service, a clock and the outbox,
and starts when the service can first reach its subscribers (``connected``, which
the composition root hooks to the component's first session).

Time comes from the injected clock and the timer from an injected ``call_later``,
so tests move a fake clock and fire the timer by hand, without sleeping. A far
deadline is re-checked at least every :data:`MAX_SLEEP` seconds, which bounds
the effect of a wall-clock jump.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from xmpp_queue.core.ports import Clock
from xmpp_queue.core.service import PubSubService
from xmpp_queue.runtime.outbox import Outbox

log = logging.getLogger("xmpp_queue.runtime.scheduler")

MAX_SLEEP = 3600.0
RETRY_AFTER_FAILURE = 5.0


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


CallLater = Callable[[float, Callable[[], None]], TimerHandle]


class DeadlineScheduler:
    def __init__(
        self,
        service: PubSubService,
        outbox: Outbox,
        clock: Clock,
        call_later: CallLater | None = None,
    ) -> None:
        self._service = service
        self._outbox = outbox
        self._clock = clock
        self._call_later = call_later
        self._timer: TimerHandle | None = None
        self._armed_for: datetime | None = None
        self._tick_task: asyncio.Task[None] | None = None
        self._ticking = False
        self._noted: list[datetime] = []  # deadlines announced while a tick ran
        self._announced = False  # whether any was announced (None too) while it ran
        self._running = False
        # Settle every node once: at start (a queue may hold ready items for a batch,
        # and that hold is not stored), and after a failed tick.
        self._every_node = True
        self._started = False
        service.on_deadline_change(self.deadline_changed)

    @property
    def armed_for(self) -> datetime | None:
        """The deadline the timer is set for (None: no timer)."""
        return self._armed_for

    async def start(self) -> None:
        """Catch up (one tick), then arm for the next deadline."""
        self._started = self._running = True
        await self._tick()

    async def connected(self, _event: Any = None) -> None:
        """Start on the first call (the first session: notices can be sent); later
        reconnects change nothing, the timer kept running meanwhile."""
        if not self._started:
            await self.start()

    async def sweep(self) -> None:
        """Run a tick now (tests, and an admin's "sweep now"); re-arms like a timer tick."""
        await self._tick()

    async def stop(self) -> None:
        self._running = False
        self._cancel_timer()
        task, self._tick_task = self._tick_task, None
        if task is not None and task is not asyncio.current_task():
            try:
                await task
            except Exception:  # already logged by _tick
                pass

    def deadline_changed(self, deadline: datetime | None) -> None:
        """Listener for the service: the earliest deadline is now *deadline*."""
        if not self._running:
            return
        if self._ticking:
            # The tick re-arms when it ends; keep what was announced meanwhile so a
            # deadline committed after its own read is not lost.
            self._announced = True
            if deadline is not None:
                self._noted.append(deadline)
            return
        self._arm(deadline)

    def _arm(self, deadline: datetime | None) -> None:
        self._cancel_timer()
        if deadline is None or not self._running:
            return
        delay = min(MAX_SLEEP, max(0.0, (deadline - self._clock()).total_seconds()))
        call_later = self._call_later or asyncio.get_running_loop().call_later
        self._timer = call_later(delay, self._fire)
        self._armed_for = deadline

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._armed_for = None, None

    def _fire(self) -> None:
        self._timer, self._armed_for = None, None
        if self._running and self._tick_task is None and not self._ticking:
            self._tick_task = asyncio.get_running_loop().create_task(self._run_tick())

    async def _run_tick(self) -> None:
        try:
            await self._tick()
        finally:
            self._tick_task = None

    async def _tick(self) -> None:
        """Expire and redispatch what is due, send the notices, re-arm.

        The sweep's batch announces the store's next deadline when it commits
        (``deadline_changed``, noted while ticking): that is the deadline to arm for,
        so the tick reads it itself only when nothing was announced, not in a batch of
        its own after every sweep."""
        self._ticking, self._noted, self._announced = True, [], False
        try:
            outcome = await self._service.sweep(every_node=self._every_node)
            report = outcome.value
            if report.expired_locks:
                log.info("event=locks_expired count=%d", report.expired_locks)
            self._outbox.send(outcome.effects)
            fresh = None if self._announced else await self._service.next_deadline()
        except Exception:
            log.exception("event=tick_failed action=retry_later")
            # Try again later rather than spinning on a failing store.
            self._ticking, self._every_node = False, True
            self._arm_in(RETRY_AFTER_FAILURE)
            return
        self._ticking, self._every_node = False, False
        candidates = [d for d in (fresh, *self._noted) if d is not None]
        self._arm(min(candidates) if candidates else None)

    def _arm_in(self, seconds: float) -> None:
        self._cancel_timer()
        if self._running:
            call_later = self._call_later or asyncio.get_running_loop().call_later
            self._timer = call_later(seconds, self._fire)
