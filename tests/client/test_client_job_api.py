"""The job's own API (extend, unlock with a delay, dead-letter now), the service's
delivery count, and the rule that handlers are ``async def``; fake ops, no server."""

from __future__ import annotations

import asyncio
import threading
from functools import partial

import pytest

from tests.client.test_client_jobs import NODE, FakeOps, settle
from xmpp_queue.client import Job, LockLost, Worker, in_thread
from xmpp_queue.client.errors import StanzaError
from xmpp_queue.client.jobs import JobRunner, check_handler
from xmpp_queue.client.wire import ItemEvent


class JobOps(FakeOps):
    async def unlock_later(self, node: str, item_id: str, delay: int) -> None:
        await self._call(f"unlock_later{delay}", item_id)

    async def dead_letter(self, node: str, item_id: str, reason: str) -> None:
        await self._call(f"dead_letter:{reason}", item_id)


def event(item_id: str, headers: dict[str, str] | None = None) -> ItemEvent:
    return ItemEvent(NODE, item_id, None, headers or {})


async def test_delivery_is_the_service_count_as_an_int() -> None:
    seen: list[object] = []

    async def handler(job: Job) -> None:
        seen.append(job.delivery)

    runner = JobRunner(JobOps(), handler, 1)
    runner.offer(event("a", {"delivery-attempt": "3"}))
    await settle()
    runner.offer(event("b"))  # a service without the header: this worker's count
    await settle()
    assert seen == [3, 1]
    assert all(type(d) is int for d in seen)


async def test_unlock_with_a_delay_is_sent_and_the_return_does_not_ack() -> None:
    ops = JobOps()

    async def handler(job: Job) -> None:
        await job.unlock(delay=30)

    runner = JobRunner(ops, handler, 1)
    runner.offer(event("a"))
    await settle()
    assert ops.calls == [("unlock_later30", "a")]
    assert (runner.stats.unlocked, runner.stats.acked, runner.held) == (1, 0, 0)


async def test_unlock_without_a_delay_is_the_plain_xep_0254_unlock() -> None:
    ops = JobOps()

    async def handler(job: Job) -> None:
        await job.unlock()
        raise RuntimeError("after settling, an exception changes nothing")

    runner = JobRunner(ops, handler, 1)
    runner.offer(event("a"))
    await settle()
    assert ops.calls == [("unlock", "a")]
    assert runner.stats.failed == 0


async def test_dead_letter_now_sends_the_reason_and_settles_once() -> None:
    ops = JobOps()
    errors: list[BaseException] = []

    async def handler(job: Job) -> None:
        await job.dead_letter("bad schema")
        try:
            await job.unlock()
        except RuntimeError as exc:
            errors.append(exc)

    runner = JobRunner(ops, handler, 1)
    runner.offer(event("a"))
    await settle()
    assert ops.calls == [("dead_letter:bad schema", "a")]
    assert runner.stats.dead_lettered == 1
    assert len(errors) == 1 and "already dead-lettered" in str(errors[0])


async def test_extend_asks_the_service_and_a_refusal_is_lock_lost() -> None:
    ops = JobOps()
    ops.refuse[("extend60", "b")] = StanzaError("unexpected-request", etype="wait")
    outcomes: dict[str, object] = {}

    async def handler(job: Job) -> None:
        try:
            await job.extend(60)
            outcomes[job.item_id] = "extended"
        except LockLost as exc:
            outcomes[job.item_id] = exc

    runner = JobRunner(ops, handler, 2)
    runner.offer(event("a"))
    runner.offer(event("b"))
    await settle()
    assert outcomes["a"] == "extended"
    assert isinstance(outcomes["b"], LockLost)
    assert ("retract", "a") in ops.calls and ("retract", "b") not in ops.calls
    assert runner.stats.extended == 1 and runner.stats.lost == 1


async def test_a_job_whose_lock_timed_out_cannot_be_settled() -> None:
    ops = JobOps()
    started = asyncio.Event()
    go = asyncio.Event()
    caught: list[BaseException] = []

    async def handler(job: Job) -> None:
        started.set()
        await go.wait()
        try:
            await job.dead_letter("late")
        except LockLost as exc:
            caught.append(exc)

    runner = JobRunner(ops, handler, 1)
    runner.offer(event("a"))
    await started.wait()
    runner.on_unlocked("a")  # the service's unlock notice: the lock timed out
    go.set()
    await settle()
    assert len(caught) == 1 and ops.calls == []


def test_a_plain_def_handler_is_refused_at_construction() -> None:
    def handler(job: Job) -> None:
        return None

    with pytest.raises(TypeError, match=r"must be an 'async def'.*in_thread"):
        Worker("w@localhost", "pw", "queue.localhost", "jobs", handler)


def test_async_callables_partials_and_objects_are_accepted() -> None:
    async def handler(job: Job, extra: int) -> None:
        return None

    class Callable_:
        async def __call__(self, job: Job) -> None:
            return None

    check_handler(partial(handler, extra=1))
    check_handler(Callable_())
    with pytest.raises(TypeError):
        check_handler(lambda job: None)


async def test_in_thread_runs_a_blocking_handler_off_the_event_loop() -> None:
    ops = JobOps()
    threads: list[str] = []

    def blocking(job: Job) -> None:
        threads.append(threading.current_thread().name)

    runner = JobRunner(ops, in_thread(blocking), 1)
    runner.offer(event("a"))
    for _ in range(100):
        if ops.calls:
            break
        await asyncio.sleep(0.01)
    assert ops.calls == [("retract", "a")]
    assert threads and threads[0] != threading.main_thread().name


def test_a_worker_s_name_is_its_resource() -> None:
    async def handler(job: Job) -> None:
        return None

    named = Worker("w@localhost", "pw", "queue.localhost", "jobs", handler, name="billing-1")
    assert (named.jid, named.name) == ("w@localhost/billing-1", "billing-1")
    unnamed = Worker("w@localhost", "pw", "queue.localhost", "jobs", handler)
    assert unnamed.jid.startswith("w@localhost/") and unnamed.name == unnamed.jid.split("/")[1]
    other = Worker("w@localhost", "pw", "queue.localhost", "jobs", handler)
    assert other.name != unnamed.name, "two unnamed workers in one process differ"
