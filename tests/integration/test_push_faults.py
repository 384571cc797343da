"""Push endpoints that push back or go away, through a real Prosody (issue 22 point 5).

What is asserted is what the endpoint saw and the component's own window gauge,
never wall time: push-back (503) halves the window down to one POST at a time
(the receiver sees no more than one open request), and it grows back on 2xx; an
endpoint that is down for 30 s loses nothing (every item is POSTed again after its
retry delay and acked once the endpoint answers) while another queue's endpoint
keeps being served.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.queue_helpers import create_queue, publish
from tests.integration.test_push_wire import PUSH, _add_push
from tests.kit.integration import ClientFactory, ComponentFactory, ComponentProcess
from tests.kit.push import Receiver, Seen

pytestmark = [pytest.mark.integration]

HTTP = {"listen": "127.0.0.1:0"}


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rec = await Receiver().start()
    yield rec
    await rec.stop()


async def push_metrics(comp: ComponentProcess, name: str) -> dict[str, float]:
    """Samples of *name* on /metrics, keyed by their status label (or "" if none)."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(comp.http_base() + "/metrics") as r,
    ):
        text = await r.text()
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name:
                key = s.labels.get("status", "")
                found[key] = found.get(key, 0.0) + float(s.value)
    return found


async def metrics_until(
    comp: ComponentProcess, name: str, ready: Callable[[dict[str, float]], bool]
) -> dict[str, float]:
    """The samples once *ready* holds (the receiver counts a POST before the component
    has read its answer)."""
    for _ in range(150):
        found = await push_metrics(comp, name)
        if ready(found):
            return found
        await asyncio.sleep(0.2)
    raise AssertionError(f"{name} never got there: {found}")


def count(seen: list[Seen], status: int) -> int:
    return sum(1 for s in seen if s.status == status)


async def test_push_back_shrinks_the_window_and_success_grows_it(
    component: ComponentFactory, client: ClientFactory, receiver: Receiver
) -> None:
    rec = receiver
    comp = await component(push=PUSH, http=HTTP)
    owner, admin = await client("alice"), await client("admin")
    node = await create_queue(owner, queue_retry_delay=0, queue_max_deliveries=0)
    await _add_push(admin, node, rec.url)  # max in flight 4
    rec.delay = 0.1  # slow enough that a backlog builds behind the window

    for n in range(16):
        await publish(owner, node, f"a{n}")
    await rec.until(lambda seen: count(seen, 204) == 16)
    grown = max(s.concurrent for s in rec.seen)
    assert grown >= 3, rec.seen  # slow start opened the window past one
    assert (await push_metrics(comp, "xmpp_queue_push_window"))[""] == 4

    rec.default = 503  # push-back from now on: every item is nacked and sent again
    for n in range(8):
        await publish(owner, node, f"b{n}")
    await rec.until(lambda seen: count(seen, 503) >= 24)
    assert (await push_metrics(comp, "xmpp_queue_push_window"))[""] == 1
    pushed_back = [s for s in rec.seen if s.status == 503]
    # Once the POSTs open at the first 503 have answered, one at a time.
    assert max(s.concurrent for s in pushed_back[8:]) == 1, pushed_back

    rec.default = 204
    await rec.until(lambda seen: len(rec.acked()) == 24)
    requests = await metrics_until(
        comp, "xmpp_queue_push_requests_total", lambda found: found.get("204", 0) >= 24
    )
    assert requests["503"] >= 24
    assert (await push_metrics(comp, "xmpp_queue_push_window"))[""] > 1  # growing back


OUTAGE = 30.0  # seconds: the "an endpoint down for 30 s"


async def test_endpoint_down_for_30_s_loses_nothing_and_drains_when_back(
    component: ComponentFactory, client: ClientFactory, receiver: Receiver
) -> None:
    """Issue 22: an endpoint down for 30 s. While it is down (the test's one long
    wait), the other checks run: items keep being published to its queue, every POST
    fails and is tried again after the retry delay, and another queue's endpoint,
    up all along, gets and acks its items as usual (one endpoint down holds back no
    other). Back up on the same port, the backlog drains: every item acked once."""
    rec = receiver
    other = await Receiver().start()
    try:
        comp = await component(push=PUSH, http=HTTP)
        owner, admin = await client("alice"), await client("admin")
        node = await create_queue(
            owner, queue_retry_delay=1, queue_retry_delay_max=2, queue_max_deliveries=0
        )
        beside = await create_queue(owner, queue_retry_delay=0)
        await _add_push(admin, node, rec.url)
        await _add_push(admin, beside, other.url)
        await rec.stop()  # connection refused from now on
        loop = asyncio.get_running_loop()
        back_at = loop.time() + OUTAGE
        items = {await publish(owner, node, f"d{n}") for n in range(6)}
        elsewhere: set[str] = set()
        while loop.time() < back_at - 2:  # during the outage, both queues get work
            elsewhere.add(await publish(owner, beside, f"b{len(elsewhere)}"))
            if len(items) < 12:
                items.add(await publish(owner, node, f"d{len(items)}"))
            await asyncio.sleep(2)
        await other.until(lambda seen: other.acked() == elsewhere, 10)
        # Tried, refused, tried again after the retry delay, many times over.
        await metrics_until(
            comp,
            "xmpp_queue_push_requests_total",
            lambda found: found.get("error", 0) >= 4 * len(items),
        )
        await asyncio.sleep(max(0.0, back_at - loop.time()))
        assert rec.seen == []  # nothing reached it, nothing counted as acked
        assert count(other.seen, 204) == len(elsewhere)  # acked once each, on time

        await rec.start()  # back, same port
        await rec.until(lambda seen: rec.acked() == items, 30)
        assert all(s.attempt >= 2 for s in rec.seen), rec.seen  # each first POST was refused
        await asyncio.sleep(1)
        assert count(rec.seen, 204) == len(items)  # acked once each: nothing POSTed after
    finally:
        await other.stop()
