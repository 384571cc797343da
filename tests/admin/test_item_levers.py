"""Consumers, peek, publish, move, delete-item and affiliations, through whole
command sessions on the real service (issue 24: operators without Python)."""

from __future__ import annotations

import pytest

from tests.admin.test_views import forms, tables
from tests.kit.admin import (
    ALICE,
    BOB,
    OWNER,
    PUB,
    FakeClock,
    Transcript,
    assert_bad_payload,
    make_queue,
    make_worker,
    note,
    publish,
    seeded,
    values,
)
from xmpp_queue.core.errors import ClosedNode
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import Actor, Affiliation
from xmpp_queue.core.service import PubSubService

P = "xmpp-queue#"
CAROL = Actor("carol@example.org/c")


async def run(transcript: Transcript, command: str, *answers: dict[str, object]) -> object:
    reply = await transcript.execute(P + command)
    for fields in answers:
        reply = await transcript.step(reply, fields=fields)  # type: ignore[arg-type]
    return reply


async def test_consumers_list_each_subscriber_with_its_window_and_in_flight(
    transcript: Transcript, service: PubSubService, clock: FakeClock
) -> None:
    await seeded(service)  # ALICE holds i1, BOB holds i2, i3 waits
    clock.advance(30)
    reply = await run(transcript, "consumers", {"node": "jobs"})
    rows = sorted(tables(reply)["consumers"], key=lambda r: str(r["jid"]))
    assert [(r["jid"], r["queue_requests"], r["in_flight"]) for r in rows] == [
        (ALICE.jid, "1", "1"),
        (BOB.jid, "1", "1"),
    ]
    assert note(reply).startswith("'jobs': 2 consumer(s), 2 item(s) in flight")


async def test_peek_pages_through_items_without_locking_or_delivering(
    transcript: Transcript, service: PubSubService
) -> None:
    await seeded(service)
    await publish(service, "jobs", "i4", "i5")
    before = await service.queue_details(Actor("x@example.org", system=True), "jobs")
    first = await run(transcript, "peek", {"node": "jobs", "max": "2"})
    summary = values(forms(first)[0])
    page = tables(first)["items"]
    assert [(r["item"], r["state"]) for r in page] == [("i1", "locked"), ("i2", "locked")]
    assert page[0]["holder"] == ALICE.jid and page[0]["payload"] == "<job id='i1'/>"
    assert (summary["count"], summary["next"]) == (["5"], ["i2"])
    second = await run(transcript, "peek", {"node": "jobs", "max": "5", "after": "i2"})
    assert [r["item"] for r in tables(second)["items"]] == ["i3", "i4", "i5"]
    assert values(forms(second)[0])["next"] == [""]  # the last page
    after = await service.queue_details(Actor("x@example.org", system=True), "jobs")
    assert (after.backlog, len(after.locks)) == (before.backlog, len(before.locks))
    assert_bad_payload(await run(transcript, "peek", {"node": "jobs", "max": "500"}), "at most")


