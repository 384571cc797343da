"""A timer tick settles only the nodes where something came due (issue 22, point 2).

Counted, not timed: the tick's report names the nodes it settled, so an idle node
shows up as work it did not do.
"""

from __future__ import annotations

from datetime import timedelta

from tests.kit import ALICE, OWNER, PUB, FakeClock
from xmpp_queue.core.attributes import format_datetime
from xmpp_queue.core.model import Affiliation
from xmpp_queue.core.service import PubSubService


async def _queue(svc: PubSubService, node: str, lock: int = 30, retry: int = 0) -> None:
    config = {
        "pubsub#queue": ["1"],
        "pubsub#queue_lock_timeout": [str(lock)],
        "pubsub#queue_retry_delay": [str(retry)],
    }
    await svc.create_node(OWNER, node, config)
    members = [(PUB.bare, Affiliation.PUBLISHER), (ALICE.bare, Affiliation.MEMBER)]
    await svc.set_node_affiliations(OWNER, node, members)


async def test_a_tick_touches_only_the_nodes_with_something_due(
    service: PubSubService, clock: FakeClock
) -> None:
    for n in range(20):  # idle queues: a subscriber, nothing held, nothing waiting
        await _queue(service, f"idle{n}")
        await service.subscribe(ALICE, f"idle{n}", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    await _queue(service, "held", lock=10)  # a lock that times out
    await service.subscribe(ALICE, "held", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    await service.publish(PUB, "held", "h1", "<j/>", 4)
    await _queue(service, "later")  # a delayed item that comes due
    await service.subscribe(ALICE, "later", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    start = format_datetime(clock.now + timedelta(seconds=10))
    await service.publish(PUB, "later", "l1", "<j/>", 4, attributes={"Start": start})
    await _queue(service, "expiring")  # a waiting item (nobody subscribed) that expires
    await service.publish(PUB, "expiring", "e1", "<j/>", 4, attributes={"TTL": "10"})
    await _queue(service, "retrying", retry=5)  # an unlocked item waiting out its back-off
    await service.subscribe(ALICE, "retrying", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    await service.publish(PUB, "retrying", "r1", "<j/>", 4)
    await service.unlock(ALICE, "retrying", "r1")

    clock.advance(1)
    nothing = await service.sweep()
    assert nothing.value.nodes == () and nothing.effects == ()

    clock.advance(9)  # held's lock, later's start and expiring's TTL are due; retrying's too
    report = (await service.sweep()).value
    assert report.expired_locks == 1
    # (the expired item arrived in the dead-letter node: that node is settled too)
    assert set(report.nodes) == {"held", "later", "expiring", "expiring/dead-letter", "retrying"}

    clock.advance(1)
    assert (await service.sweep()).value.nodes == ()


async def test_the_catch_up_after_a_failed_tick_settles_every_node(
    service: PubSubService,
) -> None:
    for n in range(3):
        await _queue(service, f"q{n}")
    report = (await service.sweep(every_node=True)).value
    assert set(report.nodes) == {"q0", "q1", "q2"}
