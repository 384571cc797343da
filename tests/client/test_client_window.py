"""PublishWindow: back-pressure, retries of wait-type errors, timeouts; a fake sender."""

from __future__ import annotations

import asyncio

import pytest

from xmpp_queue.client.errors import ConnectionLost, PublishError, StanzaError
from xmpp_queue.client.window import PublishWindow, RetryPolicy

NO_DELAY = RetryPolicy(attempts=4, first_delay=0.0)


class FakeSender:
    """Records each send and lets the test answer it."""

    def __init__(self) -> None:
        self.sent: list[asyncio.Future[str]] = []

    def __call__(self) -> asyncio.Future[str]:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.sent.append(future)
        return future


async def settle() -> None:
    """Let callbacks scheduled with call_soon / call_later(0) run."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_submit_waits_when_the_window_is_full() -> None:
    window: PublishWindow[str] = PublishWindow(2, NO_DELAY)
    send = FakeSender()
    first = await window.submit(send, str.upper)
    second = await window.submit(send, str.upper)
    assert window.outstanding == 2
    third_submit = asyncio.ensure_future(window.submit(send, str.upper))
    await settle()
    assert not third_submit.done(), "a full window must push back"
    assert len(send.sent) == 2

    send.sent[0].set_result("a")
    await settle()
    assert third_submit.done() and len(send.sent) == 3
    assert await first == "A"

    send.sent[1].set_result("b")
    send.sent[2].set_result("c")
    assert [await second, await third_submit.result()] == ["B", "C"]
    await asyncio.wait_for(window.join(), 1)
    assert window.outstanding == 0


async def test_wait_errors_are_retried_with_a_fresh_send() -> None:
    window: PublishWindow[str] = PublishWindow(1, NO_DELAY)
    send = FakeSender()
    result = await window.submit(send, str)
    send.sent[0].set_exception(StanzaError("resource-constraint", etype="wait"))
    await settle()
    assert len(send.sent) == 2 and window.retries == 1
    send.sent[1].set_result("ok")
    assert await result == "ok"


async def test_wait_errors_give_up_after_the_last_attempt() -> None:
    window: PublishWindow[str] = PublishWindow(1, RetryPolicy(attempts=2, first_delay=0.0))
    send = FakeSender()
    result = await window.submit(send, str)
    for i in range(2):
        await settle()
        send.sent[i].set_exception(StanzaError("internal-server-error", "busy", "wait"))
    with pytest.raises(PublishError) as caught:
        await result
    assert (caught.value.condition, caught.value.etype) == ("internal-server-error", "wait")
    assert len(send.sent) == 2
    assert window.outstanding == 0


async def test_other_errors_fail_at_once_as_publish_error() -> None:
    window: PublishWindow[str] = PublishWindow(4, NO_DELAY)
    send = FakeSender()
    forbidden = await window.submit(send, str)
    lost = await window.submit(send, str)
    send.sent[0].set_exception(StanzaError("forbidden", "no", "auth"))
    send.sent[1].set_exception(ConnectionLost("gone"))
    with pytest.raises(PublishError) as caught:
        await forbidden
    assert (caught.value.condition, caught.value.text) == ("forbidden", "no")
    with pytest.raises(PublishError) as caught:
        await lost
    assert caught.value.condition == "connection-lost"
    assert len(send.sent) == 2 and window.outstanding == 0


async def test_no_answer_in_time_is_a_timeout_and_frees_the_slot() -> None:
    """Each unanswered attempt is sent again (at least once) until the policy gives up."""
    window: PublishWindow[str] = PublishWindow(1, NO_DELAY, timeout=0)
    send = FakeSender()
    result = await window.submit(send, str)
    with pytest.raises(PublishError) as caught:
        await result
    assert caught.value.condition == "remote-server-timeout"
    assert len(send.sent) == NO_DELAY.attempts
    assert all(f.cancelled() for f in send.sent), "a late answer must be ignored"
    assert window.outstanding == 0


async def test_a_publish_lost_without_an_answer_is_sent_again() -> None:
    """A takeover can swallow a request (the process that read it died): no answer in
    time, so it goes out again, and the second answer counts."""
    window: PublishWindow[str] = PublishWindow(1, NO_DELAY, timeout=0.2)
    resent = asyncio.Event()
    sender = FakeSender()

    def send() -> asyncio.Future[str]:
        future = sender()
        if len(sender.sent) == 2:
            resent.set()
        return future

    result = await window.submit(send, str)
    await asyncio.wait_for(resent.wait(), 5)  # the first attempt timed out: sent again
    send = sender
    assert send.sent[0].cancelled()
    send.sent[1].set_result("stored")
    assert await result == "stored"


async def test_a_caller_that_stops_waiting_does_not_leak_its_slot() -> None:
    window: PublishWindow[str] = PublishWindow(1, NO_DELAY)
    send = FakeSender()
    result = await window.submit(send, str)
    result.cancel()
    send.sent[0].set_result("late")
    await settle()
    assert window.outstanding == 0
    again = await asyncio.wait_for(window.submit(send, str), 1)
    send.sent[1].set_result("x")
    assert await again == "x"


async def test_a_send_that_raises_fails_only_its_own_request() -> None:
    window: PublishWindow[str] = PublishWindow(1, NO_DELAY)

    def broken() -> asyncio.Future[str]:
        raise ConnectionLost("not connected")

    result = await window.submit(broken, str)
    with pytest.raises(PublishError):
        await result
    assert window.outstanding == 0


def test_backoff_doubles_up_to_its_cap() -> None:
    policy = RetryPolicy(attempts=10, first_delay=0.1, factor=2.0, max_delay=0.5)
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5)] == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5])


def test_window_must_hold_at_least_one_request() -> None:
    with pytest.raises(ValueError):
        PublishWindow(0)


async def test_a_refusal_while_the_component_is_away_is_retried() -> None:
    """ejabberd answers forbidden for a component that is not connected (a takeover,
    a restart): the window asks the service; it does not answer, so the publish is
    sent again, and succeeds once the component is back."""
    probes: list[str] = []

    async def away() -> bool:
        probes.append("probe")
        return True

    window: PublishWindow[str] = PublishWindow(1, NO_DELAY, service_away=away)
    send = FakeSender()
    result = await window.submit(send, str)
    send.sent[0].set_exception(StanzaError("forbidden", "Access denied by service policy", "auth"))
    await settle()
    assert probes == ["probe"] and len(send.sent) == 2
    send.sent[1].set_result("ok")
    assert await result == "ok"


async def _refused_with_the_service_present(
    error: StanzaError,
) -> tuple[FakeSender, asyncio.Future[str]]:
    """A publish refused once with *error*, its service answering the probe."""

    async def present() -> bool:
        return False

    window: PublishWindow[str] = PublishWindow(1, NO_DELAY, service_away=present)
    send = FakeSender()
    result = await window.submit(send, str)
    send.sent[0].set_exception(error)
    await settle()
    return send, result


async def test_a_refusal_from_the_service_itself_is_final() -> None:
    """The service answers the probe, so a forbidden may be its own: asked once more,
    the same refusal again is final."""
    send, result = await _refused_with_the_service_present(
        StanzaError("forbidden", "publish", "auth")
    )
    assert len(send.sent) == 2
    send.sent[1].set_exception(StanzaError("forbidden", "publish", "auth"))
    await settle()
    with pytest.raises(PublishError) as refused:
        await result
    assert refused.value.condition == "forbidden" and len(send.sent) == 2


async def test_a_refusal_from_before_the_service_came_back_is_sent_again() -> None:
    """ejabberd refused the publish while the shard's process was gone, and a standby
    took over before the probe: the probe finds the service there, yet the publish
    was never seen by it. It is sent again and succeeds."""
    send, result = await _refused_with_the_service_present(
        StanzaError("forbidden", "Access denied by service policy", "auth")
    )
    assert len(send.sent) == 2
    send.sent[1].set_result("stored")
    assert await result == "stored"


async def test_each_absence_earns_one_more_try_once_the_service_answers() -> None:
    """Two takeovers during one publish: after each, a refusal met by a present
    service is asked once more, so only a refusal the service repeats is final."""
    answers = iter([True, False, True, False, False])  # away, back, away, back, back

    async def probe() -> bool:
        return next(answers)

    window: PublishWindow[str] = PublishWindow(1, NO_DELAY, service_away=probe)
    window.retry = RetryPolicy(attempts=10, first_delay=0.0)
    send = FakeSender()
    result = await window.submit(send, str)
    refusal = StanzaError("forbidden", "Access denied by service policy", "auth")
    for n in range(4):  # away: retried; back: asked again; away again; back again
        send.sent[n].set_exception(refusal)
        await settle()
        assert len(send.sent) == n + 2
    send.sent[4].set_exception(refusal)  # the service itself, twice in a row: final
    await settle()
    with pytest.raises(PublishError):
        await result
    assert len(send.sent) == 5
