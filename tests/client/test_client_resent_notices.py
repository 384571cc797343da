"""A restarted service re-sends the notices of held items (``delivery-resent``): the
runner takes none of them twice, and still takes every new delivery."""

from __future__ import annotations

import logging

import pytest

from tests.kit.runner import FakeOps, Gate, settle
from xmpp_queue.client.jobs import JobRunner
from xmpp_queue.client.wire import ItemEvent

NODE = "jobs"


def notice(item_id: str, attempt: int, *, resent: bool = False) -> ItemEvent:
    headers = {"delivery-attempt": str(attempt)}
    if resent:
        headers["delivery-resent"] = "1"
    return ItemEvent(NODE, item_id, None, headers)


async def test_a_resent_notice_of_a_running_job_neither_restarts_nor_loses_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "xmpp_queue.client")
    ops, gate = FakeOps(), Gate()
    runner = JobRunner(ops, gate, 2)
    runner.offer(notice("a", 1))
    await settle()
    first = gate.started["a"]
    runner.offer(notice("a", 1, resent=True))
    await settle()
    assert gate.started["a"] is first and not first.lost
    assert runner.held == 1 and runner.stats.received == 1
    assert runner.stats.resent_ignored == 1
    assert "event=resent_ignored" in caplog.text
    gate.open("a")
    await settle()
    assert ops.calls == [("retract", "a")] and runner.stats.acked == 1


async def test_a_resent_notice_of_a_settled_job_is_not_run_again() -> None:
    ops, gate = FakeOps(), Gate()
    gate.open("a")
    runner = JobRunner(ops, gate, 1)
    runner.offer(notice("a", 1))
    await settle()
    assert ops.calls == [("retract", "a")]
    runner.offer(notice("a", 1, resent=True))  # the ack was lost with the restart
    await settle()
    assert ops.calls == [("retract", "a")]  # not run, not acked twice: the ack is re-sent
    assert runner.stats.received == 1 and runner.stats.resent_ignored == 1


async def test_a_resent_notice_never_seen_before_is_new_work() -> None:
    """The notice of a lock committed just before a crash never left the old process."""
    ops, gate = FakeOps(), Gate()
    gate.open("b")
    runner = JobRunner(ops, gate, 1)
    runner.offer(notice("b", 1, resent=True))
    await settle()
    assert ops.calls == [("retract", "b")] and runner.stats.resent_ignored == 0


async def test_new_attempts_and_new_lives_of_an_id_are_taken() -> None:
    ops, gate = FakeOps(), Gate()
    for name in "ab":
        gate.open(name)
    runner = JobRunner(ops, gate, 1)
    runner.offer(notice("a", 1))
    await settle()
    runner.offer(notice("a", 2, resent=True))  # a later attempt, re-sent: still new to us
    await settle()
    runner.offer(notice("b", 3))
    await settle()
    runner.offer(notice("b", 1, resent=True))  # the id published again (a new life)
    await settle()
    assert ops.calls == [("retract", "a")] * 2 + [("retract", "b")] * 2
    assert runner.stats.resent_ignored == 0


async def test_without_the_attempt_header_nothing_is_ignored() -> None:
    ops, gate = FakeOps(), Gate()
    gate.open("a")
    runner = JobRunner(ops, gate, 1)
    runner.offer(ItemEvent(NODE, "a", None, {"delivery-resent": "1"}))
    await settle()
    runner.offer(ItemEvent(NODE, "a", None, {"delivery-resent": "1"}))
    await settle()
    assert ops.calls == [("retract", "a")] * 2
