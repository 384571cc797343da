"""JobRunner: ack, nack, lost locks, capacity, lock extension and draining; fake ops."""

from __future__ import annotations

import asyncio
from xml.etree import ElementTree as ET

import pytest

from tests.kit.runner import FakeOps, Gate, settle
from xmpp_queue.client.errors import StanzaError
from xmpp_queue.client.jobs import Job, JobRunner
from xmpp_queue.client.payload import json_payload, parse_json_payload
from xmpp_queue.client.wire import ItemEvent

NODE = "jobs"


def item(item_id: str, payload: object = None) -> ItemEvent:
    element = ET.fromstring(json_payload(payload)) if payload is not None else None
    return ItemEvent(NODE, item_id, element, {"h": "v"})


@pytest.fixture
def ops() -> FakeOps:
    return FakeOps()


async def test_success_is_acked_by_retract(ops: FakeOps) -> None:
    seen: list[Job] = []

    async def handler(job: Job) -> None:
        seen.append(job)

    runner = JobRunner(ops, handler, 2)
    runner.offer(item("a", {"n": 1}))
    await settle()
    assert ops.calls == [("retract", "a")]
    assert seen[0].json() == {"n": 1}
    assert seen[0].headers == {"h": "v"}
    assert parse_json_payload(seen[0].payload) == {"n": 1}
    assert (runner.stats.acked, runner.stats.received, runner.held) == (1, 1, 0)


async def test_an_exception_unlocks_the_item(
    ops: FakeOps, caplog: pytest.LogCaptureFixture
) -> None:
    gate = Gate(fail={"a"})
    runner = JobRunner(ops, gate, 1)
    runner.offer(item("a"))
    await settle()
    gate.open("a")
    await settle()
    assert ops.calls == [("unlock", "a")]
    assert runner.stats.failed == 1 and runner.stats.acked == 0
    assert "event=job_failed" in caplog.text and "cannot do a" in caplog.text


async def test_lock_lost_while_running_drops_the_result(ops: FakeOps) -> None:
    gate = Gate()
    runner = JobRunner(ops, gate, 1)
    runner.offer(item("a"))
    await settle()
    runner.on_unlocked("a")  # the service timed the lock out
    assert gate.started["a"].lost
    assert runner.held == 0, "the service no longer counts it against our window"
    gate.open("a")
    await settle()
    assert ops.calls == [], "no retract for a lock we no longer hold"
    assert runner.stats.lost == 1


async def test_a_refused_ack_counts_as_lost(ops: FakeOps) -> None:
    ops.refuse[("retract", "a")] = StanzaError("unexpected-request", etype="wait")

    async def handler(job: Job) -> None:
        return None

    runner = JobRunner(ops, handler, 1)
    runner.offer(item("a"))
    await settle()
    assert runner.stats.lost == 1 and runner.stats.acked == 0


async def test_items_beyond_capacity_are_unlocked_not_dropped(ops: FakeOps) -> None:
    gate = Gate()
    runner = JobRunner(ops, gate, 1)
    runner.offer(item("a"))
    runner.offer(item("b"))
    await settle()
    assert ops.calls == [("unlock", "b")]
    assert set(gate.started) == {"a"}
    assert runner.stats.returned == 1


async def test_the_window_frees_when_the_ack_is_sent(ops: FakeOps) -> None:
    """The service may hand over the next item right behind the ack's answer."""
    answered = asyncio.Event()

    class SlowAck(FakeOps):
        async def retract(self, node: str, item_id: str) -> None:
            self.calls.append(("retract", item_id))
            await answered.wait()

    slow = SlowAck()
    gate = Gate()
    runner = JobRunner(slow, gate, 1)
    runner.offer(item("a"))
    await settle()
    gate.open("a")
    await settle()
    assert slow.calls == [("retract", "a")]
    runner.offer(item("b"))  # arrives before the ack's result
    await settle()
    assert "b" in gate.started and runner.stats.returned == 0
    answered.set()
    gate.open("b")
    await settle()
    assert runner.stats.acked == 2


async def test_redelivery_to_the_same_worker_is_counted(ops: FakeOps) -> None:
    gate = Gate(fail={"a"})
    runner = JobRunner(ops, gate, 1)
    runner.offer(item("a"))
    await settle()
    gate.open("a")
    await settle()
    gate.fail.clear()
    runner.offer(item("a"))
    await settle()
    assert gate.started["a"].delivery == 2
    assert runner.stats.redelivered_seen == 1
    await runner.drain(grace=1)


async def test_locks_held_for_a_third_of_the_period_are_extended(ops: FakeOps) -> None:
    now = [100.0]
    gate = Gate()
    runner = JobRunner(ops, gate, 3, lock_extend=9, clock=lambda: now[0])
    runner.offer(item("old"))
    now[0] = 103.5
    runner.offer(item("new"))
    now[0] = 104.0
    assert await runner.extend_due() == 1
    assert ops.calls == [("extend9", "old")]
    ops.refuse[("extend9", "new")] = StanzaError("unexpected-request", etype="wait")
    now[0] = 107.0
    await runner.extend_due()
    assert ("extend9", "old") in ops.calls[1:], "extended again a third of a period later"
    assert gate.started["new"].lost, "a refused extension means the lock is gone"
    assert runner.held == 1
    await runner.drain(grace=0)


async def test_drain_lets_running_jobs_finish_within_the_grace(ops: FakeOps) -> None:
    gate = Gate()
    runner = JobRunner(ops, gate, 2)
    runner.offer(item("a"))
    await settle()
    drain = asyncio.ensure_future(runner.drain(grace=30))
    await settle()
    runner.offer(item("late"))  # dispatched before our unsubscribe took effect
    await settle()
    assert ("unlock", "late") in ops.calls, "work arriving while draining goes back"
    assert "late" not in gate.started
    assert not drain.done()
    gate.open("a")
    await asyncio.wait_for(drain, 1)
    assert ("retract", "a") in ops.calls
    assert runner.stats.acked == 1


async def test_drain_cancels_after_the_grace_and_unlocks_what_is_left(ops: FakeOps) -> None:
    cancelled: list[str] = []

    async def forever(job: Job) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(job.item_id)
            raise

    runner = JobRunner(ops, forever, 2)
    runner.offer(item("a"))
    runner.offer(item("b"))
    await settle()
    await asyncio.wait_for(runner.drain(grace=0), 1)
    assert sorted(cancelled) == ["a", "b"]
    assert sorted(ops.calls) == [("unlock", "a"), ("unlock", "b")]
    assert runner.stats.returned == 2 and runner.held == 0 and runner.busy == 0


async def test_abandon_cancels_without_a_word_to_the_service(ops: FakeOps) -> None:
    gate = Gate()
    runner = JobRunner(ops, gate, 1)
    runner.offer(item("a"))
    await settle()
    runner.abandon()
    await settle()
    assert ops.calls == [] and runner.busy == 0 and not runner.accepting
