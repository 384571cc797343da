"""The message model over the in-memory store, with a fake clock: attributes,
delayed delivery, expiry, priority and the dedup window (docs/queueing.md)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kit import ADMIN, ALICE, BOB, OWNER, PUB, FakeClock, build_service
from xmpp_queue.core.attributes import format_datetime, parse_datetime, schedule
from xmpp_queue.core.effects import ItemNotice
from xmpp_queue.core.errors import (
    AttributeRefused,
    AttributeTooBig,
    DelayTooLong,
    InvalidNodeConfig,
)
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import Affiliation, Item, NewItem, NodeConfig, Urgency, copy_item
from xmpp_queue.core.service import PubSubService


async def queue(service: PubSubService, node: str = "jobs", **config: str) -> str:
    values = {"pubsub#queue": ["1"]} | {f"pubsub#{k}": [v] for k, v in config.items()}
    await service.create_node(OWNER, node, values)
    members = [(a.bare, Affiliation.MEMBER) for a in (ALICE, BOB)]
    await service.set_node_affiliations(OWNER, node, [(PUB.bare, Affiliation.PUBLISHER), *members])
    return node


async def worker(service: PubSubService, window: int = 1, actor=ALICE) -> str:  # type: ignore[no-untyped-def]
    out = await service.subscribe(
        actor, "jobs", actor.jid, {"pubsub#queue_requests": [str(window)]}
    )
    return out.value.subid


def delivered(effects: tuple[object, ...]) -> list[tuple[str, dict[str, str]]]:
    return [
        (i.item_id, dict(i.headers)) for e in effects if isinstance(e, ItemNotice) for i in e.items
    ]


def ids(effects: tuple[object, ...]) -> list[str]:
    return [item_id for item_id, _ in delivered(effects)]


async def ledger(service: PubSubService, kind: EventKind) -> list[str]:
    async with service._ctx.store.transaction() as tx:
        return [e.item_id for e in await tx.ledger.events("jobs") if e.kind is kind]


# --- the seam --------------------------------------------------------------------------


def test_copy_item_changes_only_what_it_is_told() -> None:
    at = parse_datetime("2026-01-01T12:00:00Z", "t")
    item = Item("n", "a", 1, "p", "<x/>", at, at, 4, headers={"k": "v"}, priority=2)
    copy = copy_item(item, deliveries=3, locked_by=None)
    assert copy.deliveries == 3 and copy.headers == {"k": "v"} and copy.priority == 2
    assert copy_item(item) == item and copy_item(item) is not item


def test_datetimes_are_xep_0082_with_a_zone() -> None:
    moment = parse_datetime("2026-11-25T08:00:00+01:00", "Start")
    assert format_datetime(moment) == "2026-11-25T07:00:00Z"
    with pytest.raises(AttributeRefused, match="time zone"):
        parse_datetime("2026-11-25T08:00:00", "Start")
    with pytest.raises(AttributeRefused, match="DateTime"):
        parse_datetime("tomorrow", "Start")


def test_schedule_reads_registered_headers_and_node_defaults(clock: FakeClock) -> None:
    now = clock.now
    config = NodeConfig(queue=True, item_expire=60, queue_delay=5)
    plain = schedule({}, config, now)
    assert plain.available_at == now + timedelta(seconds=5)
    assert plain.expires_at == now + timedelta(seconds=60)
    assert plain.priority == Urgency.MEDIUM
    told = schedule(
        {"Start": format_datetime(now + timedelta(seconds=30)), "TTL": "10", "Urgency": "HIGH"},
        config,
        now,
    )
    assert told.available_at == now + timedelta(seconds=30)
    assert told.expires_at == now + timedelta(seconds=10)  # the earliest end wins
    assert told.priority == Urgency.HIGH
    past = schedule({"Start": format_datetime(now - timedelta(hours=1))}, config, now)
    assert past.available_at is None  # already due: an ordinary item
    with pytest.raises(AttributeRefused, match="Urgency"):
        schedule({"Urgency": "urgent"}, config, now)
    with pytest.raises(AttributeRefused, match="TTL"):
        schedule({"TTL": "0"}, config, now)


# --- 1. attributes ---------------------------------------------------------------------


async def test_attributes_reach_the_worker_and_the_items_retrieval(
    service: PubSubService,
) -> None:
    await queue(service)
    await worker(service)
    out = await service.publish(PUB, "jobs", "a", "<j/>", 4, attributes={"region": "eu"})
    assert delivered(out.effects) == [("a", {"region": "eu", "delivery-attempt": "1"})]
    page = await service.get_items(OWNER, "jobs")
    assert dict(page.items[0].headers) == {"region": "eu"}


async def test_attributes_survive_redelivery_and_dead_lettering(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service, queue_max_deliveries="2", queue_retry_delay="0")
    await worker(service)
    await service.publish(PUB, "jobs", "a", "<j/>", 4, attributes={"k": "v"})
    again = await service.unlock(ALICE, "jobs", "a")
    assert delivered(again.effects) == [("a", {"k": "v", "delivery-attempt": "2"})]
    await service.unlock(ALICE, "jobs", "a")
    dead = (await service.get_items(OWNER, "jobs/dead-letter")).items
    assert dead[0].headers["k"] == "v" and dead[0].headers["reason"] == "max-deliveries"


async def test_a_redriven_item_keeps_its_attributes_and_starts_a_new_life(
    service: PubSubService, clock: FakeClock
) -> None:
    """Redrive (docs/queueing.md): attributes and priority come back with the item; the
    dead letter's own headers do not; its Start and TTL belonged to the first life."""
    await queue(service, queue_max_deliveries="1", queue_retry_delay="0")
    await worker(service)
    start = format_datetime(clock.now + timedelta(seconds=5))
    attributes = {"k": "v", "Urgency": "high", "TTL": "20", "Start": start}
    await service.publish(PUB, "jobs", "a", "<j/>", 4, attributes=attributes)
    clock.advance(5)
    await service.tick()
    await service.unlock(ALICE, "jobs", "a")  # past max deliveries: dead-lettered
    clock.advance(60)  # past the first life's TTL
    out = await service.redrive(ADMIN, "jobs/dead-letter")
    assert out.value == 1
    ((item_id, headers),) = delivered(out.effects)
    assert item_id == "a" and headers["delivery-attempt"] == "1"
    assert {k: headers[k] for k in attributes} == attributes
    assert not {"origin-node", "reason", "dead-lettered-at"} & set(headers)
    (back,) = (await service.get_items(OWNER, "jobs")).items
    assert (back.priority, back.expires_at, back.available_at) == (Urgency.HIGH, None, None)


