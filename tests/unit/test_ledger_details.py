"""The ledger's details: a published row keeps the publisher's attributes, and an
unlocked, expired, dead-lettered or dropped row says why (docs/queueing.md, "The
event ledger"), so the pipeline's report can show both."""

from __future__ import annotations

import json

from tests.kit import ALICE, BOB, PUB, FakeClock
from tests.unit.test_message_model import queue, worker
from xmpp_queue.core.ledger import EventKind, LedgerEvent, publisher_attributes
from xmpp_queue.core.queue.failures import LAST_ERROR
from xmpp_queue.core.service import PubSubService


async def rows(service: PubSubService, node: str = "jobs") -> list[LedgerEvent]:
    async with service._ctx.store.transaction() as tx:
        return list(await tx.ledger.events(node))


def details(events: list[LedgerEvent], kind: EventKind) -> list[tuple[str, str | None]]:
    return [(e.item_id, e.reason) for e in events if e.kind is kind]


def test_only_the_publisher_s_own_headers_are_kept_and_nothing_is_encoded_without_them() -> None:
    assert publisher_attributes({}) is None
    assert publisher_attributes({"reason": "expired", LAST_ERROR: "E", "origin-node": "q"}) is None
    kept = publisher_attributes({"region": "eu", "Urgency": "high", "reason": "x"})
    assert kept == '{"Urgency":"high","region":"eu"}'  # sorted keys, compact


async def test_a_published_row_carries_the_attributes_and_a_plain_one_none(
    service: PubSubService,
) -> None:
    await queue(service)
    await service.publish(PUB, "jobs", "a", "<j/>", 4, attributes={"region": "eu", "tier": "ü"})
    await service.publish(PUB, "jobs", "b", "<j/>", 4)
    published = {e.item_id: e for e in await rows(service) if e.kind is EventKind.PUBLISHED}
    assert json.loads(published["a"].attributes or "") == {"region": "eu", "tier": "ü"}
    assert published["b"].attributes is None
    assert {e.reason for e in published.values()} == {None}


async def test_failure_reasons_reach_the_unlocked_expired_and_dead_lettered_rows(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service, "dlq")  # a queue as dead-letter node: its rows are in the ledger
    await queue(
        service,
        queue_retry_delay="0",
        queue_max_deliveries="3",
        queue_lock_timeout="10",
        queue_dead_letter="dlq",
    )
    await worker(service, 1)
    await service.publish(PUB, "jobs", "a", "<j/>", 4, attributes={"region": "eu"})
    await service.unlock(ALICE, "jobs", "a", reason="ValueError: bad row 7")
    await service.unlock(ALICE, "jobs", "a")  # a plain nack gives no reason
    clock.advance(11)  # the third delivery times out: past the limit
    await service.tick()
    events = await rows(service)
    assert details(events, EventKind.UNLOCKED) == [("a", "ValueError: bad row 7"), ("a", None)]
    assert details(events, EventKind.EXPIRED) == [("a", "lock timeout")]
    assert details(events, EventKind.DEAD_LETTERED) == [("a", "max-deliveries")]
    assert {e.attributes for e in events if e.kind is not EventKind.PUBLISHED} == {None}
    # The dead letter arriving is a published row of the dead-letter queue: the
    # publisher's attributes, none of the headers the service added on the way.
    (arrived,) = await rows(service, "dlq")
    assert arrived.kind is EventKind.PUBLISHED
    assert json.loads(arrived.attributes or "") == {"region": "eu"}


async def test_a_holder_s_dead_letter_and_a_departure_say_why(service: PubSubService) -> None:
    await queue(service, queue_retry_delay="0")
    await worker(service, 1)
    await worker(service, 1, actor=BOB)
    await service.publish(PUB, "jobs", "a", "<j/>", 4)
    await service.publish(PUB, "jobs", "b", "<j/>", 4)
    holder = {e.item_id: e.subscriber for e in await rows(service) if e.kind.value == "delivered"}
    await service.dead_letter_now(
        ALICE if holder["a"] == ALICE.jid else BOB, "jobs", "a", "schema mismatch"
    )
    gone = ALICE if holder["b"] == ALICE.jid else BOB
    await service.release_subscriber(gone.jid, "unavailable")
    events = await rows(service)
    assert details(events, EventKind.DEAD_LETTERED) == [("a", "schema mismatch")]
    assert ("b", "holder gone (unavailable)") in details(events, EventKind.UNLOCKED)


async def test_dropped_rows_say_expired_or_truncated(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service, max_items="2", queue_overflow="drop-oldest", queue_expire_action="drop")
    await service.publish(PUB, "jobs", "old", "<j/>", 4, attributes={"TTL": "5"})
    await service.publish(PUB, "jobs", "b", "<j/>", 4)
    await service.publish(PUB, "jobs", "c", "<j/>", 4)  # "old" is the oldest: truncated
    await service.publish(PUB, "jobs", "d", "<j/>", 4, attributes={"TTL": "5"})  # drops "b"
    clock.advance(5)
    await service.tick()
    assert details(await rows(service), EventKind.DROPPED) == [
        ("old", "truncated"),
        ("b", "truncated"),
        ("d", "expired"),
    ]


async def test_a_waiting_item_past_its_expiry_is_dead_lettered_with_reason_expired(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service)
    await service.publish(PUB, "jobs", "old", "<j/>", 4, attributes={"TTL": "5"})
    clock.advance(5)
    await service.tick()
    assert details(await rows(service), EventKind.DEAD_LETTERED) == [("old", "expired")]
