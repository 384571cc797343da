"""Ordered work over the in-memory store, with a fake clock: ordering keys on a
``pubsub#queue_ordered`` queue and the single active consumer
(docs/queueing.md, "Ordering keys" and "Single active consumer")."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.kit import ADMIN, ALICE, BOB, OWNER, PUB, FakeClock
from tests.unit.test_message_model import ids, queue, worker
from xmpp_queue.core.attributes import format_datetime, schedule
from xmpp_queue.core.errors import AttributeRefused, InvalidNodeConfig
from xmpp_queue.core.model import NewItem, NodeConfig
from xmpp_queue.core.service import PubSubService


async def pub(service: PubSubService, item_id: str, key: str | None = None, **attrs: str):  # type: ignore[no-untyped-def]
    attributes = dict(attrs)
    if key is not None:
        attributes["ordering-key"] = key
    return await service.publish(PUB, "jobs", item_id, "<j/>", 4, attributes=attributes)


async def ordered(service: PubSubService, **config: str) -> None:
    await queue(service, queue_ordered="1", queue_retry_delay="0", **config)


async def held(service: PubSubService) -> dict[str, str]:
    """item id -> holder JID of every lock."""
    details = await service.queue_details(ADMIN, "jobs")
    return {i.item_id: i.lock_jid or "" for i in details.locks}


def test_the_ordering_key_is_an_attribute() -> None:
    config = NodeConfig(queue=True, queue_ordered=True)
    assert schedule({"ordering-key": "cust-7"}, config, _now()).ordering_key == "cust-7"
    assert schedule({}, config, _now()).ordering_key is None
    with pytest.raises(AttributeRefused, match="ordering-key"):
        schedule({"ordering-key": " "}, config, _now())


def _now():  # type: ignore[no-untyped-def]
    return FakeClock().now


# --- 1. one item per key in flight ----------------------------------------------------


async def test_the_issue_scenario_one_item_per_key_in_flight(service: PubSubService) -> None:
    """Four items of one customer, two workers with window 2: one at a time, in order."""
    await ordered(service)
    await worker(service, 2, ALICE)
    await worker(service, 2, BOB)
    for n in range(1, 5):
        await pub(service, f"A{n}", "A")
    assert list(await held(service)) == ["A1"]
    out = await service.retract(ALICE, "jobs", "A1")
    assert ids(out.effects) == ["A2"]
    holder = (await held(service))["A2"]
    actor = ALICE if holder == ALICE.jid else BOB
    assert ids((await service.retract(actor, "jobs", "A2")).effects) == ["A3"]


async def test_a_nack_hands_the_same_item_again_before_the_next_of_its_key(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service, queue_ordered="1", queue_retry_delay="5")
    await worker(service, 2, ALICE)
    await worker(service, 2, BOB)
    for n in (1, 2):
        await pub(service, f"A{n}", "A")
    out = await service.unlock(ALICE, "jobs", "A1")
    assert ids(out.effects) == []  # the retry delay holds the key
    assert await held(service) == {}
    clock.advance(5)
    again = await service.tick()
    assert ids(again.effects) == ["A1"]
    holder = ALICE if (await held(service))["A1"] == ALICE.jid else BOB
    assert ids((await service.retract(holder, "jobs", "A1")).effects) == ["A2"]


async def test_a_lock_timeout_keeps_the_key_until_the_item_comes_back(
    service: PubSubService, clock: FakeClock
) -> None:
    await ordered(service, queue_lock_timeout="10")
    await worker(service, 2)
    await pub(service, "A1", "A")
    await pub(service, "A2", "A")
    clock.advance(10)
    out = await service.tick()
    assert ids(out.effects) == ["A1"]  # the same item, attempt 2, not A2
    assert list(await held(service)) == ["A1"]


async def test_dead_lettering_the_head_releases_its_key(service: PubSubService) -> None:
    await ordered(service, queue_max_deliveries="1")
    await worker(service, 2)
    await pub(service, "A1", "A")
    await pub(service, "A2", "A")
    out = await service.unlock(ALICE, "jobs", "A1")  # past its limit: dead-lettered
    assert ids(out.effects) == ["A2"]
    dead = (await service.get_items(OWNER, "jobs/dead-letter")).items
    assert [i.item_id for i in dead] == ["A1"] and dead[0].ordering_key == "A"


async def test_a_publisher_retract_and_a_purge_release_the_key(service: PubSubService) -> None:
    await ordered(service)
    await worker(service, 5)
    for n in (1, 2, 3):
        await pub(service, f"A{n}", "A")
    assert ids((await service.retract(PUB, "jobs", "A1")).effects) == ["A2"]
    await service.purge_node(OWNER, "jobs")
    assert ids((await pub(service, "A4", "A")).effects) == ["A4"]


async def test_an_item_waiting_behind_its_key_expires_on_time(
    service: PubSubService, clock: FakeClock
) -> None:
    await ordered(service)
    await worker(service, 2)
    await pub(service, "A1", "A")
    await pub(service, "A2", "A", TTL="5")
    await pub(service, "A3", "A")
    clock.advance(5)
    await service.tick()
    dead = (await service.get_items(OWNER, "jobs/dead-letter")).items
    assert [i.item_id for i in dead] == ["A2"]
    assert ids((await service.retract(ALICE, "jobs", "A1")).effects) == ["A3"]


async def test_a_head_that_expired_before_its_timer_ran_lets_the_next_member_through(
    service: PubSubService, clock: FakeClock
) -> None:
    """Found by the property machine: a dispatch that met an expired head (its expiry
    timer not run yet) dead-lettered it but went on with the ready items it had read
    before, so the key's next member waited for the next operation on the queue (or
    was passed by a newer item of another key)."""
    await ordered(service)
    await pub(service, "A1", "A", TTL="5")
    await pub(service, "A2", "A")
    await pub(service, "B3", "B")
    clock.advance(6)  # A1 expired; no tick: the timer is late
    out = await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    assert ids(out.effects) == ["A2"]  # publish order: A2 before B3, and at once
    dead = (await service.get_items(OWNER, "jobs/dead-letter")).items
    assert [i.item_id for i in dead] == ["A1"]


# --- 2. no head-of-line blocking ------------------------------------------------------


async def test_a_blocked_key_never_stops_other_keys_or_unkeyed_items(
    service: PubSubService,
) -> None:
    await ordered(service)
    await worker(service, 10)
    batch = [NewItem(f"A{n}", "<j/>", 4, {"ordering-key": "A"}) for n in range(1, 4)]
    batch += [NewItem("B1", "<j/>", 4, {"ordering-key": "B"}), NewItem("u1", "<j/>", 4)]
    batch += [NewItem("u2", "<j/>", 4), NewItem("B2", "<j/>", 4, {"ordering-key": "B"})]
    out = await service.publish_items(PUB, "jobs", batch)
    assert ids(out.effects) == ["A1", "B1", "u1", "u2"]


async def test_a_batched_notification_never_carries_two_items_of_a_key(
    service: PubSubService,
) -> None:
    await ordered(service)
    await service.subscribe(
        ALICE,
        "jobs",
        ALICE.jid,
        {"pubsub#queue_requests": ["10"], "pubsub#queue_max_batch": ["10"]},
    )
    batch = [NewItem(f"{k}{n}", "<j/>", 4, {"ordering-key": k}) for n in (1, 2) for k in "AB"]
    out = await service.publish_items(PUB, "jobs", batch)
    assert ids(out.effects) == ["A1", "B1"]
    acked = await service.retract(ALICE, "jobs", ["A1", "B1"])
    assert sorted(ids(acked.effects)) == ["A2", "B2"]


async def test_a_refused_batch_ack_leaves_the_key_as_it_was(service: PubSubService) -> None:
    await ordered(service)
    await worker(service, 5)
    await pub(service, "A1", "A")
    await pub(service, "A2", "A")
    with pytest.raises(Exception, match="nope"):
        await service.retract(ALICE, "jobs", ["A1", "nope"])
    assert list(await held(service)) == ["A1"]
    assert ids((await service.retract(ALICE, "jobs", "A1")).effects) == ["A2"]


# --- priority and delay within a key --------------------------------------------------


async def test_within_a_key_publish_order_wins_over_urgency(service: PubSubService) -> None:
    await ordered(service)
    await pub(service, "A1", "A", Urgency="low")
    await pub(service, "A2", "A", Urgency="high")
    await pub(service, "B1", "B")
    await worker(service, 5)
    assert list(await held(service)) == ["A1", "B1"]


async def test_a_delayed_head_blocks_its_key(service: PubSubService, clock: FakeClock) -> None:
    await ordered(service)
    await worker(service, 5)
    start = format_datetime(clock.now + timedelta(seconds=30))
    await pub(service, "A1", "A", Start=start)
    assert ids((await pub(service, "A2", "A")).effects) == []
    clock.advance(30)
    assert ids((await service.tick()).effects) == ["A1"]


async def test_an_unordered_queue_ignores_the_key(service: PubSubService) -> None:
    await queue(service)
    await worker(service, 5)
    for n in (1, 2):
        await pub(service, f"A{n}", "A")
    assert sorted(await held(service)) == ["A1", "A2"]


async def test_ordering_changes_only_on_an_empty_queue(service: PubSubService) -> None:
    await queue(service)
    await pub(service, "A1", "A")
    with pytest.raises(InvalidNodeConfig, match="pubsub#queue_ordered"):
        await service.configure_node(OWNER, "jobs", {"pubsub#queue_ordered": ["1"]})
    await service.purge_node(OWNER, "jobs")
    await service.configure_node(OWNER, "jobs", {"pubsub#queue_ordered": ["1"]})
    await worker(service, 5)
    await pub(service, "A2", "A")
    await pub(service, "A3", "A")
    assert list(await held(service)) == ["A2"]


async def test_a_republish_keeps_the_key_and_the_start_of_the_queued_item(
    service: PubSubService, clock: FakeClock
) -> None:
    """What the worker reads (the headers) stays what the queue acts on: a different
    key is refused and stores nothing; a new Start is not shown, as it is not applied."""
    await ordered(service)
    start = format_datetime(clock.now + timedelta(seconds=60))
    await pub(service, "A1", "A", Start=start)
    await pub(service, "A2", "A")
    with pytest.raises(AttributeRefused, match="ordering-key"):
        await pub(service, "A2", "B")
    with pytest.raises(AttributeRefused, match="ordering-key"):
        await pub(service, "A2")
    later = format_datetime(clock.now + timedelta(seconds=90))
    await pub(service, "A1", "A", Start=later, tenant="acme")  # replaced, same place
    items = {i.item_id: i for i in (await service.get_items(OWNER, "jobs")).items}
    assert dict(items["A1"].headers) == {"ordering-key": "A", "Start": start, "tenant": "acme"}
    assert dict(items["A2"].headers) == {"ordering-key": "A"}
    assert items["A2"].ordering_key == "A"


# --- 3. single active consumer --------------------------------------------------------


async def test_only_the_earliest_subscriber_receives(service: PubSubService) -> None:
    await queue(service, queue_single_active="1", queue_retry_delay="5")
    alice = await worker(service, 2, ALICE)
    await worker(service, 2, BOB)
    for n in range(1, 5):
        await pub(service, f"i{n}", None)
    assert await held(service) == {"i1": ALICE.jid, "i2": ALICE.jid}
    details = await service.queue_details(ADMIN, "jobs")
    assert details.active == alice


async def test_the_next_subscriber_takes_over_in_order_when_the_active_leaves(
    service: PubSubService,
) -> None:
    await queue(service, queue_single_active="1", queue_retry_delay="5")
    await worker(service, 2, ALICE)
    bob = await worker(service, 2, BOB)
    for n in range(1, 5):
        await pub(service, f"i{n}", None)
    out = await service.unsubscribe(ALICE, "jobs", ALICE.jid)
    # Released at once (no retry delay): Bob gets i1 and i2 again, before i3.
    assert ids(out.effects) == ["i1", "i2"]
    assert await held(service) == {"i1": BOB.jid, "i2": BOB.jid}
    assert (await service.queue_details(ADMIN, "jobs")).active == bob


async def test_a_departed_active_subscriber_hands_over(service: PubSubService) -> None:
    await queue(service, queue_single_active="1")
    await worker(service, 1, ALICE)
    await worker(service, 1, BOB)
    await pub(service, "i1")
    await pub(service, "i2")
    out = await service.release_subscriber(ALICE.jid, "unavailable")
    assert ids(out.effects) == ["i1"]
    assert await held(service) == {"i1": BOB.jid}


async def test_single_active_with_ordering_keys(service: PubSubService) -> None:
    await queue(service, queue_single_active="1", queue_ordered="1")
    await worker(service, 5, ALICE)
    await worker(service, 5, BOB)
    for n in (1, 2):
        for k in "AB":
            await pub(service, f"{k}{n}", k)
    assert await held(service) == {"A1": ALICE.jid, "B1": ALICE.jid}
    out = await service.kick_subscriber(ADMIN, "jobs", ALICE.jid)
    assert ids(out.effects) == ["A1", "B1"]
    assert set((await held(service)).values()) == {BOB.jid}