@pytest.mark.parametrize(
    ("attributes", "error", "names"),
    [
        ({"delivery-attempt": "9"}, AttributeRefused, "delivery-attempt"),
        ({"reason": "forged"}, AttributeRefused, "reason"),
        ({f"k{n}": "v" for n in range(4)}, AttributeTooBig, "pubsub#attributes_max"),
        ({"k" * 9: "v"}, AttributeTooBig, "pubsub#attribute_name_max"),
        ({"k": "v" * 9}, AttributeTooBig, "pubsub#attribute_value_max"),
        ({"a": "1234567", "b": "1234567"}, AttributeTooBig, "pubsub#attributes_max_bytes"),
    ],
)
async def test_attributes_past_a_limit_are_refused_naming_it(
    service: PubSubService,
    attributes: dict[str, str],
    error: type[Exception],
    names: str,
) -> None:
    await queue(
        service,
        attributes_max="3",
        attribute_name_max="8",
        attribute_value_max="8",
        attributes_max_bytes="15",
    )
    with pytest.raises(error, match=names):
        await service.publish(PUB, "jobs", "a", "<j/>", 4, attributes=attributes)
    assert (await service.get_items(OWNER, "jobs")).items == ()
    assert await ledger(service, EventKind.PUBLISHED) == []


async def test_a_batch_with_one_bad_attribute_stores_nothing(service: PubSubService) -> None:
    await queue(service)
    batch = [NewItem("a", "<j/>", 4, {"ok": "1"}), NewItem("b", "<j/>", 4, {"SubID": "x"})]
    with pytest.raises(AttributeRefused):
        await service.publish_items(PUB, "jobs", batch)
    assert (await service.get_items(OWNER, "jobs")).items == ()


