"""ObservedStore: what a committed transaction reports (core/observe.py), over the
real service and the in-memory store, with a fake clock."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from tests.kit import ALICE, BOB, OWNER, PUB, FakeClock, build_service
from xmpp_queue.core.effects import ItemNotice
from xmpp_queue.core.errors import PayloadTooBig, StorageUnavailable
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import AccessModel, Affiliation, NodeConfig
from xmpp_queue.core.observe import CommittedBatch, ObservedStore
from xmpp_queue.core.ports import Store
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.storage.store import StateStore


@dataclass
class Recorder:
    batches: list[CommittedBatch] = field(default_factory=list)
    failures: int = 0
    sizes: list[int] = field(default_factory=list)

    def committed(self, batch: CommittedBatch) -> None:
        self.batches.append(batch)

    def commit_failed(self) -> None:
        self.failures += 1

    def batch_committed(self, operations: int) -> None:
        self.sizes.append(operations)

    def kinds(self) -> list[EventKind]:
        return [e.kind for b in self.batches for e in b.events]


async def _service(store: Store, clock: FakeClock) -> PubSubService:
    svc = build_service(
        store,
        clock,
        settings=ServiceSettings(
            NodeConfig(),
            access=ServiceAccess.for_domain("example.org"),
            queue_access_model=AccessModel.OPEN,
        ),
    )
    await svc.start()
    return svc


@pytest.fixture
async def observed(clock: FakeClock) -> AsyncIterator[tuple[PubSubService, Recorder]]:
    recorder = Recorder()
    svc = await _service(ObservedStore(StateStore.in_memory(), recorder), clock)
    svc.on_batch_committed(recorder.batch_committed)
    yield svc, recorder
    await svc.stop()


async def _queue(svc: PubSubService) -> None:
    """A queue with XEP-0254's immediate hand-over (redeliveries follow at once)."""
    await svc.create_node(OWNER, "jobs", {"pubsub#queue": ["1"], "pubsub#queue_retry_delay": ["0"]})
    await svc.set_node_affiliations(OWNER, "jobs", [(PUB.bare, Affiliation.PUBLISHER)])


async def test_committed_events_and_both_waits_are_reported(
    observed: tuple[PubSubService, Recorder], clock: FakeClock
) -> None:
    svc, rec = observed
    await _queue(svc)
    await svc.publish(PUB, "jobs", "a", "<x/>", 4)
    clock.advance(3)  # waits 3 s for a worker
    await svc.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    clock.advance(2)  # worked on for 2 s
    await svc.retract(ALICE, "jobs", "a")

    assert rec.kinds() == [EventKind.PUBLISHED, EventKind.DELIVERED, EventKind.ACKED]
    firsts = [w for b in rec.batches for w in b.first_deliveries]
    acks = [w for b in rec.batches for w in b.acks]
    assert [(w.node, w.seconds) for w in firsts] == [("jobs", 3.0)]
    assert [(w.node, w.seconds) for w in acks] == [("jobs", 2.0)]
    assert rec.failures == 0
    # one operation per batch here (each call awaited alone); every commit reported
    assert rec.sizes and all(n >= 1 for n in rec.sizes)
    assert sum(rec.sizes) >= len(rec.batches)


async def test_a_redelivery_is_no_first_delivery(
    observed: tuple[PubSubService, Recorder], clock: FakeClock
) -> None:
    svc, rec = observed
    await _queue(svc)
    await svc.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    await svc.publish(PUB, "jobs", "a", "<x/>", 4)
    await svc.subscribe(BOB, "jobs", BOB.jid, {"pubsub#queue_requests": ["1"]})
    out = await svc.unlock(ALICE, "jobs", "a")
    assert any(isinstance(e, ItemNotice) and e.to == BOB.jid for e in out.effects)
    delivered = [e for b in rec.batches for e in b.events if e.kind is EventKind.DELIVERED]
    assert [e.deliveries for e in delivered] == [1, 2]
    assert len([w for b in rec.batches for w in b.first_deliveries]) == 1


