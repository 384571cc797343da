"""DeadlineScheduler: one timer, the earliest deadline, re-armed; fake clock, no sleep."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import timedelta
from typing import Any

import pytest

from tests.kit import FakeClock, build_service
from xmpp_queue.core.effects import Effect, UnlockNotice
from xmpp_queue.core.model import Actor, Affiliation, NodeConfig
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.runtime.outbox import Outbox
from xmpp_queue.runtime.scheduler import RETRY_AFTER_FAILURE, DeadlineScheduler

OWNER = Actor("owner@example.org/desk")
ALICE = Actor("alice@example.org/a")


class FakeTimers:
    """Stands in for loop.call_later: records timers, fires them on demand."""

    def __init__(self) -> None:
        self.armed: list[FakeTimer] = []

    def __call__(self, delay: float, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(delay, callback)
        self.armed.append(timer)
        return timer

    @property
    def live(self) -> list[FakeTimer]:
        return [t for t in self.armed if not t.cancelled and not t.fired]


class FakeTimer:
    def __init__(self, delay: float, callback: Callable[[], None]) -> None:
        self.delay, self.callback = delay, callback
        self.cancelled = self.fired = False

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        self.fired = True
        self.callback()


@pytest.fixture
async def service(clock: FakeClock) -> AsyncIterator[PubSubService]:
    from xmpp_queue.storage.store import StateStore

    svc = build_service(
        StateStore.in_memory(),
        clock,
        settings=ServiceSettings(NodeConfig(), access=ServiceAccess.for_domain("example.org")),
    )
    await svc.start()
    yield svc
    await svc.stop()


async def queue_with_held_item(svc: PubSubService, node: str, lock_seconds: int) -> None:
    # Retry delay 0: the only deadlines are the locks' (a retry delay adds its own).
    config = {
        "pubsub#queue": ["1"],
        "pubsub#queue_lock_timeout": [str(lock_seconds)],
        "pubsub#queue_retry_delay": ["0"],
    }
    await svc.create_node(OWNER, node, config)
    await svc.set_node_affiliations(
        OWNER, node, [(OWNER.bare, Affiliation.OWNER), (ALICE.bare, Affiliation.MEMBER)]
    )
    await svc.subscribe(ALICE, node, ALICE.jid, {"pubsub#queue_requests": ["5"]})
    await svc.publish(OWNER, node, f"{node}-1", "<a/>", 4)


def scheduler(
    svc: PubSubService, clock: FakeClock, sent: list[Effect]
) -> tuple[DeadlineScheduler, FakeTimers]:
    timers = FakeTimers()
    return DeadlineScheduler(svc, Outbox(Recorder(sent)), clock, call_later=timers), timers


class Recorder:
    """A sink of the outbox that keeps what it is given."""

    def __init__(self, sent: list[Effect]) -> None:
        self.sent = sent

    def deliver(self, effects: Sequence[Effect]) -> None:
        self.sent.extend(effects)


async def test_start_catches_up_then_arms_for_the_next_deadline(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue_with_held_item(service, "jobs", 30)
    clock.advance(3600)  # the service was down past the deadline
    sent: list[Effect] = []
    sched, timers = scheduler(service, clock, sent)
    await sched.start()
    assert [type(e) for e in sent].count(UnlockNotice) == 1
    # the item went back to alice: a new lock, a new deadline 30 s from now
    [timer] = timers.live
    assert timer.delay == 30
    assert sched.armed_for == clock() + timedelta(seconds=30)
    await sched.stop()
    assert timers.live == []


async def test_rearms_to_an_earlier_deadline_and_keeps_one_timer(
    service: PubSubService, clock: FakeClock
) -> None:
    sent: list[Effect] = []
    sched, timers = scheduler(service, clock, sent)
    await sched.start()
    assert timers.live == []  # nothing due: no timer at all
    await queue_with_held_item(service, "slow", 300)
    assert [t.delay for t in timers.live] == [300]
    await queue_with_held_item(service, "fast", 20)
    assert [t.delay for t in timers.live] == [20]
    await sched.stop()


async def test_fire_ticks_sends_and_rearms(service: PubSubService, clock: FakeClock) -> None:
    sent: list[Effect] = []
    sched, timers = scheduler(service, clock, sent)
    await sched.start()
    await queue_with_held_item(service, "fast", 20)
    await queue_with_held_item(service, "slow", 300)
    [timer] = timers.live
    clock.advance(20)
    timer.fire()
    assert sched._tick_task is not None
    await sched._tick_task  # the tick the timer started
    unlocks = [e for e in sent if isinstance(e, UnlockNotice)]
    assert [(u.node, u.reason) for u in unlocks] == [("fast", "timeout")]
    # fast was handed back out (new 20 s lock): that is the earliest again
    assert [t.delay for t in timers.live] == [20]
    await sched.stop()


async def test_deadline_announced_during_a_tick_is_not_lost(
    service: PubSubService, clock: FakeClock
) -> None:
    sent: list[Effect] = []
    sched, timers = scheduler(service, clock, sent)
    await sched.start()
    sweep = service.sweep

    async def racing_sweep(every_node: bool = False) -> Any:
        out = await sweep(every_node)
        # another batch commits a lock right after the sweep's, before the tick re-arms
        sched.deadline_changed(clock() + timedelta(seconds=7))
        return out

    service.sweep = racing_sweep  # type: ignore[method-assign]
    await sched.sweep()
    assert [t.delay for t in timers.live] == [7]
    await sched.stop()


async def test_a_tick_arms_for_what_its_sweep_announced_without_reading_it_again(
    service: PubSubService, clock: FakeClock
) -> None:
    """The sweep's batch announces the store's next deadline when it commits; a read
    of it after the sweep would be a batch of its own for the same answer."""
    await queue_with_held_item(service, "jobs", 30)
    sent: list[Effect] = []
    sched, timers = scheduler(service, clock, sent)
    reads = 0
    read = service.next_deadline

    async def counted() -> Any:
        nonlocal reads
        reads += 1
        return await read()

    service.next_deadline = counted  # type: ignore[method-assign]
    await sched.start()
    assert [t.delay for t in timers.live] == [30]
    clock.advance(30)
    await sched.sweep()  # the lock expired: handed out again, a new 30 s lock
    assert [t.delay for t in timers.live] == [30]
    assert reads == 0
    await sched.stop()


async def test_a_failing_tick_retries_later_settling_every_node(
    service: PubSubService,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await queue_with_held_item(service, "jobs", 30)
    real_sweep = service.sweep
    calls: list[bool] = []

    async def failing_once(every_node: bool = False) -> Any:
        calls.append(every_node)
        if len(calls) == 1:
            raise RuntimeError("store down")
        return await real_sweep(every_node)

    sent: list[Effect] = []
    sched, timers = scheduler(service, clock, sent)
    monkeypatch.setattr(service, "sweep", failing_once)
    with caplog.at_level(logging.ERROR, logger="xmpp_queue"):
        await sched.start()
    assert [t.delay for t in timers.live] == [RETRY_AFTER_FAILURE]
    assert len([r for r in caplog.records if r.exc_info]) == 1
    # The first tick settles every node (a hold for a batch is not stored); so does
    # the retry, a catch-up (the failed tick may have taken its due nodes from the
    # indexes); the tick after it is proportional again.
    [retry] = timers.live
    retry.fire()
    assert sched._tick_task is not None
    await sched._tick_task
    await sched.sweep()
    assert calls == [True, True, False]
    await sched.stop()


async def test_far_deadlines_are_rechecked_hourly(service: PubSubService, clock: FakeClock) -> None:
    sent: list[Effect] = []
    sched, timers = scheduler(service, clock, sent)
    await sched.start()
    sched.deadline_changed(clock() + timedelta(days=3))
    assert [t.delay for t in timers.live] == [3600]
    sched.deadline_changed(clock() - timedelta(seconds=5))  # overdue: at once
    assert [t.delay for t in timers.live] == [0]
    await sched.stop()
