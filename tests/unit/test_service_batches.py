"""Several items per message and per request (issue 14), over the in-memory store.

Names carry the section they check: XEP-0060 §7.1.2.1 (an items event may hold
several items), §13.11 (a retract may name several items: all or none),
XEP-0254 §2.2-§2.4 and §4 (each item still locked, acked, unlocked and expired
on its own), and this project's ``pubsub#queue_max_batch`` option and batch
``<unlock/>``.
"""

from __future__ import annotations

import pytest

from tests.kit import ADMIN, ALICE, BOB, OWNER, PUB, FakeClock
from tests.unit.test_service_queue import queue
from xmpp_queue.core.effects import ItemNotice, RetractNotice, UnlockNotice
from xmpp_queue.core.errors import (
    BadRequest,
    Forbidden,
    InvalidOptions,
    ItemLockedByOther,
    ItemNotFound,
    ItemRequired,
    NodeFull,
)
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import Actor, NewItem
from xmpp_queue.core.service import PubSubService
from xmpp_queue.core.subscribe_options import MAX_BATCH_ITEMS


async def batch_worker(service: PubSubService, actor: Actor, window: int, max_batch: int) -> str:
    options = {
        "pubsub#queue_requests": [str(window)],
        "pubsub#queue_max_batch": [str(max_batch)],
    }
    return (await service.subscribe(actor, "jobs", actor.jid, options)).value.subid


def item_notices(effects: tuple[object, ...]) -> list[tuple[str, list[str]]]:
    return [(e.to, [i.item_id for i in e.items]) for e in effects if isinstance(e, ItemNotice)]


async def backlog(service: PubSubService, count: int) -> None:
    for i in range(count):
        await service.publish(PUB, "jobs", f"i{i}", f"<j>{i}</j>", 8)


async def ledger(service: PubSubService, kind: EventKind) -> list[str]:
    async with service.store.transaction() as tx:
        return [e.item_id for e in await tx.ledger.events("jobs") if e.kind is kind]


async def locked_to(service: PubSubService) -> dict[str, str]:
    details = await service.queue_details(ADMIN, "jobs")
    return {lock.item_id: lock.locked_by or "" for lock in details.locks}


# --- several items per notification ---------------------------------------------------


async def test_max_batch_default_is_one_item_per_message(service: PubSubService) -> None:
    """A plain XEP-0254 subscriber (no option) sees exactly one item per message."""
    await queue(service)
    await backlog(service, 5)
    out = await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["4"]})
    assert item_notices(out.effects) == [(ALICE.jid, [f"i{i}"]) for i in range(4)]


async def test_7_1_2_1_several_items_per_notification_each_locked_on_its_own(
    service: PubSubService,
) -> None:
    await queue(service)
    await backlog(service, 10)
    options = {"pubsub#queue_requests": ["8"], "pubsub#queue_max_batch": ["3"]}
    out = await service.subscribe(ALICE, "jobs", ALICE.jid, options)
    assert item_notices(out.effects) == [
        (ALICE.jid, ["i0", "i1", "i2"]),
        (ALICE.jid, ["i3", "i4", "i5"]),
        (ALICE.jid, ["i6", "i7"]),
    ]
    first = next(e for e in out.effects if isinstance(e, ItemNotice))
    assert [i.headers["delivery-attempt"] for i in first.items] == ["1", "1", "1"]
    assert [i.payload for i in first.items] == ["<j>0</j>", "<j>1</j>", "<j>2</j>"]
    assert first.subids == (out.value.subid,)
    locks = await locked_to(service)
    assert sorted(locks) == sorted(f"i{i}" for i in range(8))
    assert set(locks.values()) == {out.value.subid}
    assert len(await ledger(service, EventKind.DELIVERED)) == 8