async def test_a_batch_that_concurrent_calls_share_is_one_size(
    observed: tuple[PubSubService, Recorder],
) -> None:
    import asyncio

    svc, rec = observed
    await _queue(svc)
    rec.sizes.clear()
    await asyncio.gather(*(svc.publish(PUB, "jobs", f"i{n}", "<x/>", 4) for n in range(20)))
    assert sum(rec.sizes) == 20
    assert max(rec.sizes) > 1  # group commit: several publishes shared a commit


async def test_a_failed_commit_reports_no_events(clock: FakeClock) -> None:
    rec = Recorder()
    inner = StateStore.in_memory()
    svc = await _service(ObservedStore(inner, rec), clock)
    try:
        await _queue(svc)
        before = len(rec.kinds())
        inner.backend.fail_next = 1  # type: ignore[attr-defined]  # the next write fails
        inner.health.retry_for = 0.0  # and is not repeated (a failure that lasts)
        with pytest.raises(StorageUnavailable):
            await svc.publish(PUB, "jobs", "a", "<x/>", 4)
        assert rec.failures >= 1
        assert len(rec.kinds()) == before  # nothing counted for what did not commit
    finally:
        await svc.stop()


async def test_an_operation_undone_in_a_committed_batch_is_not_counted(
    clock: FakeClock,
) -> None:
    """A refused publish in the middle of a batch: its savepoint is rolled back, and the
    events it noted are forgotten with it."""
    rec = Recorder()
    svc = await _service(ObservedStore(StateStore.in_memory(), rec), clock)
    try:
        await _queue(svc)
        before = Counter(rec.kinds())
        results = await asyncio.gather(
            svc.publish(PUB, "jobs", "ok", "<x/>", 4),
            svc.publish(PUB, "jobs", "too-big", "<x/>", 10**9),
            return_exceptions=True,
        )
        assert isinstance(results[1], PayloadTooBig)
        after = Counter(rec.kinds())
        assert after - before == Counter({EventKind.PUBLISHED: 1})
    finally:
        await svc.stop()


async def test_ping_reaches_the_ledger(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The readiness probe's ping asks the store's ledger (one count, at the clock's
    time), reports nothing as a commit, and raises what the ledger raises."""
    from xmpp_queue.storage.repositories import LedgerRepo

    asked: list[tuple[str, EventKind, object]] = []
    real_count = LedgerRepo.count

    async def counting(self: LedgerRepo, node_id: str, kind: EventKind, since: object) -> int:
        asked.append((node_id, kind, since))
        return await real_count(self, node_id, kind, since)  # type: ignore[arg-type]

    monkeypatch.setattr(LedgerRepo, "count", counting)
    recorder = Recorder()
    store = ObservedStore(StateStore.in_memory(), recorder)
    await store.ping(clock())
    assert asked == [("", EventKind.ACKED, clock())]
    assert (recorder.batches, recorder.failures) == ([], 0)

    async def unreachable(self: LedgerRepo, *args: object) -> int:
        raise StorageUnavailable("database gone")

    monkeypatch.setattr(LedgerRepo, "count", unreachable)
    with pytest.raises(StorageUnavailable):
        await store.ping(clock())


class Broken(Recorder):
    def committed(self, batch: CommittedBatch) -> None:
        raise RuntimeError("a bug in the metrics")


async def test_a_failing_observer_never_fails_or_repeats_a_commit(clock: FakeClock) -> None:
    store = ObservedStore(StateStore.in_memory(), Broken())
    svc = await _service(store, clock)
    try:
        await _queue(svc)
        out = await svc.publish(PUB, "jobs", "a", "<x/>", 4)
        assert out.value == "a"
        async with store.inner.transaction() as tx:
            events = await tx.ledger.events("jobs")
        assert [e.kind for e in events] == [EventKind.PUBLISHED]  # once, not retried
    finally:
        await svc.stop()
