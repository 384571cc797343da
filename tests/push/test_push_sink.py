"""Push delivery through the outbox, against a real HTTP server in the test process.

The service and store are the real ones (memory backend); the endpoint is an aiohttp
server on a loopback port whose answers the test chooses. A push subscription is a
queue subscription whose JID the outbox routes to the PushSink.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from datetime import UTC
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.kit import ADMIN, OWNER, PUB, FakeClock
from xmpp_queue.core.effects import Effect
from xmpp_queue.core.model import Actor, Affiliation
from xmpp_queue.core.service import PubSubService
from xmpp_queue.push.sink import SIGNATURE_HEADER, PushEndpoint, PushSink
from xmpp_queue.runtime.outbox import Outbox

HOOK = "hook@example.org/push"
SECRET = b"s3cret"


class Endpoint:
    """A receiver that records each request and answers with the next status."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.delays: list[float] = []  # seconds before answering, per request
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.arrived = asyncio.Event()
        self.concurrent = self.most_concurrent = 0
        self.pause = 0.0  # seconds every answer takes (so that requests overlap)

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append((dict(request.headers), await request.read()))
        self.arrived.set()
        self.concurrent += 1
        self.most_concurrent = max(self.most_concurrent, self.concurrent)
        try:
            await asyncio.sleep(self.delays.pop(0) if self.delays else self.pause)
        finally:
            self.concurrent -= 1
        status = self.statuses.pop(0) if self.statuses else 204
        return web.Response(status=status)


class Recorder:
    def __init__(self) -> None:
        self.effects: list[Effect] = []

    def deliver(self, effects: Any) -> None:
        self.effects.extend(effects)


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[Endpoint, str]]:
    receiver = Endpoint()
    app = web.Application()
    app.router.add_post("/hook", receiver.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield receiver, f"http://127.0.0.1:{port}/hook"
    await runner.cleanup()


@pytest.fixture
async def pushed(
    service: PubSubService, endpoint: tuple[Endpoint, str]
) -> AsyncIterator[tuple[PushSink, Endpoint, Recorder]]:
    receiver, url = endpoint
    xmpp = Recorder()
    outbox = Outbox(xmpp)
    async with aiohttp.ClientSession() as session:
        sink = PushSink(
            service,
            outbox,
            PushEndpoint(HOOK, url, bearer="tok", secret=SECRET, timeout=5, max_in_flight=4),
            session,
            wall_clock=lambda: 1_700_000_000.0,
        )
        outbox.route(HOOK, sink)
        config = {"pubsub#queue": ["1"], "pubsub#queue_retry_delay": ["0"]}
        await service.create_node(OWNER, "jobs", config)
        members = [(PUB.bare, Affiliation.PUBLISHER), ("hook@example.org", Affiliation.MEMBER)]
        await service.set_node_affiliations(OWNER, "jobs", members)
        await service.subscribe(Actor(HOOK), "jobs", HOOK, {"pubsub#queue_requests": ["8"]})
        yield sink, receiver, xmpp
        await sink.close()


async def _publish(service: PubSubService, sink: PushSink, item_id: str) -> None:
    """A publish as the component answers it: the outcome's effects to the outbox."""
    outcome = await service.publish(PUB, "jobs", item_id, "<job/>", 6, attributes={"k": "v"})
    sink._outbox.send(outcome.effects)


async def test_a_2xx_acks_the_item_signed_and_authorised(
    service: PubSubService, pushed: tuple[PushSink, Endpoint, Recorder], clock: FakeClock
) -> None:
    sink, receiver, xmpp = pushed
    published = clock.now
    await _publish(service, sink, "i1")
    await asyncio.wait_for(receiver.arrived.wait(), 5)
    await _wait_idle(sink)
    [(headers, body)] = receiver.requests
    assert json.loads(body) == {
        "node": "jobs",
        "id": "i1",
        "payload": "<job/>",
        "attributes": {"k": "v"},
        "publish_time": published.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "delivery_attempt": 1,
    }
    assert headers["Authorization"] == "Bearer tok"
    expected = hmac.new(SECRET, b"1700000000." + body, hashlib.sha256).hexdigest()
    assert headers[SIGNATURE_HEADER] == f"t=1700000000,v1={expected}"
    details = await service.queue_details(ADMIN, "jobs")
    assert (details.backlog, details.locks) == (0, ())  # acked: gone
    assert sink.statuses == {"204": 1}
    assert xmpp.effects == []  # nothing for the push subscriber went to XMPP


async def test_an_error_status_nacks_and_the_item_is_pushed_again(
    service: PubSubService, pushed: tuple[PushSink, Endpoint, Recorder]
) -> None:
    sink, receiver, _ = pushed
    receiver.statuses = [500, 302]  # an error, then a redirect (not followed): both nacks
    await _publish(service, sink, "i1")
    for _ in range(300):
        if len(receiver.requests) >= 3 and not sink._in_flight:
            break
        await asyncio.sleep(0.01)
    attempts = [json.loads(body)["delivery_attempt"] for _, body in receiver.requests]
    assert attempts == [1, 2, 3]
    assert sink.statuses == {"500": 1, "302": 1, "204": 1}
    details = await service.queue_details(ADMIN, "jobs")
    assert (details.backlog, details.locks) == (0, ())


async def _wait_idle(sink: PushSink) -> None:
    for _ in range(300):
        if not sink._in_flight:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("pushes still in flight")


async def test_an_answer_slower_than_the_timeout_is_a_nack(
    service: PubSubService, pushed: tuple[PushSink, Endpoint, Recorder]
) -> None:
    sink, receiver, _ = pushed
    sink.endpoint = dataclasses.replace(sink.endpoint, timeout=0.2)
    receiver.delays = [1.0]
    await _publish(service, sink, "i1")
    for _ in range(300):
        if len(receiver.requests) >= 2 and not sink._in_flight:
            break
        await asyncio.sleep(0.01)
    assert sink.statuses == {"error": 1, "204": 1}
    assert [json.loads(body)["delivery_attempt"] for _, body in receiver.requests] == [1, 2]


async def _drained(service: PubSubService, sink: PushSink) -> None:
    for _ in range(1000):
        details = await service.queue_details(ADMIN, "jobs")
        if details.backlog == 0 and not details.locks and not sink._in_flight:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the queue never drained")


async def test_the_window_grows_on_success_and_push_back_holds_it_at_one(
    service: PubSubService, pushed: tuple[PushSink, Endpoint, Recorder]
) -> None:
    sink, receiver, _ = pushed
    receiver.pause = 0.02
    # Push-back first: every answer 429/503, so the window stays at one and the
    # endpoint never sees two requests at once (items wait in the sink, locked).
    receiver.statuses = [503, 429] * 6
    for n in range(6):
        await _publish(service, sink, f"slow{n}")
    for _ in range(1000):
        if len(receiver.requests) >= 12:
            break
        await asyncio.sleep(0.01)
    assert receiver.most_concurrent == 1 and sink.window.size == 1
    await _drained(service, sink)  # then 204s: the rest is delivered
    # Success: slow start opens the window; requests overlap, up to its ceiling (4),
    # below the subscription's queue_requests (8).
    receiver.most_concurrent = 0
    for n in range(16):
        await _publish(service, sink, f"fast{n}")
    await _drained(service, sink)
    assert 1 < receiver.most_concurrent <= sink.endpoint.max_in_flight
    assert sink.window.size > 1