# --- 3. delayed delivery ---------------------------------------------------------------


async def test_a_delayed_item_waits_for_its_start(service: PubSubService, clock: FakeClock) -> None:
    await queue(service)
    await worker(service, 5)
    start = format_datetime(clock.now + timedelta(seconds=30))
    out = await service.publish(PUB, "jobs", "later", "<j/>", 4, attributes={"Start": start})
    assert ids(out.effects) == []
    assert (await service.publish(PUB, "jobs", "now", "<j/>", 4)).effects
    details = await service.queue_details(ADMIN, "jobs")
    assert details.delayed == 1
    assert await service.next_deadline() == clock.now + timedelta(seconds=30)
    clock.advance(29)
    assert ids((await service.tick()).effects) == []
    clock.advance(1)
    assert ids((await service.tick()).effects) == ["later"]


async def test_a_node_delay_holds_every_item_and_bounds_the_start(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service, queue_delay="10", queue_max_delay="60")
    await worker(service)
    assert ids((await service.publish(PUB, "jobs", "a", "<j/>", 4)).effects) == []
    too_far = format_datetime(clock.now + timedelta(seconds=61))
    with pytest.raises(DelayTooLong, match="pubsub#queue_max_delay"):
        await service.publish(PUB, "jobs", "b", "<j/>", 4, attributes={"Start": too_far})
    clock.advance(10)
    assert ids((await service.tick()).effects) == ["a"]


async def test_a_node_delay_past_the_node_bound_is_refused_at_configuration(
    service: PubSubService,
) -> None:
    """Else every publish without a Start would be refused for a delay the publisher
    never asked for."""
    with pytest.raises(InvalidNodeConfig, match="pubsub#queue_delay"):
        await queue(service, queue_delay="120", queue_max_delay="60")
    await queue(service, queue_delay="60", queue_max_delay="60")
    with pytest.raises(InvalidNodeConfig, match="pubsub#queue_delay"):
        await service.configure_node(OWNER, "jobs", {"pubsub#queue_max_delay": ["30"]})
    assert (await service.publish(PUB, "jobs", "a", "<j/>", 4)).value == "a"


# --- 4. expiry -------------------------------------------------------------------------


async def test_an_expired_waiting_item_is_dead_lettered_never_delivered(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service)
    await service.publish(PUB, "jobs", "old", "<j/>", 4, attributes={"TTL": "5"})
    clock.advance(5)
    await worker(service)  # subscribes after the expiry, before any tick
    assert await service.get_items(OWNER, "jobs/dead-letter")
    dead = (await service.get_items(OWNER, "jobs/dead-letter")).items
    assert [i.item_id for i in dead] == ["old"] and dead[0].headers["reason"] == "expired"
    assert await ledger(service, EventKind.DELIVERED) == []


async def test_the_tick_expires_waiting_items_by_the_index(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service, item_expire="30", queue_expire_action="drop")
    await service.publish(PUB, "jobs", "a", "<j/>", 4)
    assert await service.next_deadline() == clock.now + timedelta(seconds=30)
    clock.advance(30)
    await service.tick()
    assert (await service.get_items(OWNER, "jobs")).items == ()
    assert await ledger(service, EventKind.DROPPED) == ["a"]


async def test_a_locked_item_is_not_expired_under_its_worker(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service)
    await worker(service)
    await service.publish(PUB, "jobs", "a", "<j/>", 4, attributes={"TTL": "5"})
    clock.advance(10)
    await service.tick()
    await service.retract(ALICE, "jobs", "a")  # the ack still lands
    assert await ledger(service, EventKind.ACKED) == ["a"]


# --- 5. priority -----------------------------------------------------------------------


async def test_higher_urgency_first_fifo_within_a_level(service: PubSubService) -> None:
    await queue(service)
    for n, level in (("n1", "medium"), ("n2", "low"), ("n3", "medium"), ("u1", "high")):
        await service.publish(PUB, "jobs", n, "<j/>", 4, attributes={"Urgency": level})
    await worker(service)
    order = []
    for _ in range(4):
        held = (await service.queue_details(ADMIN, "jobs")).locks[0].item_id
        order.append(held)
        await service.retract(ALICE, "jobs", held)
    assert order == ["u1", "n1", "n3", "n2"]


