"""Issue 27 point 4: a departure costs what the subscriber holds, not the subscriber count.

docs/queueing.md ("Workers leaving"): releasing a departed subscriber, subscribing,
acking and publishing must not slow down as a queue's subscribers grow. Cost is
counted, not timed: the number of Python function calls the whole operation makes
(service, batcher, store), traced with ``sys.setprofile`` while nothing else runs.
With a scan of the subscribers anywhere on the path, that count grows with them;
with the indexes it is the same for 40 and for 1,600 subscribers, give or take
the logarithm of a heap.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

from tests.kit import FakeClock, build_service
from xmpp_queue.core.model import AccessModel, Actor, NodeConfig
from xmpp_queue.core.service import ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess

OWNER = Actor("owner@example.org/desk")
QUEUE = {"pubsub#queue": ["1"], "pubsub#access_model": [AccessModel.OPEN.value]}
WINDOW = {"pubsub#queue_requests": ["1"]}


async def _calls(action: Callable[[], Awaitable[Any]], expect: Any = None) -> int:
    """Python function calls made while *action* runs (everything on the loop); its
    outcome's value must be *expect* when given."""
    count = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(profile)
    try:
        outcome = await action()
    finally:
        sys.setprofile(None)
    if expect is not None:
        assert outcome.value == expect
    return count


async def _costs(subscribers: int) -> dict[str, int]:
    """Operation costs on a queue with *subscribers* workers, one lock each but the
    newest (idle), and a backlog of ready items waiting for room."""
    from xmpp_queue.storage.store import StateStore

    svc = build_service(
        StateStore.in_memory(),
        FakeClock(),
        settings=ServiceSettings(
            default_config=NodeConfig(), access=ServiceAccess.for_domain("example.org")
        ),
    )
    await svc.start()
    try:
        await svc.create_node(OWNER, "jobs", QUEUE)
        workers = [Actor(f"w{k}@example.org/r") for k in range(subscribers + 2)]
        for w in workers[:subscribers]:
            await svc.subscribe(w, "jobs", w.jid, WINDOW)
        for k in range(subscribers + 5):  # everyone busy, five waiting
            await svc.publish(OWNER, "jobs", f"i{k}", "<job/>", 6)
        busy, newcomer, idle = workers[0], workers[subscribers], workers[subscribers + 1]
        return {
            # a newcomer gets the next waiting item at once
            "subscribe": await _calls(
                lambda: svc.subscribe(newcomer, "jobs", newcomer.jid, WINDOW)
            ),
            "publish": await _calls(lambda: svc.publish(OWNER, "jobs", "extra", "<job/>", 6)),
            # a busy worker leaves: its one item is released (and waits: nobody has room)
            "departure": await _calls(
                lambda: svc.release_subscriber(busy.jid, "unavailable"), expect=1
            ),
            # one who never subscribed: nothing to release
            "idle departure": await _calls(
                lambda: svc.release_subscriber(idle.jid, "unavailable"), expect=0
            ),
        }
    finally:
        await svc.stop()


async def test_departure_subscribe_and_publish_cost_does_not_grow_with_subscribers() -> None:
    small, large = await _costs(40), await _costs(1600)
    for operation, calls in small.items():
        # 40x the subscribers; a scan of them would make this 40x too.
        assert large[operation] <= calls * 1.3 + 50, (operation, small, large)
