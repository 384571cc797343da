"""Every operation is all or nothing, enforced by the store's per-operation savepoints.

The three regression cases that used to keep half an operation (or lose an item),
then the general rule: an operation that fails for any reason (a refusal, a bug,
a failed assertion) in the middle of a batch changes nothing, while the other
operations of its batch commit; and a failed commit fails the whole batch.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.kit import ADMIN, ALICE, BOB, OWNER, PUB, FakeClock
from xmpp_queue.core.errors import BadRequest, NodeFull, StorageUnavailable
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import Affiliation, SubscriptionState
from xmpp_queue.core.service import PubSubService
from xmpp_queue.storage.backend_memory import MemoryBackend
from xmpp_queue.storage.store import StateStore


async def _queue(service: PubSubService, node: str = "jobs", **config: str) -> None:
    values = {"pubsub#queue": ["1"]} | {f"pubsub#{k}": [v] for k, v in config.items()}
    await service.create_node(OWNER, node, values)
    # A new queue is whitelisted: its owner names the publisher and the workers.
    await service.set_node_affiliations(
        OWNER,
        node,
        [
            (PUB.bare, Affiliation.PUBLISHER),
            (ALICE.bare, Affiliation.MEMBER),
            (BOB.bare, Affiliation.MEMBER),
        ],
    )


async def _work(service: PubSubService, actor: object, n: int = 1) -> None:
    await service.subscribe(actor, "jobs", actor.jid, {"pubsub#queue_requests": [str(n)]})  # type: ignore[attr-defined]


async def _snapshot(service: PubSubService) -> tuple[object, ...]:
    """Everything an operation could change: nodes, items (with queue state),
    subscriptions, affiliations and ledger rows."""
    async with service.store.transaction() as tx:
        nodes = await tx.nodes.all()
        items = {n.node_id: (await tx.items.page(n.node_id, _all())).items for n in nodes}
        subs = {n.node_id: await tx.subscriptions.for_node(n.node_id) for n in nodes}
        affs = {n.node_id: await tx.affiliations.for_node(n.node_id) for n in nodes}
        ledger = await tx.ledger.events()
    return nodes, items, subs, affs, ledger


def _all():  # type: ignore[no-untyped-def]
    from xmpp_queue.core.model import PageRequest

    return PageRequest()


# --- the three regression cases ------------------------------------------------------------


async def test_a_refused_set_node_subscriptions_keeps_every_subscription(
    service: PubSubService,
) -> None:
    """[(a, none), (b, subscribed)] on a queue: bad-request, and a is still subscribed."""
    await _queue(service)
    await _work(service, ALICE)
    before = await _snapshot(service)
    with pytest.raises(BadRequest):
        await service.set_node_subscriptions(
            OWNER,
            "jobs",
            [
                (ALICE.jid, SubscriptionState.NONE, None),
                (BOB.jid, SubscriptionState.SUBSCRIBED, None),
            ],
        )
    assert await _snapshot(service) == before
    assert [s.jid for s in await service.get_node_subscriptions(OWNER, "jobs")] == [ALICE.jid]


async def _dead_letter_one(service: PubSubService, clock: FakeClock) -> None:
    """Publish i1 to a queue with max deliveries 1 and let its one lock expire."""
    await _queue(service, queue_max_deliveries="1", queue_lock_timeout="10", max_items="1")
    await _work(service, ALICE)
    await service.publish(PUB, "jobs", "i1", "<job/>", 6)
    clock.advance(11)
    await service.tick()


async def test_a_redrive_into_a_full_queue_is_refused_and_keeps_the_dead_letter(
    service: PubSubService, clock: FakeClock
) -> None:
    await _dead_letter_one(service, clock)
    await service.publish(PUB, "jobs", "i2", "<job/>", 6)  # the queue is full again (max 1)
    before = await _snapshot(service)
    with pytest.raises(NodeFull):
        await service.redrive(ADMIN, "jobs/dead-letter")
    assert await _snapshot(service) == before
    page = await service.get_items(OWNER, "jobs/dead-letter")
    assert [i.item_id for i in page.items] == ["i1"]


async def test_a_redrive_stops_at_the_first_item_that_does_not_fit(
    service: PubSubService, clock: FakeClock
) -> None:
    await _queue(service, queue_max_deliveries="1", queue_lock_timeout="10", max_items="2")
    await _work(service, ALICE, 3)
    for n in range(3):
        await service.publish(PUB, "jobs", f"d{n}", "<job/>", 6)
        if n == 1:  # two are locked, the queue is full: expire them into the dead letters
            clock.advance(11)
            await service.tick()
    clock.advance(11)
    await service.tick()
    dead = [i.item_id for i in (await service.get_items(OWNER, "jobs/dead-letter")).items]
    assert dead == ["d0", "d1", "d2"]
    await service.unsubscribe(ALICE, "jobs", ALICE.jid)
    await service.publish(PUB, "jobs", "x", "<job/>", 6)  # one free slot left
    moved = await service.redrive(ADMIN, "jobs/dead-letter")
    assert moved.value == 1
    left = [i.item_id for i in (await service.get_items(OWNER, "jobs/dead-letter")).items]
    assert left == ["d1", "d2"]


async def test_a_redrive_past_max_bytes_is_refused_and_keeps_the_dead_letter(
    service: PubSubService, clock: FakeClock
) -> None:
    """A redrive answers to the queue's byte bound as a publish does, and drops nothing."""
    await _queue(service, queue_max_deliveries="1", queue_lock_timeout="10", max_bytes="10")
    await _work(service, ALICE)
    await service.publish(PUB, "jobs", "i1", "<job/>", 6)
    clock.advance(11)
    await service.tick()  # i1 dead-lettered
    await service.publish(PUB, "jobs", "i2", "<job/>", 6)  # 6 of 10 bytes held: i1 won't fit
    before = await _snapshot(service)
    with pytest.raises(NodeFull):
        await service.redrive(ADMIN, "jobs/dead-letter")
    assert await _snapshot(service) == before


