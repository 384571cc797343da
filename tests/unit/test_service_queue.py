"""XEP-0254 queueing over the in-memory store, with a fake clock (no sleeping).

Test names carry the spec section (XEP-0254 §) or docs/queueing.md's choice they check.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from tests.kit import ADMIN, ALICE, BOB, CAROL, EVE, OWNER, PUB, FakeClock
from xmpp_queue.core.effects import ItemNotice, RetractNotice, UnlockNotice
from xmpp_queue.core.errors import (
    Forbidden,
    InvalidOptions,
    ItemLockedByOther,
    ItemNotFound,
    NotAQueue,
    NotLockHolder,
    QueueConfigurationRequired,
)
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import Actor, Affiliation
from xmpp_queue.core.service import PubSubService


async def queue(service: PubSubService, node: str = "jobs", **config: str) -> str:
    values = {"pubsub#queue": ["1"]} | {f"pubsub#queue_{k}": [v] for k, v in config.items()}
    await service.create_node(OWNER, node, values)
    # A new queue is whitelisted: its owner names the publisher and the workers.
    workers = [(a.bare, Affiliation.MEMBER) for a in (ALICE, BOB, CAROL)]
    await service.set_node_affiliations(OWNER, node, [(PUB.bare, Affiliation.PUBLISHER), *workers])
    return node


async def worker(service: PubSubService, actor: Actor, n: int, node: str = "jobs") -> str:
    out = await service.subscribe(actor, node, actor.jid, {"pubsub#queue_requests": [str(n)]})
    return out.value.subid


def notices(effects: tuple[object, ...]) -> list[tuple[str, str]]:
    return [(e.to, e.items[0].item_id) for e in effects if isinstance(e, ItemNotice)]


async def test_2_1_subscribe_without_options_requires_configuration(
    service: PubSubService,
) -> None:
    await queue(service)
    with pytest.raises(QueueConfigurationRequired) as err:
        await service.subscribe(ALICE, "jobs", ALICE.bare)
    assert err.value.fields == ("pubsub#queue_requests",)
    with pytest.raises(InvalidOptions):
        await service.subscribe(ALICE, "jobs", ALICE.bare, {"pubsub#queue_requests": ["0"]})
    assert await service.own_subscriptions(ALICE) == []
    sub = (
        await service.subscribe(ALICE, "jobs", ALICE.bare, {"pubsub#queue_requests": ["5"]})
    ).value
    assert sub.queue_requests == 5


async def test_2_2_each_item_goes_to_one_subscriber_with_payload(
    service: PubSubService,
) -> None:
    await queue(service)
    await worker(service, ALICE, 1)
    await worker(service, BOB, 1)
    out = await service.publish(PUB, "jobs", "i1", "<job>1</job>", 12)
    (notice,) = out.effects
    assert isinstance(notice, ItemNotice) and notice.items[0].payload == "<job>1</job>"
    out2 = await service.publish(PUB, "jobs", "i2", "<job>2</job>", 12)
    assert {notice.to, notices(out2.effects)[0][0]} == {ALICE.jid, BOB.jid}


async def test_2_2_fifo_backlog_never_exceeds_queue_requests(service: PubSubService) -> None:
    await queue(service)
    await worker(service, ALICE, 2)
    sent = []
    for i in range(5):
        sent += notices((await service.publish(PUB, "jobs", f"i{i}", "<j/>", 4)).effects)
    assert sent == [(ALICE.jid, "i0"), (ALICE.jid, "i1")]
    ack = await service.retract(ALICE, "jobs", "i0")
    assert notices(ack.effects) == [(ALICE.jid, "i2")]


async def test_2_2_new_subscriber_and_raised_window_drain_the_backlog(
    service: PubSubService,
) -> None:
    await queue(service)
    for i in range(4):
        await service.publish(PUB, "jobs", f"i{i}", "<j/>", 4)
    out = await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    assert notices(out.effects) == [(ALICE.jid, "i0")]
    raised = await service.set_subscription_options(
        ALICE, "jobs", ALICE.jid, None, {"pubsub#queue_requests": ["3"]}
    )
    assert notices(raised.effects) == [(ALICE.jid, "i1"), (ALICE.jid, "i2")]


async def test_2_3_retract_by_holder_is_the_ack_and_notifies_only_the_holder(
    service: PubSubService,
) -> None:
    await queue(service)
    sub = await worker(service, ALICE, 1)
    await worker(service, BOB, 1)
    await service.publish(PUB, "jobs", "i1", "<j/>", 4)
    holder = (
        ALICE if (await service.queue_details(ADMIN, "jobs")).locks[0].locked_by == sub else BOB
    )
    out = await service.retract(holder, "jobs", "i1")
    assert out.effects == (RetractNotice(holder.jid, "jobs", ("i1",), out.effects[0].subids),)  # type: ignore[union-attr]
    with pytest.raises(ItemNotFound):
        await service.retract(holder, "jobs", "i1")


async def test_2_3_error_flows_in_design_order(service: PubSubService) -> None:
    await queue(service, retry_delay="0")  # XEP-0254's immediate hand-over
    await worker(service, ALICE, 1)
    await service.publish(PUB, "jobs", "i1", "<j/>", 4)  # locked to alice
    await worker(service, BOB, 1)
    with pytest.raises(ItemNotFound):
        await service.retract(BOB, "jobs", "nope")
    with pytest.raises(Forbidden):
        await service.retract(EVE, "jobs", "i1")
    with pytest.raises(ItemLockedByOther):
        await service.retract(BOB, "jobs", "i1")
    await service.publish(PUB, "jobs", "i2", "<j/>", 4)  # goes to bob
    await service.unlock(BOB, "jobs", "i2")  # only bob has room again: i2 back to bob
    await service.retract(ALICE, "jobs", "i1")  # alice acks; i2 is bob's
    with pytest.raises(ItemLockedByOther):
        await service.unlock(ALICE, "jobs", "i2")
    await service.unlock(BOB, "jobs", "i2")  # now alice (free) gets it
    with pytest.raises(ItemLockedByOther):
        await service.unlock(BOB, "jobs", "i2")
    await service.publish(PUB, "jobs", "i3", "<j/>", 4)  # bob gets it
    await service.publish(PUB, "jobs", "i4", "<j/>", 4)  # nobody has room: it waits
    with pytest.raises(NotLockHolder):
        await service.unlock(BOB, "jobs", "i4")
    with pytest.raises(NotLockHolder):
        await service.retract(ALICE, "jobs", "i4")


async def test_2_4_unlock_hands_the_item_to_another_subscriber(
    service: PubSubService,
) -> None:
    await queue(service, retry_delay="0")  # XEP-0254's immediate hand-over
    await worker(service, ALICE, 1)
    await service.publish(PUB, "jobs", "i1", "<j/>", 4)
    await worker(service, BOB, 1)
    out = await service.unlock(ALICE, "jobs", "i1")
    assert out.effects[0] == UnlockNotice(ALICE.jid, "jobs", "i1", "unlocked")
    assert notices(out.effects) == [(BOB.jid, "i1")]


async def test_unlock_on_a_plain_node_is_refused(service: PubSubService) -> None:
    await service.create_node(OWNER, "plain")
    with pytest.raises(NotAQueue):
        await service.unlock(OWNER, "plain", "x")


async def test_4_lock_timeout_unlocks_notifies_and_redelivers(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service, lock_timeout="30", retry_delay="0")
    await worker(service, ALICE, 1)
    await service.publish(PUB, "jobs", "i1", "<j/>", 4)
    await worker(service, BOB, 1)
    assert (await service.next_deadline()) == clock.now.replace() + __import__(
        "datetime"
    ).timedelta(seconds=30)
    clock.advance(29)
    assert (await service.tick()).value == 0
    clock.advance(2)
    out = await service.tick()
    assert out.value == 1
    assert out.effects[0] == UnlockNotice(ALICE.jid, "jobs", "i1", "timeout")
    assert notices(out.effects) == [(BOB.jid, "i1")]
    with pytest.raises(ItemLockedByOther):
        await service.retract(ALICE, "jobs", "i1")  # the stale ack loses cleanly


async def test_lock_extension_pushes_the_deadline(service: PubSubService, clock: FakeClock) -> None:
    await queue(service, lock_timeout="30")
    await worker(service, ALICE, 1)
    await service.publish(PUB, "jobs", "i1", "<j/>", 4)
    clock.advance(20)
    deadline = (await service.extend_lock(ALICE, "jobs", "i1", 60)).value
    clock.advance(30)
    assert (await service.tick()).value == 0
    assert (await service.next_deadline()) == deadline
    with pytest.raises(Forbidden):
        await service.extend_lock(EVE, "jobs", "i1")


async def test_4_unavailable_subscriber_gives_its_items_back_and_is_unsubscribed(
    service: PubSubService,
) -> None:
    await queue(service, retry_delay="0")
    await worker(service, ALICE, 3)
    for i in range(3):
        await service.publish(PUB, "jobs", f"i{i}", "<j/>", 4)
    await worker(service, BOB, 5)
    out = await service.release_subscriber(ALICE.jid, "unavailable")
    assert out.value == 3
    assert sorted(item for _, item in notices(out.effects)) == ["i0", "i1", "i2"]
    assert not any(isinstance(e, UnlockNotice) for e in out.effects)  # it is gone
    assert await service.own_subscriptions(ALICE) == []


async def test_max_deliveries_moves_the_item_to_a_dead_letter_node(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service, max_deliveries="2", lock_timeout="10", retry_delay="0")
    await worker(service, ALICE, 1)
    await service.publish(PUB, "jobs", "poison", "<j/>", 4)
    await service.unlock(ALICE, "jobs", "poison")  # delivery 2 follows at once
    clock.advance(11)
    await service.tick()  # second failure: dead-lettered
    dead = await service.get_items(OWNER, "jobs/dead-letter")
    (item,) = dead.items
    assert item.item_id == "poison" and item.headers["origin-node"] == "jobs"
    assert item.headers["deliveries"] == "2"
    assert (await service.get_items(OWNER, "jobs")).items == ()
    moved = await service.redrive(ADMIN, "jobs/dead-letter")
    assert moved.value == 1 and notices(moved.effects) == [(ALICE.jid, "poison")]


async def test_retry_delay_keeps_an_unlocked_item_back(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service, retry_delay="5")
    await worker(service, ALICE, 1)
    await service.publish(PUB, "jobs", "i1", "<j/>", 4)
    out = await service.unlock(ALICE, "jobs", "i1")
    assert notices(out.effects) == []
    assert await service.next_deadline() == clock.now + __import__("datetime").timedelta(seconds=5)
    clock.advance(5)
    assert notices((await service.tick()).effects) == [(ALICE.jid, "i1")]


async def test_publisher_retract_of_a_locked_item_tells_the_holder(
    service: PubSubService,
) -> None:
    await queue(service)
    await worker(service, ALICE, 1)
    await service.publish(PUB, "jobs", "i1", "<j/>", 4)
    out = await service.retract(PUB, "jobs", "i1")
    assert [(type(e), e.to) for e in out.effects] == [(RetractNotice, ALICE.jid)]  # type: ignore[union-attr]


async def test_purge_releases_locks_and_tells_holders(service: PubSubService) -> None:
    await queue(service)
    await worker(service, ALICE, 2)
    await service.publish(PUB, "jobs", "i1", "<j/>", 4)
    out = await service.purge_node(OWNER, "jobs")
    assert UnlockNotice(ALICE.jid, "jobs", "i1", "purged") in out.effects
    assert (await service.status(ADMIN)).locks == 0


async def test_republishing_a_queued_id_does_not_double_it(service: PubSubService) -> None:
    await queue(service)
    await service.publish(PUB, "jobs", "row-1", "<a/>", 4)
    await service.publish(PUB, "jobs", "row-1", "<b/>", 4)
    assert [i.payload for i in (await service.get_items(OWNER, "jobs")).items] == ["<b/>"]


async def test_ledger_records_every_state_change(service: PubSubService, clock: FakeClock) -> None:
    await queue(service, lock_timeout="5", retry_delay="0")
    await worker(service, ALICE, 1)
    await service.publish(PUB, "jobs", "i1", "<j/>", 4)
    await service.unlock(ALICE, "jobs", "i1")
    clock.advance(6)
    await service.tick()
    await service.retract(ALICE, "jobs", "i1")
    async with service.store.transaction() as tx:
        kinds = [e.kind for e in await tx.ledger.events("jobs")]
    assert kinds == [
        EventKind.PUBLISHED,
        EventKind.DELIVERED,
        EventKind.UNLOCKED,
        EventKind.DELIVERED,
        EventKind.EXPIRED,
        EventKind.DELIVERED,
        EventKind.ACKED,
    ]


async def test_concurrent_workers_never_exceed_windows_and_ack_each_item_once(
    service: PubSubService,
) -> None:
    """Many operations at once through the batcher: no double delivery, no lost ack."""
    await queue(service)
    workers = {ALICE: 1, BOB: 2, CAROL: 5}
    held: dict[str, set[str]] = {a.jid: set() for a in workers}
    acked: Counter[str] = Counter()
    high_water: Counter[str] = Counter()
    by_jid = {a.jid: a for a in workers}
    pending: list[asyncio.Task[None]] = []

    def route(effects: tuple[object, ...]) -> None:
        for to, item in notices(effects):
            assert item not in set().union(*held.values()), "delivered while locked"
            held[to].add(item)
            high_water[to] = max(high_water[to], len(held[to]))
            pending.append(asyncio.create_task(ack(by_jid[to], item)))

    async def ack(actor: Actor, item: str) -> None:
        await asyncio.sleep(0)
        held[actor.jid].discard(item)
        out = await service.retract(actor, "jobs", item)
        acked[item] += 1
        route(out.effects)

    for actor, n in workers.items():
        route(
            (
                await service.subscribe(
                    actor, "jobs", actor.jid, {"pubsub#queue_requests": [str(n)]}
                )
            ).effects
        )
    publishes = [service.publish(PUB, "jobs", f"i{i}", "<j/>", 4) for i in range(300)]
    for out in await asyncio.gather(*publishes):
        route(out.effects)
    while pending:
        task = pending.pop()
        await task
    assert len(acked) == 300 and set(acked.values()) == {1}
    for actor, n in workers.items():
        assert high_water[actor.jid] <= n
