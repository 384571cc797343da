"""``pubsub#queue_expire_after``: a bound queue without a subscriber for that long is
deleted by the timer's sweep (docs/queueing.md, "Topics and subscriptions"),
over the in-memory store with a fake clock."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.kit import ALICE, BOB, OWNER, PUB, FakeClock
from xmpp_queue.core.effects import DeleteNotice
from xmpp_queue.core.errors import InvalidNodeConfig, NodeNotFound
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import Affiliation
from xmpp_queue.core.service import PubSubService

AFTER = 600


async def _topic(service: PubSubService) -> None:
    await service.create_node(OWNER, "billing", {})
    await service.set_node_affiliations(OWNER, "billing", [(PUB.bare, Affiliation.PUBLISHER)])


async def _queue(service: PubSubService, node: str = "q", **config: str) -> None:
    values = {"pubsub#queue": ["1"], "pubsub#queue_topic": ["billing"]}
    values |= {"pubsub#queue_expire_after": [str(AFTER)]}
    values |= {f"pubsub#{k}": [v] for k, v in config.items()}
    await service.create_node(OWNER, node, values)
    await service.set_node_affiliations(
        OWNER, node, [(a.bare, Affiliation.MEMBER) for a in (ALICE, BOB)]
    )


async def _exists(service: PubSubService, node: str) -> bool:
    try:
        await service.get_config(OWNER, node)
    except NodeNotFound:
        return False
    return True


async def _expired_rows(service: PubSubService) -> list[tuple[str, str | None]]:
    events = await service._ctx.read(lambda w: w.tx.ledger.events(None))
    return [(e.node, e.reason) for e in events if e.kind is EventKind.EXPIRED_UNUSED]


async def _join(service: PubSubService, actor) -> None:  # type: ignore[no-untyped-def]
    await service.subscribe(actor, "q", actor.jid, {"pubsub#queue_requests": ["5"]})


async def _leave(service: PubSubService, node: str, actor=ALICE) -> None:  # type: ignore[no-untyped-def]
    subs = await service.own_subscriptions(actor, node)
    for s in subs:
        await service.unsubscribe(actor, node, actor.jid, s.subid)


async def test_a_bound_queue_left_without_subscriber_is_deleted_after_the_delay(
    service: PubSubService, clock: FakeClock
) -> None:
    await _topic(service)
    await _queue(service)
    await _join(service, ALICE)
    await _join(service, BOB)
    clock.advance(AFTER * 3)  # subscribed all along: nothing happens
    await service.sweep()
    assert await _exists(service, "q")
    await _leave(service, "q", ALICE)
    await _leave(service, "q", BOB)  # the last subscriber leaves now
    left_at = clock.now
    assert await service.next_deadline() == left_at + timedelta(seconds=AFTER)
    clock.advance(AFTER - 1)
    out = await service.sweep()
    assert await _exists(service, "q")
    assert out.effects == ()
    clock.advance(1)
    out = await service.sweep()
    assert not await _exists(service, "q")
    assert await _expired_rows(service) == [("q", str(AFTER))]
    # the topic keeps working, without the queue
    await service.publish(PUB, "billing", "ev2", "<e/>", 4)
    assert await service.next_deadline() is None


async def test_the_deletion_takes_the_owners_delete_path(
    service: PubSubService, clock: FakeClock
) -> None:
    """The backlog ends with purged rows, as an owner's delete records it; nobody
    is subscribed, so no one is left to get a delete notice."""
    await _topic(service)
    await _queue(service)
    await _join(service, ALICE)
    await service.publish(PUB, "billing", "ev1", "<e/>", 4)
    await _leave(service, "q")
    clock.advance(AFTER)
    out = await service.sweep()
    assert not await _exists(service, "q")
    assert [e for e in out.effects if isinstance(e, DeleteNotice)] == []
    events = await service._ctx.read(lambda w: w.tx.ledger.events("q"))
    kinds = [(e.kind, e.item_id) for e in events]
    assert kinds[-2:] == [(EventKind.EXPIRED_UNUSED, ""), (EventKind.PURGED, "ev1")]


async def test_a_subscriber_coming_back_keeps_the_queue(
    service: PubSubService, clock: FakeClock
) -> None:
    await _topic(service)
    await _queue(service)
    await _join(service, ALICE)
    await _leave(service, "q")
    clock.advance(AFTER - 10)
    await _join(service, BOB)  # came back before the delay ran out
    clock.advance(AFTER * 2)
    await service.sweep()
    assert await _exists(service, "q")
    # ...and when it leaves again, the clock starts from then
    await _leave(service, "q", BOB)
    clock.advance(AFTER - 1)
    await service.sweep()
    assert await _exists(service, "q")
    clock.advance(1)
    await service.sweep()
    assert not await _exists(service, "q")


async def test_a_queue_created_without_subscriber_counts_from_its_creation(
    service: PubSubService, clock: FakeClock
) -> None:
    await _topic(service)
    await _queue(service)
    clock.advance(AFTER)
    await service.sweep()
    assert not await _exists(service, "q")


@pytest.mark.parametrize("config", [{"queue_expire_after": "0"}, {"queue_topic": ""}])
async def test_not_deleted_when_off_or_unbound(
    service: PubSubService, clock: FakeClock, config: dict[str, str]
) -> None:
    await _topic(service)
    await _queue(service, **config)
    clock.advance(AFTER * 10)
    await service.sweep()
    assert await _exists(service, "q")
    assert await service.next_deadline() is None
    assert await _expired_rows(service) == []


async def test_setting_the_field_later_starts_the_clock_then(
    service: PubSubService, clock: FakeClock
) -> None:
    await _topic(service)
    await _queue(service, queue_expire_after="0")
    clock.advance(AFTER * 10)
    await service.configure_node(OWNER, "q", {"pubsub#queue_expire_after": [str(AFTER)]})
    clock.advance(AFTER - 1)
    await service.sweep()
    assert await _exists(service, "q")
    clock.advance(1)
    await service.sweep()
    assert not await _exists(service, "q")


async def test_unbinding_or_turning_off_before_the_time_keeps_the_queue(
    service: PubSubService, clock: FakeClock
) -> None:
    await _topic(service)
    await _queue(service, "a")
    await _queue(service, "b")
    await service.configure_node(OWNER, "a", {"pubsub#queue_topic": [""]})
    await service.configure_node(OWNER, "b", {"pubsub#queue_expire_after": ["0"]})
    clock.advance(AFTER * 2)
    await service.sweep()
    assert await _exists(service, "a") and await _exists(service, "b")


async def test_the_field_has_bounds(service: PubSubService) -> None:
    await _topic(service)
    with pytest.raises(InvalidNodeConfig):
        await _queue(service, queue_expire_after="-1")
    await _queue(service)
    assert (await service.get_config(OWNER, "q")).queue_expire_after == AFTER