async def test_an_admin_move_past_max_bytes_is_refused(
    service: PubSubService, clock: FakeClock
) -> None:
    await _queue(service, max_bytes="10")
    await _queue(service, "other")
    await service.publish(PUB, "jobs", "a", "<job/>", 6)
    await service.publish(PUB, "other", "b", "<job/>", 6)
    before = await _snapshot(service)
    with pytest.raises(NodeFull):
        await service.move_item(ADMIN, "other", "b", "jobs")
    assert await _snapshot(service) == before


async def test_a_republish_that_grows_past_max_bytes_is_refused(
    service: PubSubService, clock: FakeClock
) -> None:
    await _queue(service, max_bytes="10", queue_overflow="drop-oldest")
    await service.publish(PUB, "jobs", "a", "<job/>", 6)
    await service.publish(PUB, "jobs", "b", "<x/>", 4)
    before = await _snapshot(service)
    with pytest.raises(NodeFull):
        await service.publish(PUB, "jobs", "b", "<bigger/>", 9)  # 6 + 9 > 10
    assert await _snapshot(service) == before
    await service.publish(PUB, "jobs", "b", "<ab/>", 4)  # same size: replaced
    page = await service.get_items(OWNER, "jobs")
    assert [i.item_id for i in page.items] == ["a", "b"]


async def test_dead_lettering_that_fails_midway_leaves_the_item_where_it_was(
    service: PubSubService, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The move is one store operation inside the expiry's savepoint: a failure right
    after it (before the dead-letter node hears of the item) undoes all of it, and the
    item stays locked where it was."""
    await _queue(service, queue_max_deliveries="1", queue_lock_timeout="10")
    await _work(service, ALICE)
    await service.publish(PUB, "jobs", "i1", "<job/>", 6)
    before = await _snapshot(service)

    async def broken(*args: object) -> None:
        raise RuntimeError("a bug after the move")

    engine = service._types.queue._engine
    monkeypatch.setattr(engine, "_arrived", broken)
    clock.advance(11)
    with pytest.raises(RuntimeError):
        await service.tick()
    assert await _snapshot(service) == before
    monkeypatch.undo()
    await service.tick()  # works once the bug is gone: exactly one place, the DLQ
    assert [i.item_id for i in (await service.get_items(OWNER, "jobs/dead-letter")).items] == ["i1"]
    assert (await service.get_items(OWNER, "jobs")).items == ()


# --- the rule in general -------------------------------------------------------------------


async def test_a_failing_operation_in_a_batch_changes_nothing_and_the_rest_commit(
    service: PubSubService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug inside one publish (after its writes) fails that publish alone."""
    await _queue(service)
    await _work(service, ALICE, 10)
    real = service._types.queue.publish

    async def buggy(work, node, item_id, *rest):  # type: ignore[no-untyped-def]
        await real(work, node, item_id, *rest)
        if item_id == "bad":
            raise AssertionError("a bug after the writes")

    monkeypatch.setattr(service._types.queue, "publish", buggy)
    results = await asyncio.gather(
        service.publish(PUB, "jobs", "a", "<x/>", 4),
        service.publish(PUB, "jobs", "bad", "<x/>", 4),
        service.publish(PUB, "jobs", "b", "<x/>", 4),
        return_exceptions=True,
    )
    assert [r.value if not isinstance(r, BaseException) else type(r) for r in results] == [
        "a",
        AssertionError,
        "b",
    ]
    _, items, _, _, ledger = await _snapshot(service)
    assert [i.item_id for i in items["jobs"]] == ["a", "b"]
    assert {(e.kind, e.item_id) for e in ledger} == {
        (EventKind.PUBLISHED, "a"),
        (EventKind.PUBLISHED, "b"),
        (EventKind.DELIVERED, "a"),
        (EventKind.DELIVERED, "b"),
    }
    # The failed publish's notification was never handed out.
    notified = [
        e.items[0].item_id for r in results if not isinstance(r, BaseException) for e in r.effects
    ]
    assert notified == ["a", "b"]


async def test_a_failed_commit_fails_every_operation_and_restores_memory(
    service: PubSubService,
) -> None:
    await _queue(service)
    before = await _snapshot(service)
    backend = service.store.backend  # type: ignore[attr-defined]
    assert isinstance(backend, MemoryBackend)
    backend.fail_next = 1
    service.store.health.retry_for = 0.0  # type: ignore[attr-defined]  # a failure that lasts
    results = await asyncio.gather(
        *(service.publish(PUB, "jobs", f"i{n}", "<x/>", 4) for n in range(4)),
        return_exceptions=True,
    )
    assert all(isinstance(r, StorageUnavailable) for r in results), results
    assert await _snapshot(service) == before
    assert (await service.publish(PUB, "jobs", "i0", "<x/>", 4)).value == "i0"


def test_the_unit_suite_runs_on_the_store_production_runs(service: PubSubService) -> None:
    assert isinstance(service.store, StateStore)
