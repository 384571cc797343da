"""``pubsub#queue_batch_wait``: a subscriber that takes batches lets the service hold a
short batch for a while to fill it (this service's subscription option), over the
in-memory store and a fake clock."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.kit import ALICE, BOB, PUB, FakeClock
from tests.unit.test_service_batches import item_notices
from tests.unit.test_service_queue import queue
from xmpp_queue.core.errors import InvalidOptions
from xmpp_queue.core.model import Actor
from xmpp_queue.core.service import PubSubService
from xmpp_queue.core.subscribe_options import (
    QUEUE_BATCH_WAIT,
    parse_subscribe_options,
    subscribe_option_values,
)
from xmpp_queue.storage.items_queue import QueueItems


def options(window: int, max_batch: int, wait_ms: int | None) -> dict[str, list[str]]:
    values = {
        "pubsub#queue_requests": [str(window)],
        "pubsub#queue_max_batch": [str(max_batch)],
    }
    if wait_ms is not None:
        values[QUEUE_BATCH_WAIT] = [str(wait_ms)]
    return values


async def waiting_worker(
    service: PubSubService, actor: Actor, window: int = 8, max_batch: int = 4, wait_ms: int = 200
) -> str:
    out = await service.subscribe(actor, "jobs", actor.jid, options(window, max_batch, wait_ms))
    return out.value.subid


async def publish(service: PubSubService, item_id: str) -> tuple[object, ...]:
    return (await service.publish(PUB, "jobs", item_id, f"<j>{item_id}</j>", 8)).effects


# --- the option -------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["-1", "10001", "soon", "1.5"])
def test_a_wait_out_of_range_is_invalid_options_naming_the_field(raw: str) -> None:
    with pytest.raises(InvalidOptions) as err:
        parse_subscribe_options({QUEUE_BATCH_WAIT: [raw]})
    assert err.value.field == QUEUE_BATCH_WAIT


def test_the_wait_is_echoed_only_when_chosen() -> None:
    chosen = parse_subscribe_options(options(8, 4, 250))
    assert chosen.batch_wait_ms == 250
    assert subscribe_option_values(chosen, echo=True)[QUEUE_BATCH_WAIT] == "250"
    plain = parse_subscribe_options({"pubsub#queue_requests": ["8"]})
    assert plain.batch_wait_ms == 0
    assert QUEUE_BATCH_WAIT not in subscribe_option_values(plain, echo=True)
    assert subscribe_option_values(plain)[QUEUE_BATCH_WAIT] == "0"  # the full form


async def test_a_bad_wait_is_refused_and_subscribes_nobody(service: PubSubService) -> None:
    await queue(service)
    with pytest.raises(InvalidOptions):
        await service.subscribe(ALICE, "jobs", ALICE.jid, options(8, 4, 60_000))
    assert await service.own_subscriptions(ALICE) == []


# --- holding a trickle ------------------------------------------------------------------


async def test_a_trickle_waits_until_a_batch_is_full_then_goes_in_one_notification(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service)
    await waiting_worker(service, ALICE)
    for i in range(3):
        assert item_notices(await publish(service, f"i{i}")) == []
        clock.advance(0.01)
    assert item_notices(await publish(service, "i3")) == [(ALICE.jid, ["i0", "i1", "i2", "i3"])]


async def test_the_batch_goes_whole_to_the_worker_it_waited_for(
    service: PubSubService, clock: FakeClock
) -> None:
    """Handed out item by item (fewest in flight first), a batch would be spread over
    every worker with room, a notification each: it goes whole to the one next in turn,
    and the next batch to the next."""
    await queue(service)
    await waiting_worker(service, ALICE)
    await waiting_worker(service, BOB)
    sent = []
    for i in range(8):
        sent += item_notices(await publish(service, f"i{i}"))
        clock.advance(0.01)
    assert [len(ids) for _, ids in sent] == [4, 4]
    assert {to for to, _ in sent} == {ALICE.jid, BOB.jid}


async def test_items_given_back_go_to_another_worker_even_in_a_batch(
    service: PubSubService, clock: FakeClock
) -> None:
    """An unlocked item goes to another subscriber with room: a batch wait does not
    send it back to the worker that gave it up."""
    await queue(service, retry_delay="0")
    await waiting_worker(service, ALICE)
    await waiting_worker(service, BOB)
    sent = []
    for i in range(8):
        sent += item_notices(await publish(service, f"i{i}"))
    assert sent == [(ALICE.jid, ["i0", "i1", "i2", "i3"]), (BOB.jid, ["i4", "i5", "i6", "i7"])]
    # Alice gives hers back: she holds fewest, so she is next in turn, and her batch
    # would be full at once; the items go to Bob, who has room.
    out = await service.unlock(ALICE, "jobs", [f"i{i}" for i in range(4)], reason="no")
    assert item_notices(out.effects) == [(BOB.jid, ["i0", "i1", "i2", "i3"])]


async def test_a_short_batch_goes_when_its_oldest_item_has_waited_the_wait(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service)
    await waiting_worker(service, ALICE, wait_ms=200)
    start = clock.now
    await publish(service, "i0")
    clock.advance(0.05)
    await publish(service, "i1")
    # The timer is armed for the oldest item's wait, not the newest's.
    assert await service.next_deadline() == start + timedelta(milliseconds=200)
    clock.advance(0.1)
    assert item_notices((await service.tick()).effects) == []  # too soon: still held
    clock.advance(0.05)
    out = await service.tick()
    assert item_notices(out.effects) == [(ALICE.jid, ["i0", "i1"])]
    assert await service.next_deadline() is not None  # the locks' deadline now
    assert await service.next_deadline() != start + timedelta(milliseconds=200)


async def test_no_hold_when_the_room_left_is_one_or_the_batch_fits_the_room(
    service: PubSubService, clock: FakeClock
) -> None:
    """The batch to wait for is the smaller of the batch size and the room: a worker
    with two free slots gets two items at once, and one with one slot its item."""
    await queue(service)
    await waiting_worker(service, ALICE, window=2, max_batch=4)
    await publish(service, "i0")
    assert item_notices(await publish(service, "i1")) == [(ALICE.jid, ["i0", "i1"])]
    await service.retract(ALICE, "jobs", "i0")  # one slot free: nothing to wait for
    assert item_notices(await publish(service, "i2")) == [(ALICE.jid, ["i2"])]


async def test_the_room_waited_for_is_read_for_the_worker_alone(
    service: PubSubService, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dispatch that may hold a batch reads the room of the worker next in turn, not
    every holder's count: on a queue with thousands of holders that map was copied for
    each publish."""
    await queue(service)
    await waiting_worker(service, ALICE, window=6, max_batch=4)
    for i in range(4):
        await publish(service, f"i{i}")  # the fourth fills the batch: Alice holds 4 of 6

    async def every_holder(self: QueueItems, node_id: str) -> dict[str, int]:
        raise AssertionError("a batch wait read every holder's count")

    monkeypatch.setattr(QueueItems, "in_flight", every_holder)
    assert item_notices(await publish(service, "i4")) == []  # room 2: a batch of 2 waits
    assert item_notices(await publish(service, "i5")) == [(ALICE.jid, ["i4", "i5"])]


