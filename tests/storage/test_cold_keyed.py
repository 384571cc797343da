"""Members of ordering keys in a backlog bounded by disk (``storage/ordered.py``,
``storage/backlog.py``): past the budget a waiting item that is not its key's
placed member keeps only its seq (in its key's fifo and its node's cold tail),
a restart loads them as (key, seqs), and the ordering rules hold exactly as
for whole items.

Every test runs on SQLite and PostgreSQL with no memory for whole waiting items
(``backlog_bytes=0``). The scenarios of ``tests/unit/test_ordering.py`` run
here again over such stores; the property machines (``-cold`` backends) cover
the same paths at random.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.kit import ALICE, OWNER, PUB, FakeClock, build_service
from tests.kit.stores import SQL_BACKENDS, empty_database
from tests.storage.samples import T0, at, item, node
from tests.unit import test_ordering as scenarios
from tests.unit.test_message_model import ids, worker
from tests.unit.test_ordering import ordered, pub
from xmpp_queue.core.model import NewItem, PageRequest
from xmpp_queue.core.service import PubSubService
from xmpp_queue.storage.store import StateStore

WINDOW_1 = {"pubsub#queue_requests": ["1"]}
SCENARIOS = [
    fn
    for name, fn in vars(scenarios).items()
    if name.startswith("test_") and inspect.iscoroutinefunction(fn)
]


@pytest.fixture(params=SQL_BACKENDS)
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await empty_database(request.param, request, tmp_path)


async def cold_service(url: str, clock: FakeClock) -> PubSubService:
    service = build_service(await StateStore.open(url, backlog_bytes=0), clock)
    await service.start()
    return service


async def stop(service: PubSubService) -> None:
    await service.stop()
    await service._ctx.store.close()


@pytest.fixture
async def service(url: str) -> AsyncIterator[tuple[PubSubService, FakeClock]]:
    clock = FakeClock()
    svc = await cold_service(url, clock)
    yield svc, clock
    await stop(svc)


def shape(service: PubSubService) -> tuple[int, int]:
    """(whole items, cold members of ordering keys) of node jobs."""
    store = service._ctx.store
    assert isinstance(store, StateStore)
    ns = store.state.nodes["jobs"]
    tail = ns.queue.tail
    return len(ns.items), len(tail.keyed) if tail is not None else 0


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda fn: fn.__name__.removeprefix("test_"))
async def test_the_ordering_scenarios_hold_with_members_cold(
    scenario: Callable[..., Awaitable[Any]], service: tuple[PubSubService, FakeClock]
) -> None:
    svc, clock = service
    wants = inspect.signature(scenario).parameters
    await scenario(svc, clock) if "clock" in wants else await scenario(svc)


async def test_members_behind_their_key_go_cold_and_a_restart_loads_them_as_seqs(
    url: str,
) -> None:
    clock = FakeClock()
    service = await cold_service(url, clock)
    await ordered(service)
    for n in range(1, 5):
        for key in "AB":
            await pub(service, f"{key}{n}", key)
    await pub(service, "u1")
    async with service._ctx.store.transaction():
        pass  # the last commit settled: its items went cold between transactions
    whole, cold = shape(service)
    assert (whole, cold) == (2, 6)  # A1 and B1 placed, whole; u1 plain, in the cold tail
    await worker(service, 1)  # one in flight: A1
    service = await _restart(service, url, clock)
    assert shape(service) == (1, 7)  # A1 (locked) whole; the rest loaded as (key, seqs)
    page = await service.get_items(OWNER, "jobs")
    assert [i.item_id for i in page.items] == ["A1", "B1", "A2", "B2", "A3", "B3", "A4", "B4", "u1"]
    assert all(i.ordering_key == i.item_id[0] for i in page.items if i.item_id != "u1")
    order = ["A1"]
    for _ in range(8):
        out = await service.retract(ALICE, "jobs", order[-1])
        order += ids(out.effects)
    assert order == ["A1", "B1", "A2", "B2", "A3", "B3", "A4", "B4", "u1"]  # publish order
    await service.retract(ALICE, "jobs", "u1")
    assert shape(service) == (0, 0)
    await stop(service)


async def _restart(service: PubSubService, url: str, clock: FakeClock) -> PubSubService:
    await stop(service)
    return await cold_service(url, clock)


async def test_a_restart_keeps_the_locked_member_placed_and_the_rest_in_order(
    url: str,
) -> None:
    clock = FakeClock()
    service = await cold_service(url, clock)
    await ordered(service)
    for n in range(1, 4):
        await pub(service, f"A{n}", "A", TTL="100" if n == 2 else "1000")
    await worker(service, 3)  # A1 in flight
    service = await _restart(service, url, clock)
    assert shape(service) == (1, 2)
    out = await service.unlock(ALICE, "jobs", "A1")  # back before A2: A1 again
    assert ids(out.effects) == ["A1"]
    clock.advance(100)  # A2, cold behind its key, expires on time
    await service.tick()
    dead = (await service.get_items(OWNER, "jobs/dead-letter")).items
    assert [i.item_id for i in dead] == ["A2"]
    assert ids((await service.retract(ALICE, "jobs", "A1")).effects) == ["A3"]
    await stop(service)


async def test_a_rollback_puts_the_placed_member_back_before_its_cold_successor(
    url: str,
) -> None:
    store = await StateStore.open(url, backlog_bytes=0)
    try:
        async with store.transaction() as tx:
            await tx.nodes.add(node("jobs", queue=True, queue_ordered=True))
            for n in range(1, 4):
                await tx.items.put(item("jobs", f"A{n}", ordering_key="A"))
            await tx.commit()
        async with store.transaction():
            pass  # settled: A2 and A3 are cold behind A1
        keyed = store.state.nodes["jobs"].queue.tail
        assert keyed is not None and len(keyed.keyed) == 2
        with pytest.raises(RuntimeError):
            async with store.transaction() as tx:
                assert [i.item_id for i in await tx.items.next_ready("jobs", T0, 5)] == ["A1"]
                await tx.items.remove("jobs", "A1")  # the head leaves: A2 is next
                assert [i.item_id for i in await tx.items.next_ready("jobs", T0, 5)] == ["A2"]
                raise RuntimeError("refused")
        async with store.transaction() as tx:
            assert [i.item_id for i in await tx.items.next_ready("jobs", T0, 5)] == ["A1"]
            assert await tx.items.lock("jobs", "A1", "s1", "w@example.org/a", T0, at(30))
            assert await tx.items.next_ready("jobs", T0, 5) == []  # the key is in flight
            page = await tx.items.page("jobs", PageRequest())
            assert [i.item_id for i in page.items] == ["A1", "A2", "A3"]
            await tx.commit()
    finally:
        await store.close()


async def test_one_deep_key_drains_in_order_with_its_members_read_a_chunk_at_a_time(
    url: str,
) -> None:
    clock = FakeClock()
    service = await cold_service(url, clock)
    await ordered(service)
    batch = [NewItem(f"A{n}", "<j/>", 4, {"ordering-key": "A"}) for n in range(300)]
    await service.publish_items(PUB, "jobs", batch)
    service = await _restart(service, url, clock)
    store = service._ctx.store
    assert isinstance(store, StateStore)
    reads: list[int] = []
    real = store.backend.items_by_seq

    async def counted(node_id: str, seqs: list[int]) -> list[Any]:
        reads.append(len(seqs))
        return await real(node_id, seqs)

    store.backend.items_by_seq = counted  # type: ignore[method-assign]
    order = ids((await service.subscribe(ALICE, "jobs", ALICE.jid, WINDOW_1)).effects)
    for _ in range(299):
        order += ids((await service.retract(ALICE, "jobs", order[-1])).effects)
    assert order == [f"A{n}" for n in range(300)]
    assert len(reads) <= 3 and sum(reads) == 300  # the head and 255 after it, then the rest
    await stop(service)