async def test_a_low_item_that_waited_past_the_age_is_not_starved(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service, queue_priority_age="60")
    await service.publish(PUB, "jobs", "low", "<j/>", 4, attributes={"Urgency": "low"})
    clock.advance(61)
    await service.publish(PUB, "jobs", "high", "<j/>", 4, attributes={"Urgency": "high"})
    out = await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    assert ids(out.effects) == ["low"]  # aged to the top, and older than "high"


# --- 6. dedup window -------------------------------------------------------------------


async def test_a_repeat_inside_the_dedup_window_stores_nothing(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service, queue_dedup_window="300")
    await worker(service)
    await service.publish(PUB, "jobs", "x", "<j>1</j>", 8)
    await service.retract(ALICE, "jobs", "x")
    again = await service.publish(PUB, "jobs", "x", "<j>2</j>", 8)
    assert again.value == "x" and ids(again.effects) == []
    assert await ledger(service, EventKind.DEDUPLICATED) == ["x"]
    clock.advance(301)
    assert ids((await service.publish(PUB, "jobs", "x", "<j>3</j>", 8)).effects) == ["x"]


async def test_dedup_keeps_a_queued_item_as_it_is(service: PubSubService) -> None:
    await queue(service, queue_dedup_window="60")
    await service.publish(PUB, "jobs", "x", "<j>1</j>", 8)
    await service.publish(PUB, "jobs", "x", "<j>2</j>", 8)
    (item,) = (await service.get_items(OWNER, "jobs")).items
    assert item.payload == "<j>1</j>"


async def test_without_a_window_a_finished_id_is_new_work(service: PubSubService) -> None:
    await queue(service)
    await worker(service)
    await service.publish(PUB, "jobs", "x", "<j/>", 4)
    await service.retract(ALICE, "jobs", "x")
    assert ids((await service.publish(PUB, "jobs", "x", "<j/>", 4)).effects) == ["x"]


async def test_an_ack_and_a_repeat_in_one_batch_are_deduplicated(
    service: PubSubService,
) -> None:
    import asyncio

    await queue(service, queue_dedup_window="60")
    await worker(service)
    await service.publish(PUB, "jobs", "x", "<j/>", 4)
    _, repeat = await asyncio.gather(
        service.retract(ALICE, "jobs", "x"), service.publish(PUB, "jobs", "x", "<j/>", 4)
    )
    assert ids(repeat.effects) == []
    assert await ledger(service, EventKind.DEDUPLICATED) == ["x"]


# --- properties of the dispatch order (Hypothesis) --------------------------------------

LEVELS = {"low": 0, "medium": 1, "high": 2}


@settings(max_examples=150, deadline=None)
@given(
    plan=st.lists(
        st.tuples(st.sampled_from(["low", "medium", "high", None]), st.integers(0, 50)),
        min_size=1,
        max_size=12,
    ),
    age=st.sampled_from([0, 30]),
    window=st.integers(1, 3),
)
def test_dispatch_takes_the_most_urgent_then_the_oldest(
    plan: list[tuple[str | None, int]], age: int, window: int
) -> None:
    """Items published over time with random urgencies, then drained by one worker:
    every hand-out is the first ready item by (urgency, aged to the top after
    ``queue_priority_age``, then publish order); nothing is lost or doubled."""
    asyncio.run(_drain(plan, age, window))


