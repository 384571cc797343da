"""Retention, seek and snapshots (docs/queueing.md, "Retention, seek and
snapshots") through the service, on memory, SQLite and PostgreSQL, with a fake
clock; the SQL cases restart in the middle (retained items, their cold payloads
and the snapshots come back from the rows)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.kit import FakeClock, build_service
from tests.kit.stores import COLD_BACKENDS, SQL_BACKENDS, empty_database, open_store
from xmpp_queue.core.effects import ItemNotice
from xmpp_queue.core.errors import Forbidden, NotAQueue, SnapshotNotFound
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import Actor, Affiliation, new_item
from xmpp_queue.core.replay import SeekReport
from xmpp_queue.core.service import PubSubService
from xmpp_queue.storage.item_values import COLD
from xmpp_queue.storage.store import StateStore

OWNER = Actor("owner@example.org/desk")
PUB = Actor("pub@example.org/engine")
ALICE = Actor("alice@example.org/a")


# Each test's database URL -> the backend name it was made for (its memory budget).
_BACKEND_OF: dict[str, str] = {}


@pytest.fixture(params=["memory", *SQL_BACKENDS, *COLD_BACKENDS])
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return ""
    made = await empty_database(request.param, request, tmp_path)
    _BACKEND_OF[made] = request.param
    return made


async def _service(url: str, clock: FakeClock) -> PubSubService:
    store = await open_store(_BACKEND_OF[url], url) if url else StateStore.in_memory()
    service = build_service(store, clock)
    await service.start()
    return service


async def _restart(service: PubSubService, url: str, clock: FakeClock) -> PubSubService:
    if not url:
        return service  # nothing to reload from
    await service.stop()
    await service._ctx.store.close()
    return await _service(url, clock)


def _ids(effects: tuple[object, ...]) -> list[str]:
    return [i.item_id for e in effects if isinstance(e, ItemNotice) for i in e.items]


def _payloads(effects: tuple[object, ...]) -> dict[str, str | None]:
    return {i.item_id: i.payload for e in effects if isinstance(e, ItemNotice) for i in e.items}


async def _queue(service: PubSubService, retain: int = 3600) -> None:
    values = {
        "pubsub#queue": ["1"],
        "pubsub#queue_retry_delay": ["0"],
        "pubsub#queue_retain_acked": [str(retain)],
    }
    await service.create_node(OWNER, "jobs", values)
    await service.set_node_affiliations(
        OWNER, "jobs", [(PUB.bare, Affiliation.PUBLISHER), (ALICE.bare, Affiliation.MEMBER)]
    )


async def _publish(service: PubSubService, clock: FakeClock, *ids: str) -> None:
    for item_id in ids:
        await service.publish(PUB, "jobs", item_id, f"<j n='{item_id}'/>", 12)
        clock.advance(1)


async def _work_all(service: PubSubService, clock: FakeClock, *ids: str) -> None:
    for item_id in ids:
        await service.retract(ALICE, "jobs", item_id)
        clock.advance(1)


async def _stats(service: PubSubService) -> tuple[int, int]:
    async def op(w):  # type: ignore[no-untyped-def]
        stats = await w.tx.items.queue_stats("jobs")
        return stats.backlog, await w.tx.items.retained_count("jobs")

    return await service._ctx.read(op)  # type: ignore[no-any-return]


async def _kinds(service: PubSubService, kind: EventKind) -> list[str]:
    async def op(w):  # type: ignore[no-untyped-def]
        return [e.item_id for e in await w.tx.ledger.events("jobs") if e.kind is kind]

    return await service._ctx.read(op)  # type: ignore[no-any-return]


async def test_an_acked_item_is_retained_out_of_the_backlog_and_replayed_by_a_seek(
    url: str,
) -> None:
    clock = FakeClock()
    service = await _service(url, clock)
    await _queue(service)
    await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    await _publish(service, clock, "a", "b", "c", "d")
    cut = clock()
    await _publish(service, clock, "e")
    await _work_all(service, clock, "a", "b", "c")  # d is locked to Alice, e waits
    assert await _stats(service) == (1, 3)  # e waiting; a, b, c retained (d in flight)
    if url:  # retained payloads stay in the database, not in memory
        retained = service._ctx.store.state.nodes["jobs"].retained  # type: ignore[attr-defined]
        assert {i.payload is COLD for i in retained.values()} == {True}

    service = await _restart(service, url, clock)
    report = await service.replay.seek_time(OWNER, "jobs", cut - timedelta(seconds=2))
    # c was published 1 s before the cut... and 2 s back: c only; a, b stay acked
    assert (report.value.replayed, report.value.still_acked) == (1, 2)
    assert await _kinds(service, EventKind.REPLAYED) == ["c"]
    # d (locked) and e (waiting) untouched; c waits before e (its old place)
    assert await _stats(service) == (2, 2)
    out = await service.retract(ALICE, "jobs", "d")
    assert _ids(out.effects) == ["c"] and _payloads(out.effects)["c"] == "<j n='c'/>"
    item = await service._ctx.read(lambda w: w.tx.items.get("jobs", "c"))
    assert item is not None and item.deliveries == 1  # a fresh delivery count
    await service.stop()
    await service._ctx.store.close()


async def test_a_snapshot_brings_back_what_was_unacked_then_and_everything_after(
    url: str,
) -> None:
    clock = FakeClock()
    service = await _service(url, clock)
    await _queue(service)
    await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["5"]})
    await _publish(service, clock, "a", "b", "c")
    await _work_all(service, clock, "a")
    taken = await service.replay.take_snapshot(OWNER, "jobs", "before-deploy")
    assert taken.value.name == "before-deploy"
    await _work_all(service, clock, "b")
    await _publish(service, clock, "d")
    await _work_all(service, clock, "c", "d")
    assert await _stats(service) == (0, 4)

    service = await _restart(service, url, clock)
    listed, retained = await service.replay.snapshots(OWNER, "jobs")
    assert [s.name for s in listed] == ["before-deploy"] and retained == 4
    out = await service.replay.seek_snapshot(OWNER, "jobs", "before-deploy")
    assert (out.value.replayed, out.value.still_acked) == (3, 1)  # b, c, d; a stays acked
    assert _ids(out.effects) == ["b", "c", "d"]  # handed out again at once, in order
    with pytest.raises(SnapshotNotFound):
        await service.replay.seek_snapshot(OWNER, "jobs", "nope")
    await service.replay.delete_snapshot(OWNER, "jobs", "before-deploy")
    assert (await service.replay.snapshots(OWNER, "jobs"))[0] == []
    assert await _kinds(service, EventKind.SNAPSHOT) == ["before-deploy", "before-deploy"]
    await service.stop()
    await service._ctx.store.close()


async def test_retention_ends_by_the_timer_and_the_deadline_names_it(url: str) -> None:
    clock = FakeClock()
    service = await _service(url, clock)
    await _queue(service, retain=60)
    await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["5"]})
    await _publish(service, clock, "a")
    acked_at = clock()
    await _work_all(service, clock, "a")
    assert await service.next_deadline() == acked_at + timedelta(seconds=60)
    service = await _restart(service, url, clock)
    clock.advance(30)
    await service.sweep()
    assert await _stats(service) == (0, 1)
    clock.advance(31)
    await service.sweep()
    assert await _stats(service) == (0, 0)
    assert await _kinds(service, EventKind.RETENTION_ENDED) == ["a"]
    assert await service.next_deadline() is None
    report = await service.replay.seek_time(OWNER, "jobs", acked_at - timedelta(hours=1))
    assert report.value.replayed == 0
    await service.stop()
    await service._ctx.store.close()


async def test_publish_and_ack_in_one_batch_then_republish_of_a_retained_id(url: str) -> None:
    """A retained row written with its payload in the same commit as its publish;
    a new publish of a retained id replaces the retained copy (one row per id)."""
    clock = FakeClock()
    service = await _service(url, clock)
    await _queue(service)
    await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["5"]})
    start = clock()

    async def both(w):  # type: ignore[no-untyped-def]
        await w.tx.items.put(new_item("jobs", "x", PUB.jid, "<x/>", 4, {}, w.now))
        return await w.tx.items.retain("jobs", "x", w.now)

    assert await service._ctx.read(both) is True
    await _publish(service, clock, "y")
    await _work_all(service, clock, "y")
    await _publish(service, clock, "y")  # a new y: the retained one is gone
    service = await _restart(service, url, clock)
    assert await _stats(service) == (0, 1)  # the new y is locked to Alice; x retained
    out = await service.replay.seek_time(OWNER, "jobs", start)
    assert out.value.replayed == 1 and _payloads(out.effects) == {"x": "<x/>"}
    await service.stop()
    await service._ctx.store.close()


async def test_only_owners_and_admins_seek_and_only_on_queues(url: str) -> None:
    clock = FakeClock()
    service = await _service(url, clock)
    await _queue(service)
    await service.create_node(OWNER, "news", {})
    with pytest.raises(Forbidden):
        await service.replay.seek_time(ALICE, "jobs", clock())
    with pytest.raises(Forbidden):
        await service.replay.take_snapshot(PUB, "jobs", "s")
    with pytest.raises(NotAQueue):
        await service.replay.take_snapshot(OWNER, "news", "s")
    admin = Actor("admin@example.org/console")
    assert (await service.replay.seek_time(admin, "jobs", clock())).value.replayed == 0
    await service.stop()
    await service._ctx.store.close()


async def test_without_retention_an_ack_deletes_the_item(url: str) -> None:
    clock = FakeClock()
    service = await _service(url, clock)
    await _queue(service, retain=0)
    await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["5"]})
    await _publish(service, clock, "a")
    await _work_all(service, clock, "a")
    assert await _stats(service) == (0, 0)
    assert (
        await service.replay.seek_time(OWNER, "jobs", clock() - timedelta(1))
    ).value == SeekReport(0, 0)
    await service.stop()
    await service._ctx.store.close()