async def test_an_item_back_from_a_nack_waits_from_when_it_became_ready(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service, retry_delay="1")
    await waiting_worker(service, ALICE, window=8, max_batch=4, wait_ms=300)
    for i in range(4):
        await publish(service, f"i{i}")  # the fourth fills the batch: all four go
    await service.unlock(ALICE, "jobs", "i0", reason="try later")
    clock.advance(1)  # the retry delay ends: i0 is ready now, not since its publish
    assert item_notices((await service.tick()).effects) == []
    clock.advance(0.3)
    assert item_notices((await service.tick()).effects) == [(ALICE.jid, ["i0"])]


async def test_subscribers_without_the_option_are_not_held(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service)
    await service.subscribe(BOB, "jobs", BOB.jid, options(8, 4, None))
    assert item_notices(await publish(service, "i0")) == [(BOB.jid, ["i0"])]


async def test_an_ordered_queue_never_holds(service: PubSubService, clock: FakeClock) -> None:
    """One item of a key at a time: a batch of one key could never fill."""
    await queue(service, ordered="1")
    await waiting_worker(service, ALICE)
    out = await service.publish(PUB, "jobs", "k1", "<j/>", 4, attributes={"ordering-key": "a"})
    assert item_notices(out.effects) == [(ALICE.jid, ["k1"])]


async def test_a_held_item_is_waiting_and_counted_as_such(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service)
    await waiting_worker(service, ALICE)
    await publish(service, "i0")
    async with service.store.transaction() as tx:
        stats = await tx.items.queue_stats("jobs")
    assert (stats.backlog, stats.in_flight) == (1, 0)
