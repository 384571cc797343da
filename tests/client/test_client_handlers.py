"""Handlers that fail, last long or block (issue 24): the nack says why, a failure is
one log line, a lock lives as long as its handler (also past a drain), a thread is
never left running under an unlocked item without a word, and ``in_thread`` runs
``queue_requests`` handlers at once. Fake links and ops, no server."""

from __future__ import annotations

import asyncio
import logging
import threading
from xml.etree import ElementTree as ET

import pytest

from tests.client.test_client_jobs import FakeOps, item, settle
from tests.client.test_client_stream import FakeLink, deliver, make_worker
from xmpp_queue.client import Job, in_thread, wire, wire_locks
from xmpp_queue.client.acks import BatchingOps
from xmpp_queue.client.handlers import FailureLog, failure_reason
from xmpp_queue.client.jobs import JobRunner


async def until(predicate, within: float = 3.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(within):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


# --- why it failed -------------------------------------------------------------------


def test_the_reason_is_type_and_message_in_one_bounded_line() -> None:
    assert failure_reason(ValueError("bad row 7")) == "ValueError: bad row 7"
    assert failure_reason(KeyError("k")) == "KeyError: 'k'"
    assert failure_reason(RuntimeError()) == "RuntimeError"
    assert failure_reason(TimeoutError()) == "TimeoutError"
    long = failure_reason(ValueError("x\n" * 500))
    assert len(long) == 200 and "\n" not in long
    assert failure_reason(ET.ParseError("no")) == "xml.etree.ElementTree.ParseError: no"


def test_nack_wire_forms_carry_the_reason_in_our_namespace() -> None:
    plain = ET.fromstring(wire_locks.unlock("jobs", "a"))
    assert plain[0].tag == f"{{{wire.QUEUEING_NS}}}unlock", "no reason: plain XEP-0254"
    said = ET.fromstring(wire_locks.unlock("jobs", "a", "ValueError: 'quoted' <x>\nline"))
    (el,) = list(said)
    assert el.tag == f"{{{wire.EXTEND_NS}}}unlock"
    assert el[0].get("id") == "a" and el[0].get("reason") == "ValueError: 'quoted' <x> line"
    batch = ET.fromstring(wire_locks.unlock_items("jobs", ["a", "b"], {"b": "E"}))
    assert [(i.get("id"), i.get("reason")) for i in batch[0]] == [("a", None), ("b", "E")]


async def test_a_raising_handler_nacks_with_its_reason_in_one_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ops = FakeOps()

    async def handler(job: Job) -> None:
        if job.item_id.startswith("x"):
            raise ValueError(f"bad input {job.item_id}")  # a message per item, one site
        raise KeyError(job.item_id)

    caplog.set_level(logging.INFO, logger="xmpp_queue.client")
    runner = JobRunner(ops, handler, 10)
    for n in range(5):
        runner.offer(item(f"x{n}"))
    runner.offer(item("y0"))
    await settle()
    assert ops.reasons == {f"x{n}": f"ValueError: bad input x{n}" for n in range(5)} | {
        "y0": "KeyError: 'y0'"
    }
    failures = [r for r in caplog.records if "event=job_failed" in r.getMessage()]
    assert len(failures) == 6, "one record per failure"
    assert all("\n" not in r.getMessage() for r in failures)
    assert "error='ValueError: bad input x3'" in failures[3].getMessage()
    traced = [r for r in failures if r.exc_info]
    assert len(traced) == 2, "a traceback once per distinct error (type and line raising it)"
    assert runner.stats.failed == 6


def test_a_distinct_error_shows_its_traceback_again_after_the_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    failures = FailureLog(interval=60, clock=lambda: now[0])
    job = Job("jobs", "a", None)
    exc = RuntimeError("down")
    for at in (0.0, 30.0, 61.0):
        now[0] = at
        failures.failed("w", job, exc, failure_reason(exc))
    assert [bool(r.exc_info) for r in caplog.records] == [True, False, True]


async def test_batched_nacks_keep_each_item_s_reason() -> None:
    link = FakeLink()

    async def handler(job: Job) -> None:
        raise RuntimeError(job.item_id)

    worker = make_worker(handler, link, queue_requests=4, max_batch=4)
    await worker.start()
    assert isinstance(worker._runner.ops, BatchingOps)  # type: ignore[union-attr]
    assert link.on_events is not None
    link.on_events([wire.ItemEvent("jobs", i, None, {}) for i in ("a", "b")])
    await until(lambda: len(link.reasons) == 2)
    assert link.reasons == {"a": "RuntimeError: a", "b": "RuntimeError: b"}
    await worker.stop(grace=1)


# --- a lock lives as long as its handler ---------------------------------------------


async def test_a_long_handler_s_lock_is_extended_by_the_node_s_timeout_without_asking() -> None:
    ops = FakeOps()
    now = [100.0]
    gate = asyncio.Event()

    async def slow(job: Job) -> None:
        await gate.wait()

    runner = JobRunner(ops, slow, 2, lock_timeout=30, clock=lambda: now[0])
    runner.offer(item("a"))
    now[0] = 109.0
    assert await runner.extend_due() == 0, "a third of 30 s is not gone yet"
    now[0] = 110.0
    assert await runner.extend_due() == 1
    assert ops.calls == [("extend30", "a")]
    gate.set()
    await settle()
    now[0] = 200.0
    assert await runner.extend_due() == 0, "a finished job's lock is not kept"


async def test_the_worker_reads_the_node_s_lock_timeout_and_keeps_locks_alive() -> None:
    link = FakeLink()
    link.node_lock_timeout = 1  # seconds: extended every third of it
    gate = asyncio.Event()

    async def slow(job: Job) -> None:
        await gate.wait()

    worker = make_worker(slow, link)
    await worker.start()
    deliver(link, "a")
    await until(lambda: link.log.count("extend a") >= 3)
    gate.set()
    await until(lambda: "retract a" in link.log)
    await worker.stop(grace=1)


async def test_lock_extend_0_turns_the_keep_alive_off() -> None:
    link = FakeLink()
    link.node_lock_timeout = 1

    async def slow(job: Job) -> None:
        await asyncio.sleep(0.6)

    worker = make_worker(slow, link, lock_extend=0)
    await worker.start()
    deliver(link, "a")
    await until(lambda: "retract a" in link.log)
    assert "extend a" not in link.log
    await worker.stop(grace=1)


# --- a thread past the drain ---------------------------------------------------------


async def test_a_thread_that_outlasts_the_drain_keeps_its_lock_and_is_waited_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    link = FakeLink()
    link.node_lock_timeout = 1
    release = threading.Event()
    started = threading.Event()

    def blocking(job: Job) -> None:
        started.set()
        release.wait(10)

    worker = make_worker(in_thread(blocking), link)
    await worker.start()
    deliver(link, "a")
    await until(started.is_set)
    stopping = asyncio.ensure_future(worker.stop(grace=0.1))
    await until(lambda: "event=drain_waits" in caplog.text)
    extends_before = link.log.count("extend a")
    await asyncio.sleep(0.8)
    assert not stopping.done(), "the drain waits for the thread"
    assert "unlock a" not in link.log, "never unlocked while its code runs"
    assert link.log.count("extend a") > extends_before, "its lock is extended past the drain"
    waits = [r for r in caplog.records if "event=drain_waits" in r.getMessage()]
    assert len(waits) == 1 and "item=a" in waits[0].getMessage()
    release.set()
    await asyncio.wait_for(stopping, 3)
    assert link.log[-2:] == ["retract a", "close"], "the work it finished is acked"


async def test_aborting_under_a_running_thread_says_so_per_item(
    caplog: pytest.LogCaptureFixture,
) -> None:
    link = FakeLink()
    release = threading.Event()
    started: list[str] = []

    def blocking(job: Job) -> None:
        started.append(job.item_id)
        release.wait(10)

    worker = make_worker(in_thread(blocking), link, queue_requests=2)
    await worker.start()
    deliver(link, "a")
    deliver(link, "b")
    await until(lambda: len(started) == 2)
    worker.abort()
    abandoned = [r.getMessage() for r in caplog.records if "event=item_abandoned" in r.getMessage()]
    assert sorted(m.split("item=")[1].split()[0] for m in abandoned) == ["a", "b"]
    assert all(r.levelno == logging.WARNING for r in caplog.records if "abandoned" in r.msg)
    assert worker.stats.abandoned == 2
    assert "unlock a" not in link.log and "unlock b" not in link.log
    release.set()


# --- in_thread concurrency follows queue_requests ------------------------------------


async def test_in_thread_runs_queue_requests_handlers_at_once_in_the_worker_s_pool() -> None:
    link = FakeLink()
    window = 16  # more than the default executor's min(32, cpus + 4) on a small machine
    barrier = threading.Barrier(window, timeout=5)
    names: set[str] = set()

    def blocking(job: Job) -> None:
        names.add(threading.current_thread().name)
        barrier.wait()  # breaks (and the handler raises) unless all 16 run at once

    worker = make_worker(in_thread(blocking), link, queue_requests=window, name="w1")
    await worker.start()
    for n in range(window):
        deliver(link, f"i{n}")
    await until(lambda: worker.stats.acked + worker.stats.failed == window, within=8)
    assert worker.stats.acked == window, "all sixteen ran together"
    assert all(name.startswith("xmpp-queue-w1") for name in names)
    executor = worker._executor
    await worker.stop(grace=1)
    assert executor is not None and executor._shutdown, "the pool ends with the worker"
