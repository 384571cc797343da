"""Issue 24's dashboard points on the real listener (memory store): one page of the
queues filtered, sorted and paged on the server; idle times from a subscriber's last
delivery or ack (not from subscribing); items and dead letters with their payload;
delete-one-item and move-one-item behind the token; /metrics not waiting for the
queue overview once it has one."""

from __future__ import annotations

import asyncio
import json

from tests.http.test_listener import _queue
from tests.kit import ALICE, PUB
from tests.kit.http import TOKEN, Ops
from xmpp_queue.core.model import SYSTEM, Affiliation


async def _page(ops: Ops, query: str) -> dict:  # type: ignore[type-arg]
    status, body = await ops.get(f"/api/queues?{query}")
    assert status == 200, body
    return json.loads(body)  # type: ignore[no-any-return]


async def test_the_overview_pages_sorts_and_filters_hundreds_of_queues(ops: Ops) -> None:
    svc = ops.service
    for n in range(240):  # as the service itself: past one JID's node quota
        node = f"q{n:03d}"
        await svc.create_node(SYSTEM, node, {"pubsub#queue": ["1"]})
        await svc.set_node_affiliations(SYSTEM, node, [(PUB.bare, Affiliation.PUBLISHER)])
    for n in range(5):
        await svc.publish(PUB, "q123", f"i{n}", "<x/>", 4)
    await svc.publish(PUB, "q007", "only", "<x/>", 4)

    first = await _page(ops, "limit=50")
    assert (first["total"], first["matched"], len(first["queues"])) == (240, 240, 50)
    assert first["queues"][0]["node"] == "q000" and first["waiting"] == 6
    second = await _page(ops, "limit=50&offset=50")
    assert second["queues"][0]["node"] == "q050"
    busiest = await _page(ops, "sort=waiting&desc=1&limit=3")
    assert [q["node"] for q in busiest["queues"]] == ["q123", "q007", "q000"]  # ties by name
    found = await _page(ops, "q=Q12&limit=50")
    assert found["matched"] == 10 and found["total"] == 240  # q120-q129, any case
    assert len((await _page(ops, ""))["queues"]) == 240  # no limit: every queue, as before
    for bad in ("sort=secret", "limit=0", "limit=9999", "offset=-1"):
        status, body = await ops.get(f"/api/queues?{bad}")
        assert status == 400 and "error" in json.loads(body), bad


async def test_idle_counts_from_the_last_delivery_or_ack_not_from_subscribing(ops: Ops) -> None:
    svc = ops.service
    await _queue(svc)
    await svc.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    ops.clock.advance(600)  # subscribed ten minutes ago, then busy
    await svc.publish(PUB, "jobs", "i1", "<x/>", 4)
    ops.clock.advance(5)
    await svc.retract(ALICE, "jobs", "i1")
    ops.clock.advance(2)
    status, body = await ops.get("/api/queue?node=jobs")
    assert status == 200, body
    (sub,) = json.loads(body)["subscribers"]
    assert sub["idle_seconds"] == 2.0, sub  # was 607: a busy worker looked idle


async def test_items_and_dead_letters_show_their_payload_and_can_be_deleted_or_moved(
    ops: Ops,
) -> None:
    svc = ops.service
    await _queue(svc)
    await _queue(svc, "parked")
    for n in range(3):
        await svc.publish(PUB, "jobs", f"i{n}", f"<job n='{n}'/>", 12)
    status, body = await ops.get("/api/queue?node=jobs")
    assert status == 200, body
    items = json.loads(body)["items"]
    assert [(i["item"], i["payload"], i["state"]) for i in items] == [
        ("i0", "<job n='0'/>", "waiting"),
        ("i1", "<job n='1'/>", "waiting"),
        ("i2", "<job n='2'/>", "waiting"),
    ]
    status, reply = await ops.post("/api/actions/delete-item", {"node": "jobs", "item": "i0"})
    assert status == 401  # no token: nothing happens
    status, reply = await ops.post(
        "/api/actions/delete-item", {"node": "jobs", "item": "i0"}, TOKEN
    )
    assert status == 200 and reply["message"] == "deleted item 'i0'", reply
    status, reply = await ops.post(
        "/api/actions/move-item", {"node": "jobs", "item": "i1", "target": "parked"}, TOKEN
    )
    assert status == 200 and reply["message"] == "moved item 'i1' to parked", reply
    assert [i.item_id for i in (await svc.get_items(SYSTEM, "jobs")).items] == ["i2"]
    assert [i.item_id for i in (await svc.get_items(SYSTEM, "parked")).items] == ["i1"]
    status, reply = await ops.post(
        "/api/actions/move-item", {"node": "jobs", "item": "gone", "target": "parked"}, TOKEN
    )
    assert status == 404, reply
    status, reply = await ops.post("/api/actions/move-item", {"node": "jobs", "item": "i2"}, TOKEN)
    assert status == 400 and "target" in str(reply["error"])


async def test_a_scrape_does_not_wait_for_the_overview_once_it_has_one(ops: Ops) -> None:
    """Issue 24: /metrics took 0.4 s under load, reading the queue overview per scrape.
    Once an overview was read, a scrape is answered from it while a fresh one is read
    in the background (the queue gauges lag one scrape)."""
    svc = ops.service
    await _queue(svc)
    calls = 0
    real = svc.queue_overview
    release = asyncio.Event()

    async def slow_overview(actor):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        if calls > 1:
            await release.wait()  # a loaded service: the read takes long
        return await real(actor)

    svc.queue_overview = slow_overview  # type: ignore[method-assign]
    status, _ = await ops.get("/metrics")  # the first scrape reads it
    assert status == 200 and calls == 1
    await asyncio.sleep(0.6)  # past the dashboard's 0.5 s cache
    status, _ = await asyncio.wait_for(ops.get("/metrics"), 2)  # not blocked by the read
    assert status == 200 and calls == 2
    release.set()