async def test_2_2_and_4_batches_keep_the_dispatch_rules_across_workers(
    service: PubSubService, clock: FakeClock
) -> None:
    """One dispatch for two workers (their locks expired together): fewest in flight
    and "not to the previous holder" still decide each item; each worker then gets
    its items in one message."""
    await queue(service, lock_timeout="5", retry_delay="0")  # XEP-0254's immediate hand-over
    alice = await batch_worker(service, ALICE, 4, 4)
    await batch_worker(service, BOB, 4, 4)
    await backlog(service, 8)  # one publish, one item, one message: alternating
    before = await locked_to(service)
    clock.advance(6)
    out = await service.tick()
    sent = item_notices(out.effects)
    assert sorted(to for to, _ in sent) == [ALICE.jid, BOB.jid]
    assert all(len(ids) == 4 for _, ids in sent)
    after = await locked_to(service)
    assert all(after[i] != before[i] for i in after)  # each went to the other worker
    assert sum(1 for s in after.values() if s == alice) == 4


async def test_max_batch_must_be_a_positive_integer_within_bounds(service: PubSubService) -> None:
    await queue(service)
    for bad in ("0", "-1", "x", str(MAX_BATCH_ITEMS + 1)):
        with pytest.raises(InvalidOptions):
            await service.subscribe(
                ALICE,
                "jobs",
                ALICE.jid,
                {"pubsub#queue_requests": ["2"], "pubsub#queue_max_batch": [bad]},
            )
    assert await service.own_subscriptions(ALICE) == []


async def test_max_batch_applies_at_once_when_changed(service: PubSubService) -> None:
    await queue(service)
    out = await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    await backlog(service, 6)
    raised = await service.set_subscription_options(
        ALICE,
        "jobs",
        ALICE.jid,
        out.value.subid,
        {"pubsub#queue_requests": ["6"], "pubsub#queue_max_batch": ["5"]},
    )
    assert item_notices(raised.effects) == [(ALICE.jid, ["i1", "i2", "i3", "i4", "i5"])]


# --- several acks per retract (XEP-0060 §13.11) -------------------------------------


async def test_13_11_retract_of_several_items_acks_them_all_with_one_notice(
    service: PubSubService,
) -> None:
    await queue(service)
    sub = await batch_worker(service, ALICE, 4, 4)
    await backlog(service, 6)
    out = await service.retract(ALICE, "jobs", ["i0", "i1", "i2"])
    retracts = [e for e in out.effects if isinstance(e, RetractNotice)]
    assert retracts == [RetractNotice(ALICE.jid, "jobs", ("i0", "i1", "i2"), (sub,), True)]
    # the freed slots are refilled in one message
    assert item_notices(out.effects) == [(ALICE.jid, ["i4", "i5"])]
    assert sorted(await locked_to(service)) == ["i3", "i4", "i5"]
    assert await ledger(service, EventKind.ACKED) == ["i0", "i1", "i2"]


async def test_13_11_merged_retract_notice_keeps_the_nodes_notification_type(
    service: PubSubService,
) -> None:
    """The one merged notice is a normal message on a ``normal`` node, as each
    retract notice was before merging (the merge used to reset it to headline)."""
    await service.create_node(
        OWNER, "news", {"pubsub#notification_type": ["normal"], "pubsub#notify_retract": ["1"]}
    )
    await service.subscribe(OWNER, "news", OWNER.jid)
    for i in range(2):
        await service.publish(OWNER, "news", f"n{i}", "<n/>", 4)
    out = await service.retract(OWNER, "news", ["n0", "n1"])
    (notice,) = [e for e in out.effects if isinstance(e, RetractNotice)]
    assert notice.item_ids == ("n0", "n1") and notice.headline is False


async def test_13_11_retract_batch_is_all_or_none_with_the_first_failure(
    service: PubSubService,
) -> None:
    await queue(service)
    alice = await batch_worker(service, ALICE, 2, 2)
    await batch_worker(service, BOB, 2, 2)
    await backlog(service, 4)
    locks = await locked_to(service)
    mine = sorted(i for i, s in locks.items() if s == alice)
    theirs = sorted(i for i, s in locks.items() if s != alice)
    with pytest.raises(ItemNotFound):
        await service.retract(ALICE, "jobs", [mine[0], "nope", theirs[0]])
    with pytest.raises(ItemLockedByOther):
        await service.retract(ALICE, "jobs", [mine[0], theirs[0], "nope"])
    assert await locked_to(service) == locks
    assert await ledger(service, EventKind.ACKED) == []
    await service.retract(ALICE, "jobs", mine)
    assert sorted(await locked_to(service)) == theirs
    assert await ledger(service, EventKind.ACKED) == mine


