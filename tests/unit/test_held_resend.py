"""Held items are announced to their holders again after a restart (docs/queueing.md,
"After a restart"): same lock, same attempt, marked ``delivery-resent``; nothing
stored changes."""

from __future__ import annotations

import pytest

from tests.kit import FakeClock, build_service
from xmpp_queue.core.effects import ItemNotice
from xmpp_queue.core.errors import AttributeRefused
from xmpp_queue.core.model import AccessModel, Actor
from xmpp_queue.storage.store import StateStore

OWNER = Actor("owner@example.org/desk")
ADMIN = Actor("admin@example.org")
WORKER = Actor("w1@example.org/proc")
QUEUE = {
    "pubsub#queue": ["1"],
    "pubsub#access_model": [AccessModel.OPEN.value],
    "pubsub#queue_retry_delay": ["0"],
}


async def ledger_size(store: StateStore) -> int:
    async with store.transaction() as tx:
        return len(await tx.ledger.events())


async def test_each_held_item_is_announced_again_to_its_holder_and_nothing_changes() -> None:
    store = StateStore.in_memory()
    clock = FakeClock()
    svc = build_service(store, clock)
    await svc.start()
    await svc.create_node(OWNER, "jobs", QUEUE)
    await svc.create_node(OWNER, "news")  # a leaf: nothing is ever held there
    sub = (await svc.subscribe(WORKER, "jobs", WORKER.jid, {"pubsub#queue_requests": ["2"]})).value
    for n in range(3):
        await svc.publish(OWNER, "jobs", f"i{n}", f"<p xmlns='x'>{n}</p>")
    await svc.unlock(WORKER, "jobs", "i0")  # i0 goes back and is locked again: attempt 2
    before = await svc.queue_details(ADMIN, "jobs")
    ledger = await ledger_size(store)

    outcome = await svc.resend_held()

    notices = [e for e in outcome.effects if isinstance(e, ItemNotice)]
    assert outcome.value == 2 == len(notices) == len(outcome.effects)
    by_item = {n.items[0].item_id: n for n in notices}
    assert set(by_item) == {"i0", "i1"}
    for notice in notices:
        assert notice.to == WORKER.jid and notice.node == "jobs"
        assert notice.subids == (sub.subid,)
        assert notice.items[0].headers["delivery-resent"] == "1"
    assert by_item["i1"].items[0].headers["delivery-attempt"] == "1"
    assert by_item["i1"].items[0].payload == "<p xmlns='x'>1</p>"
    assert by_item["i0"].items[0].headers["delivery-attempt"] == "2"
    after = await svc.queue_details(ADMIN, "jobs")
    assert after == before  # no lock, deadline or count moved
    assert await ledger_size(store) == ledger
    await svc.stop()


async def test_a_publisher_may_not_forge_the_resent_mark() -> None:
    svc = build_service(StateStore.in_memory(), FakeClock())
    await svc.start()
    await svc.create_node(OWNER, "jobs", QUEUE)
    with pytest.raises(AttributeRefused):
        await svc.publish(OWNER, "jobs", "i", "<p xmlns='x'/>", attributes={"delivery-resent": "1"})
    await svc.stop()
