"""A worker's acks are sent again until the service answers them (issue 27, point 3).

Fake links, no server: the service goes away while the stream stays up (a
component restart behind the same XMPP server). The real thing, with Prosody
and a killed component, is ``tests/integration/test_ack_resend.py``.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.client.test_client_reconnect import FAST, until, worker_on
from tests.client.test_client_stream import FakeLink, deliver
from xmpp_queue.client import Job, ReconnectPolicy, StanzaError, resend

AWAY = StanzaError("remote-server-timeout", "Component unavailable", "wait")


class ServiceLink(FakeLink):
    """A link whose service can be away: then requests get *AWAY*, or (``silent``)
    no answer at all, as when the component dies with the request in its socket."""

    def __init__(self) -> None:
        super().__init__()
        self.away = False
        self.silent = False
        self.refuse: dict[str, StanzaError] = {}  # item id -> final answer
        self.pings = 0
        self._never: list[asyncio.Future[None]] = []

    async def ping_service(self) -> None:
        self.pings += 1
        if self.away:
            raise AWAY

    async def _answer(self, what: str) -> None:
        self.log.append(what)
        if self.silent:
            never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._never.append(never)
            await never
        if self.away:
            raise AWAY

    async def retract(self, node: str, item_id: str) -> None:
        await self._answer(f"retract {item_id}")
        if item_id in self.refuse:
            raise self.refuse[item_id]

    async def extend(self, node: str, item_id: str, seconds: int) -> None:
        await self._answer(f"extend {item_id}")

    async def unlock(self, node: str, item_id: str, reason: str = "") -> None:
        await self._answer(f"unlock {item_id}")
        self.reasons[item_id] = reason


@pytest.fixture(autouse=True)
def quick_patience(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resend, "FIRST_RESEND_AFTER", 0.05)


async def test_an_ack_refused_while_the_service_is_away_is_sent_again_when_it_answers() -> None:
    link = ServiceLink()

    async def handler(job: Job) -> None:
        return None

    worker = worker_on([link], handler, reconnect=FAST)
    await worker.start()
    link.away = True
    deliver(link, "a")
    await until(lambda: link.pings >= 2)
    assert worker.stats.acked == 0
    link.away = False
    await until(lambda: worker.stats.acked == 1)
    assert link.log.count("retract a") == 2
    assert link.log[-2:] == ["presence", "retract a"], "presence again, then the ack"
    await worker.stop(grace=1)


async def test_an_ack_lost_without_answer_is_sent_again_once_the_service_answers() -> None:
    link = ServiceLink()

    async def handler(job: Job) -> None:
        return None

    worker = worker_on([link], handler, reconnect=FAST)
    await worker.start()
    link.silent = True  # the component died with our ack unread
    deliver(link, "a")
    await until(lambda: "retract a" in link.log)
    link.silent = False  # a new component: pings and acks are answered again
    await until(lambda: worker.stats.acked == 1)
    assert link.log.count("retract a") == 2
    await worker.stop(grace=1)


async def test_a_nack_and_an_extend_refused_while_the_service_is_away_are_sent_again() -> None:
    """Not only acks: the nack of a failed handler and a handler's own extend go out
    again once the service answers, the nack with its reason."""
    link = ServiceLink()

    async def handler(job: Job) -> None:
        if job.item_id == "b":
            await job.extend(60)
            return
        raise KeyError("sku")

    worker = worker_on([link], handler, reconnect=FAST, queue_requests=2)
    await worker.start()
    link.away = True
    deliver(link, "a")
    deliver(link, "b")
    await until(lambda: link.pings >= 2 and "unlock a" in link.log and "extend b" in link.log)
    assert (worker.stats.extended, worker.stats.acked) == (0, 0)
    link.away = False
    await until(lambda: worker.stats.acked == 1 and link.log.count("unlock a") == 2)
    assert link.log.count("unlock a") == 2 and link.log.count("extend b") == 2
    assert worker.stats.extended == 1 and link.reasons["a"] == "KeyError: 'sku'"
    await worker.stop(grace=1)


async def test_a_lock_refusal_after_a_resend_is_final_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    link = ServiceLink()

    async def handler(job: Job) -> None:
        return None

    worker = worker_on([link], handler, reconnect=FAST)
    await worker.start()
    link.away = True
    deliver(link, "a")
    await until(lambda: link.pings >= 1)
    # Our first ack did commit before the answer was lost: the resend hears "not yours".
    link.refuse["a"] = StanzaError("item-not-found", "", "cancel")
    with caplog.at_level(logging.INFO, "xmpp_queue.client"):
        link.away = False
        await until(lambda: worker.stats.lost == 1)
        await asyncio.sleep(0.2)
    assert link.log.count("retract a") == 2, "a refusal is never sent again"
    refusals = [r for r in caplog.records if "event=ack_refused" in r.getMessage()]
    assert len(refusals) == 1
    outages = [r for r in caplog.records if "event=service_back" in r.getMessage()]
    assert len(outages) == 1
    await worker.stop(grace=1)


async def test_many_acks_in_one_outage_log_one_line(caplog: pytest.LogCaptureFixture) -> None:
    link = ServiceLink()

    async def handler(job: Job) -> None:
        return None

    worker = worker_on([link], handler, reconnect=FAST, queue_requests=20)
    await worker.start()
    link.away = True
    with caplog.at_level(logging.INFO, "xmpp_queue.client"):
        for n in range(20):
            deliver(link, f"i{n}")
        await until(lambda: link.pings >= 3)
        link.away = False
        await until(lambda: worker.stats.acked == 20)
    lines = [r.getMessage() for r in caplog.records]
    assert sum("event=service_unavailable" in m for m in lines) == 1
    assert sum("event=service_back" in m for m in lines) == 1
    await worker.stop(grace=1)


def test_the_first_retry_goes_at_once_then_jittered_backoff_up_to_its_cap() -> None:
    policy = ReconnectPolicy()
    assert policy.delay(0) == 0.0
    for n, base in [(1, 0.25), (2, 0.5), (3, 1.0), (10, 1.0)]:
        delays = [policy.delay(n) for _ in range(200)]
        assert all(base / 2 <= d <= base for d in delays)
        assert max(delays) - min(delays) > base / 10, "jittered"


async def test_ejabberds_forbidden_for_a_missing_service_is_not_taken_as_final() -> None:
    """ejabberd answers "forbidden" for a component that is not connected: the ack is
    sent again once the service answers; a forbidden the service itself repeats is final."""
    link = ServiceLink()
    forbidden = StanzaError("forbidden", "Access denied by service policy", "auth")

    async def handler(job: Job) -> None:
        return None

    worker = worker_on([link], handler, reconnect=FAST, queue_requests=2)
    await worker.start()
    link.away = True
    link.refuse["a"] = forbidden  # what ejabberd says while the component is gone

    async def ejabberd_retract(node: str, item_id: str) -> None:
        link.log.append(f"retract {item_id}")
        if link.away or item_id == "b":
            raise forbidden

    link.retract = ejabberd_retract  # type: ignore[method-assign]
    deliver(link, "a")
    await until(lambda: link.pings >= 2)
    link.away = False
    await until(lambda: worker.stats.acked == 1)
    deliver(link, "b")  # the service itself refuses: asked twice, then final
    await until(lambda: worker.stats.lost == 1)
    assert link.log.count("retract b") == 2
    await worker.stop(grace=1)


async def test_a_second_absence_earns_the_ack_one_more_try() -> None:
    """A refusal met by a present service is asked once more; if the service is then
    found away again (a second takeover), its next refusal earns another try."""
    link = ServiceLink()
    forbidden = StanzaError("forbidden", "Access denied by service policy", "auth")
    answers = ["forbidden", "forbidden", "forbidden", "ok"]
    pings = ["back", "away"]  # then back for good

    async def handler(job: Job) -> None:
        return None

    async def scripted_ping() -> None:
        link.pings += 1
        if (pings.pop(0) if pings else "back") == "away":
            raise AWAY

    async def scripted_retract(node: str, item_id: str) -> None:
        link.log.append(f"retract {item_id}")
        if answers.pop(0) == "forbidden":
            raise forbidden

    link.ping_service = scripted_ping  # type: ignore[method-assign]
    link.retract = scripted_retract  # type: ignore[method-assign]
    worker = worker_on([link], handler, reconnect=FAST, queue_requests=2)
    await worker.start()
    deliver(link, "a")
    await until(lambda: worker.stats.acked == 1)
    assert link.log.count("retract a") == 4 and worker.stats.lost == 0
    await worker.stop(grace=1)
