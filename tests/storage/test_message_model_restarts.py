"""The message model across restarts, on SQLite and PostgreSQL: attributes,
priority, delays, expiry and the dedup window are in the database, not only in
the memory of the process that took them."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.kit import FakeClock, build_service
from tests.kit.stores import SQL_BACKENDS, empty_database
from xmpp_queue.core.attributes import format_datetime
from xmpp_queue.core.effects import ItemNotice
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import Actor, Affiliation
from xmpp_queue.core.service import PubSubService
from xmpp_queue.storage.store import StateStore

OWNER = Actor("owner@example.org/desk")
PUB = Actor("pub@example.org/engine")
ALICE = Actor("alice@example.org/a")


async def _service(url: str, clock: FakeClock) -> PubSubService:
    service = build_service(await StateStore.open(url), clock)
    await service.start()
    return service


async def _restart(service: PubSubService, url: str, clock: FakeClock) -> PubSubService:
    await service.stop()
    await service._ctx.store.close()
    return await _service(url, clock)


@pytest.fixture(params=SQL_BACKENDS)
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await empty_database(request.param, request, tmp_path)


def _ids(effects: tuple[object, ...]) -> list[str]:
    return [i.item_id for e in effects if isinstance(e, ItemNotice) for i in e.items]


async def test_the_message_model_survives_a_restart(url: str) -> None:
    clock = FakeClock()
    service = await _service(url, clock)
    config = {
        "pubsub#queue": ["1"],
        "pubsub#queue_dedup_window": ["300"],
        "pubsub#queue_priority_age": ["0"],  # strict order: this test waits 60 s
    }
    await service.create_node(OWNER, "jobs", config)
    await service.set_node_affiliations(
        OWNER, "jobs", [(PUB.bare, Affiliation.PUBLISHER), (ALICE.bare, Affiliation.MEMBER)]
    )
    start = format_datetime(clock.now + timedelta(seconds=60))
    await service.publish(PUB, "jobs", "done", "<j/>", 4)
    await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    await service.retract(ALICE, "jobs", "done")  # acked: inside the dedup window now
    await service.unsubscribe(ALICE, "jobs", ALICE.jid)
    await service.publish(PUB, "jobs", "later", "<j/>", 4, attributes={"Start": start, "k": "v"})
    await service.publish(PUB, "jobs", "soon-gone", "<j/>", 4, attributes={"TTL": "30"})
    await service.publish(PUB, "jobs", "low", "<j/>", 4, attributes={"Urgency": "low"})
    await service.publish(PUB, "jobs", "high", "<j/>", 4, attributes={"Urgency": "high"})
    before = {i.item_id: i for i in (await service.get_items(OWNER, "jobs")).items}

    service = await _restart(service, url, clock)
    after = {i.item_id: i for i in (await service.get_items(OWNER, "jobs")).items}
    assert after == before
    assert after["later"].headers["k"] == "v" and after["later"].available_at is not None
    assert after["low"].priority < after["high"].priority

    again = await service.publish(PUB, "jobs", "done", "<j/>", 4)  # a retry after the restart
    assert _ids(again.effects) == [] and "done" not in {
        i.item_id for i in (await service.get_items(OWNER, "jobs")).items
    }
    clock.advance(30)
    await service.tick()
    service = await _restart(service, url, clock)
    dead = {i.item_id for i in (await service.get_items(OWNER, "jobs/dead-letter")).items}
    assert dead == {"soon-gone"}
    clock.advance(30)
    await service.tick()
    await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    held = [i.item_id for i in (await service.get_items(OWNER, "jobs")).items if i.locked_by]
    assert held == ["high"]  # the window of one: the most urgent went first
    async with service._ctx.store.transaction() as tx:
        kinds = [e.kind for e in await tx.ledger.events("jobs") if e.item_id == "done"]
    assert kinds[-1] is EventKind.DEDUPLICATED
    await service.stop()
    await service._ctx.store.close()


async def test_failure_reasons_survive_a_restart(url: str) -> None:
    """Issue 24: ``last-error`` and ``error-history`` are written with the unlock, so a
    restarted service still knows why the item failed (and dead-letters with it)."""
    clock = FakeClock()
    service = await _service(url, clock)
    config = {
        "pubsub#queue": ["1"],
        "pubsub#queue_max_deliveries": ["2"],
        "pubsub#queue_retry_delay": ["0"],
    }
    await service.create_node(OWNER, "jobs", config)
    await service.set_node_affiliations(
        OWNER, "jobs", [(PUB.bare, Affiliation.PUBLISHER), (ALICE.bare, Affiliation.MEMBER)]
    )
    await service.publish(PUB, "jobs", "a", "<j/>", 4)
    await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    await service.unlock(ALICE, "jobs", "a", reason="OSError: disk full")
    before = (await service.get_items(OWNER, "jobs")).items[0].headers

    service = await _restart(service, url, clock)
    (item,) = (await service.get_items(OWNER, "jobs")).items
    assert item.headers == before and item.headers["last-error"] == "OSError: disk full"
    await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    await service.unlock(ALICE, "jobs", "a", reason="OSError: still full")
    (letter,) = (await service.get_items(OWNER, "jobs/dead-letter")).items
    assert letter.headers["last-error"] == "OSError: still full"
    assert '"OSError: disk full"' in letter.headers["error-history"]
    await service.stop()
    await service._ctx.store.close()