async def _drain(plan: list[tuple[str | None, int]], age: int, window: int) -> None:
    from xmpp_queue.storage.store import StateStore

    clock = FakeClock()
    service = build_service(StateStore.in_memory(), clock)
    await service.start()
    await queue(service, queue_priority_age=str(age))
    published = {}
    for n, (urgency, wait) in enumerate(plan):
        clock.advance(wait)
        attributes = {"Urgency": urgency} if urgency else {}
        await service.publish(PUB, "jobs", f"i{n}", "<j/>", 4, attributes=attributes)
        published[f"i{n}"] = (LEVELS[urgency or "medium"], clock.now, n)
    out = await service.subscribe(
        ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": [str(window)]}
    )
    handed = ids(out.effects)
    waiting = [i for i in published if i not in handed]
    order = list(handed)

    def expected_first(candidates: list[str], count: int) -> list[str]:
        top = max(published[i][0] for i in candidates)

        def rank(i: str) -> tuple[int, int]:
            level, at, seq = published[i]
            aged = age and (clock.now - at).total_seconds() >= age
            return (-(top if aged else level), seq)

        return sorted(candidates, key=rank)[:count]

    assert sorted(handed, key=lambda i: published[i][2]) == sorted(
        expected_first(list(published), len(handed)), key=lambda i: published[i][2]
    )
    while order:
        done = order.pop(0)
        clock.advance(1)
        nxt = ids((await service.retract(ALICE, "jobs", done)).effects)
        if waiting:
            assert nxt == expected_first(waiting, 1), (nxt, waiting)
            waiting.remove(nxt[0])
            order += nxt
    assert waiting == []
    await service.stop()


# --- 4b. truncation (max_items / max_bytes, refuse or drop the oldest) -----------------


async def test_a_full_queue_refuses_by_default_also_by_bytes(service: PubSubService) -> None:
    from xmpp_queue.core.errors import NodeFull

    await queue(service, max_bytes="10")
    await service.publish(PUB, "jobs", "a", "<j>1</j>", 8)
    with pytest.raises(NodeFull, match="pubsub#max_bytes"):
        await service.publish(PUB, "jobs", "b", "<j>2</j>", 8)
    assert [i.item_id for i in (await service.get_items(OWNER, "jobs")).items] == ["a"]


async def test_drop_oldest_makes_room_and_tells_every_subscriber(
    service: PubSubService,
) -> None:
    from xmpp_queue.core.effects import TruncateNotice

    await queue(service, max_items="3", queue_overflow="drop-oldest")
    await worker(service, 1)  # holds "a": never dropped
    for item_id in ("a", "b", "c"):
        await service.publish(PUB, "jobs", item_id, "<j/>", 4)
    out = await service.publish(PUB, "jobs", "d", "<j/>", 4)
    left = [i.item_id for i in (await service.get_items(OWNER, "jobs")).items]
    assert left == ["a", "c", "d"]  # b was the oldest waiting one
    assert [e for e in out.effects if isinstance(e, TruncateNotice)] == [
        TruncateNotice(ALICE.jid, "jobs", 1, 4)
    ]
    assert await ledger(service, EventKind.DROPPED) == ["b"]


async def test_drop_oldest_by_bytes_drops_as_many_as_needed(service: PubSubService) -> None:
    await queue(service, max_bytes="20", queue_overflow="drop-oldest")
    for item_id in ("a", "b"):
        await service.publish(PUB, "jobs", item_id, "<j>12</j>", 9)
    await service.publish(PUB, "jobs", "big", "<j>" + "x" * 11 + "</j>", 18)
    assert [i.item_id for i in (await service.get_items(OWNER, "jobs")).items] == ["big"]
    assert await ledger(service, EventKind.DROPPED) == ["a", "b"]


async def test_drop_oldest_never_drops_what_a_worker_holds(service: PubSubService) -> None:
    from xmpp_queue.core.errors import NodeFull

    await queue(service, max_items="1", queue_overflow="drop-oldest")
    await worker(service, 1)
    await service.publish(PUB, "jobs", "held", "<j/>", 4)
    with pytest.raises(NodeFull, match="being worked on"):
        await service.publish(PUB, "jobs", "new", "<j/>", 4)
    assert await ledger(service, EventKind.DROPPED) == []


async def test_a_leaf_keeps_its_newest_items_within_max_bytes(service: PubSubService) -> None:
    await service.create_node(OWNER, "news", {"pubsub#max_bytes": ["10"]})
    for item_id in ("a", "b", "c"):
        await service.publish(OWNER, "news", item_id, "<p>1</p>", 4)
    assert [i.item_id for i in (await service.get_items(OWNER, "news")).items] == ["b", "c"]
