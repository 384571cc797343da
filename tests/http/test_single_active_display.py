"""The dashboard's queue page says which subscriber of a single-active queue is
active, and that the queue is ordered (issue 20)."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.kit import ADMIN, ALICE, BOB, OWNER, PUB, FakeClock, build_service
from xmpp_queue.core.model import Affiliation
from xmpp_queue.http.queues import details_json
from xmpp_queue.storage.store import StateStore


async def test_the_queue_page_shows_the_active_subscriber() -> None:
    service = build_service(StateStore.in_memory(), FakeClock())
    config = {"pubsub#queue": ["1"], "pubsub#queue_single_active": ["1"]}
    config["pubsub#queue_ordered"] = ["1"]
    await service.create_node(OWNER, "jobs", config)
    members = [(a.bare, Affiliation.MEMBER) for a in (ALICE, BOB)]
    await service.set_node_affiliations(
        OWNER, "jobs", [(PUB.bare, Affiliation.PUBLISHER), *members]
    )
    alice = await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    await service.subscribe(BOB, "jobs", BOB.jid, {"pubsub#queue_requests": ["1"]})
    page = details_json(await service.queue_details(ADMIN, "jobs"), datetime.now(UTC))
    assert page["active"] == alice.value.subid
    assert [s["active"] for s in page["subscribers"]] == [True, False]
    assert page["config"]["ordered"] and page["config"]["single_active"]
    await service.unsubscribe(ALICE, "jobs", ALICE.jid)
    page = details_json(await service.queue_details(ADMIN, "jobs"), datetime.now(UTC))
    assert [s["jid"] for s in page["subscribers"] if s["active"]] == [BOB.jid]
