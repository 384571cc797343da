"""Ordered work across restarts, on SQLite and PostgreSQL: the ordering key is a
column, so a restart in the middle of a key rebuilds the per-key index from the
rows, and the single-active queue keeps its active subscriber."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import FakeClock
from tests.kit.stores import SQL_BACKENDS, empty_database
from xmpp_queue.core.model import Actor, Affiliation
from xmpp_queue.core.service import PubSubService

from .test_message_model_restarts import _ids, _restart, _service

OWNER = Actor("owner@example.org/desk")
PUB = Actor("pub@example.org/engine")
ALICE = Actor("alice@example.org/a")
BOB = Actor("bob@example.org/b")


@pytest.fixture(params=SQL_BACKENDS)
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await empty_database(request.param, request, tmp_path)


async def _queue(service: PubSubService, **config: str) -> None:
    values = {"pubsub#queue": ["1"], "pubsub#queue_retry_delay": ["0"]}
    values |= {f"pubsub#{k}": [v] for k, v in config.items()}
    await service.create_node(OWNER, "jobs", values)
    await service.set_node_affiliations(
        OWNER,
        "jobs",
        [(PUB.bare, Affiliation.PUBLISHER)] + [(a.bare, Affiliation.MEMBER) for a in (ALICE, BOB)],
    )


async def _held(service: PubSubService) -> dict[str, str | None]:
    return {i.item_id: i.lock_jid for i in (await service.get_items(OWNER, "jobs")).items}


async def test_a_restart_in_the_middle_of_a_key_keeps_its_order(url: str) -> None:
    clock = FakeClock()
    service = await _service(url, clock)
    await _queue(service, queue_ordered="1")
    for n in (1, 2, 3):
        for key in "AB":
            attributes = {"ordering-key": key}
            await service.publish(PUB, "jobs", f"{key}{n}", "<j/>", 4, attributes=attributes)
    await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["5"]})
    await service.retract(ALICE, "jobs", "A1")  # A2 is in flight now, A3 waits
    before = await _held(service)
    assert {k for k, v in before.items() if v} == {"A2", "B1"}

    service = await _restart(service, url, clock)
    items = {i.item_id: i for i in (await service.get_items(OWNER, "jobs")).items}
    assert await _held(service) == before
    assert items["A3"].ordering_key == "A"
    out = await service.unlock(ALICE, "jobs", "A2")  # back before A3
    assert _ids(out.effects) == ["A2"]
    assert _ids((await service.retract(ALICE, "jobs", "A2")).effects) == ["A3"]
    assert _ids((await service.retract(ALICE, "jobs", "B1")).effects) == ["B2"]
    await service.stop()
    await service._ctx.store.close()


async def test_a_restart_keeps_the_single_active_subscriber(url: str) -> None:
    clock = FakeClock()
    service = await _service(url, clock)
    await _queue(service, queue_single_active="1")
    for n in (1, 2, 3):
        await service.publish(PUB, "jobs", f"i{n}", "<j/>", 4)
    await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    await service.subscribe(BOB, "jobs", BOB.jid, {"pubsub#queue_requests": ["1"]})
    service = await _restart(service, url, clock)
    assert await _held(service) == {"i1": ALICE.jid, "i2": None, "i3": None}
    out = await service.release_subscriber(ALICE.jid, "unavailable")
    assert _ids(out.effects) == ["i1"]
    assert (await _held(service))["i1"] == BOB.jid
    await service.stop()
    await service._ctx.store.close()