async def test_13_11_a_repeated_id_in_one_batch_fails_it(service: PubSubService) -> None:
    await queue(service)
    await batch_worker(service, ALICE, 2, 2)
    await backlog(service, 2)
    with pytest.raises(ItemNotFound):
        await service.retract(ALICE, "jobs", ["i0", "i1", "i0"])
    assert sorted(await locked_to(service)) == ["i0", "i1"]


async def test_13_11_batch_bounds(service: PubSubService) -> None:
    await queue(service)
    with pytest.raises(ItemRequired):
        await service.retract(ALICE, "jobs", [])
    with pytest.raises(BadRequest):
        await service.retract(ALICE, "jobs", [f"i{i}" for i in range(MAX_BATCH_ITEMS + 1)])


async def test_13_11_leaf_retract_of_several_items_is_all_or_none(
    service: PubSubService,
) -> None:
    await service.create_node(OWNER, "news")
    for i in range(3):
        await service.publish(OWNER, "news", f"n{i}", "<e/>", 4)
    sub = (await service.subscribe(BOB, "news", BOB.jid)).value.subid
    with pytest.raises(ItemNotFound):
        await service.retract(OWNER, "news", ["n0", "gone"])
    assert len((await service.get_items(OWNER, "news")).items) == 3
    with pytest.raises(Forbidden):
        await service.retract(BOB, "news", ["n0"])
    out = await service.retract(OWNER, "news", ["n0", "n1"], notify=True)
    assert list(out.effects) == [RetractNotice(BOB.jid, "news", ("n0", "n1"), (sub,))]
    assert [i.item_id for i in (await service.get_items(OWNER, "news")).items] == ["n2"]


# --- several nacks per unlock (our namespace) ----------------------------------------


async def test_batch_unlock_gives_every_item_back_or_none(service: PubSubService) -> None:
    await queue(service)
    await batch_worker(service, ALICE, 3, 3)
    await backlog(service, 3)
    with pytest.raises(Forbidden):
        await service.unlock(BOB, "jobs", ["i0"])  # not a subscriber (the documented error order)
    with pytest.raises(ItemNotFound):
        await service.unlock(ALICE, "jobs", ["i0", "i1", "missing"])
    assert sorted(await locked_to(service)) == ["i0", "i1", "i2"]
    assert await ledger(service, EventKind.UNLOCKED) == []
    out = await service.unlock(ALICE, "jobs", ["i0", "i1"], delay=60)
    unlocks = [e for e in out.effects if isinstance(e, UnlockNotice)]
    assert [(u.item_id, u.reason) for u in unlocks] == [("i0", "unlocked"), ("i1", "unlocked")]
    assert sorted(await locked_to(service)) == ["i2"]
    assert await ledger(service, EventKind.UNLOCKED) == ["i0", "i1"]


# --- several items per publish (XEP-0060 §13.11) ---------------------------------------


async def test_13_11_batch_publish_is_one_operation_all_or_none(service: PubSubService) -> None:
    await queue(service)
    await service.configure_node(OWNER, "jobs", {"pubsub#max_items": ["3"]})
    sub = await batch_worker(service, ALICE, 8, 8)
    four = [NewItem(f"p{i}", "<j/>", 4) for i in range(4)]
    with pytest.raises(NodeFull):  # the fourth does not fit: none is stored
        await service.publish_items(PUB, "jobs", four)
    assert await locked_to(service) == {}
    assert await ledger(service, EventKind.PUBLISHED) == []
    out = await service.publish_items(
        PUB, "jobs", [NewItem("p0", "<j/>", 4), NewItem(None, "<j/>", 4)]
    )
    assert out.value[0] == "p0" and out.value[1]
    assert item_notices(out.effects) == [(ALICE.jid, out.value)]
    assert set((await locked_to(service)).values()) == {sub}
    with pytest.raises(ItemRequired):
        await service.publish_items(PUB, "jobs", [])