async def test_publish_stores_one_item_with_attributes_and_dispatches_it(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    await make_worker(service, ALICE, 1)
    fields = {
        "node": "jobs",
        "item": "j1",
        "payload": "<job xmlns='urn:example'>go</job>",
        "attributes": ["tenant=acme", "k=a=b"],
    }
    reply = await run(transcript, "publish", fields)
    assert note(reply) == "Published item 'j1' to 'jobs'."
    (lock,) = tables(await run(transcript, "details", {"node": "jobs"}))["locks"]
    assert (lock["item"], lock["holder"]) == ("j1", ALICE.jid)
    assert lock["attributes"] == ["tenant=acme", "k=a=b"]
    bad = await run(transcript, "publish", {"node": "jobs", "payload": "not xml"})
    assert_bad_payload(bad, "not well-formed")
    bad = await run(transcript, "publish", {**fields, "attributes": ["novalue"]})
    assert_bad_payload(bad, "not name=value")


async def test_move_takes_a_dead_letter_to_another_queue_in_one_step(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service, "jobs", max_deliveries="1", retry_delay="0")
    await make_queue(service, "other")
    await make_worker(service, ALICE, 1)
    await publish(service, "jobs", "poison")
    await service.unlock(ALICE, "jobs", "poison")  # dead-lettered
    reply = await run(
        transcript, "move", {"node": "jobs/dead-letter", "item": "poison", "target": "other"}
    )
    assert note(reply) == "Moved item 'poison' of 'jobs/dead-letter' to 'other' as 'poison'."
    peeked = tables(await run(transcript, "peek", {"node": "other"}))["items"]
    assert [(r["item"], r["deliveries"], r["attributes"]) for r in peeked] == [("poison", "0", [])]
    assert tables(await run(transcript, "peek", {"node": "jobs/dead-letter"}))["items"] == []


async def test_move_refuses_a_locked_item_a_taken_id_and_a_full_queue_changing_nothing(
    transcript: Transcript, service: PubSubService
) -> None:
    await seeded(service)  # ALICE holds i1, BOB holds i2, i3 waits
    await make_queue(service, "small")
    await service.configure_node(OWNER, "small", {"pubsub#max_items": ["1"]})
    await publish(service, "small", "i3")
    locked = await run(transcript, "move", {"node": "jobs", "item": "i1", "target": "small"})
    assert_bad_payload(locked, "locked")
    taken = await run(transcript, "move", {"node": "jobs", "item": "i3", "target": "small"})
    assert_bad_payload(taken, "holds an item i3 already")
    full = await run(
        transcript, "move", {"node": "jobs", "item": "i3", "target": "small", "target_item": "x"}
    )
    assert_bad_payload(full, "max_items")
    assert [
        r["item"] for r in tables(await run(transcript, "peek", {"node": "jobs"}))["items"]
    ] == [
        "i1",
        "i2",
        "i3",
    ]


async def test_move_out_of_a_queue_records_it_in_both_ledgers(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service, "jobs")
    await make_queue(service, "other")
    await publish(service, "jobs", "i1")
    await run(transcript, "move", {"node": "jobs", "item": "i1", "target": "other"})
    async with service.store.transaction() as tx:
        left = [(e.kind, e.item_id) for e in await tx.ledger.events("jobs")]
        came = [(e.kind, e.item_id) for e in await tx.ledger.events("other")]
    assert left[-1] == (EventKind.RETRACTED, "i1")
    assert came == [(EventKind.PUBLISHED, "i1")]


async def test_delete_item_retracts_it_and_tells_its_holder(
    transcript: Transcript, service: PubSubService
) -> None:
    await seeded(service)
    reply = await run(transcript, "delete-item", {"node": "jobs", "item": "i1"})
    assert note(reply) == "Deleted item 'i1' of 'jobs'."
    await transcript.settled()
    assert any(getattr(e, "node", None) == "jobs" for e in transcript.sent.effects)
    remaining = tables(await run(transcript, "peek", {"node": "jobs"}))["items"]
    assert "i1" not in [r["item"] for r in remaining]
    missing = await run(transcript, "delete-item", {"node": "jobs", "item": "ghost"})
    assert_bad_payload(missing, "ghost")


async def test_affiliations_lets_a_worker_into_a_whitelisted_queue(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    with pytest.raises(ClosedNode):  # new queues are whitelisted
        await service.subscribe(CAROL, "jobs", CAROL.jid, {"pubsub#queue_requests": ["1"]})
    listed = await run(transcript, "affiliations", {"node": "jobs"}, {})
    before = tables(listed)["affiliations"]
    reply = await run(
        transcript,
        "affiliations",
        {"node": "jobs"},
        {"member": ["carol@example.org"], "publisher": ["dave@example.org/x"]},
    )
    after = {r["jid"]: r["affiliation"] for r in tables(reply)["affiliations"]}
    assert after["carol@example.org"] == "member" and after["dave@example.org"] == "publisher"
    assert len(after) == len(before) + 2
    await service.subscribe(CAROL, "jobs", CAROL.jid, {"pubsub#queue_requests": ["1"]})
    removed = await run(
        transcript, "affiliations", {"node": "jobs"}, {"none": ["carol@example.org"]}
    )
    assert "carol@example.org" not in {r["jid"] for r in tables(removed)["affiliations"]}
    entries = await service.get_node_affiliations(Actor("", system=True), "jobs")
    assert "carol@example.org" not in {e.jid for e in entries}
    assert {e.jid: e.affiliation for e in entries}[ALICE.bare] is Affiliation.MEMBER
    twice = await run(
        transcript,
        "affiliations",
        {"node": "jobs"},
        {"member": ["e@example.org"], "outcast": ["e@example.org"]},
    )
    assert_bad_payload(twice, "two affiliations")
    assert PUB  # the seeding publisher stays as it was
