"""Seek and snapshots as XEP-0050 commands (issue 21 point 3): for admins and for
the queue's owners, whole command sessions on the real service."""

from __future__ import annotations

from datetime import timedelta

from tests.admin.test_views import forms, tables
from tests.kit.admin import (
    ALICE,
    OWNER,
    PUB,
    STRANGER,
    FakeClock,
    Transcript,
    assert_bad_payload,
    error_of,
    make_worker,
    note,
    values,
)
from xmpp_queue.admin.errors import COMMANDS_NS
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import SYSTEM, Affiliation
from xmpp_queue.core.service import PubSubService

P = "xmpp-queue#"
REPLAY = [P + "seek", P + "snapshot", P + "snapshots", P + "snapshot-delete"]


async def run(transcript: Transcript, command: str, fields: dict[str, str], frm: str) -> object:
    first = await transcript.execute(P + command, frm)
    if first["type"] == "error":
        return first
    return await transcript.step(first, frm, fields=fields)


async def _retaining_queue(service: PubSubService, clock: FakeClock) -> None:
    """jobs retains acked items; ALICE works with one slot: a1, a2 acked, she holds a3."""
    values_ = {
        "pubsub#queue": ["1"],
        "pubsub#queue_retry_delay": ["0"],
        "pubsub#queue_retain_acked": ["3600"],
    }
    await service.create_node(OWNER, "jobs", values_)
    await service.set_node_affiliations(
        OWNER, "jobs", [(PUB.bare, Affiliation.PUBLISHER), (ALICE.bare, Affiliation.MEMBER)]
    )
    await make_worker(service, ALICE, 1)
    for item_id in ("a1", "a2", "a3"):
        await service.publish(PUB, "jobs", item_id, f"<j n='{item_id}'/>", 12)
        clock.advance(1)
    for item_id in ("a1", "a2"):
        await service.retract(ALICE, "jobs", item_id)  # ack: retained
        clock.advance(1)


async def _backlog(service: PubSubService) -> tuple[int, int]:
    details = await service.queue_details(SYSTEM, "jobs")
    return details.backlog, len(details.locks)


async def test_owner_takes_a_snapshot_lists_it_and_seeks_back_to_it(
    transcript: Transcript, service: PubSubService, clock: FakeClock
) -> None:
    await _retaining_queue(service, clock)  # a1, a2 acked; ALICE holds a3
    taken = await run(transcript, "snapshot", {"node": "jobs", "name": "before"}, OWNER.jid)
    assert note(taken) == "Took snapshot 'before' of 'jobs'."
    clock.advance(5)
    await service.retract(ALICE, "jobs", "a3")  # acked after the snapshot
    listed = await run(transcript, "snapshots", {"node": "jobs"}, OWNER.jid)
    assert [r["name"] for r in tables(listed)["snapshots"]] == ["before"]
    assert values(forms(listed)[0])["retained"] == ["3"]
    sought = await run(transcript, "seek", {"node": "jobs", "snapshot": "before"}, OWNER.jid)
    assert note(sought) == (
        "Sought 'jobs' to snapshot before: 1 item(s) waiting again, 2 still acked."
    )
    assert values(forms(sought)[0])["replayed"] == ["1"]
    # a3 is offered again (ALICE had room): its notification went out after the reply.
    assert await _backlog(service) == (0, 1)
    assert transcript.sent.effects
    async with service.store.transaction() as tx:
        kinds = [(e.kind, e.item_id) for e in await tx.ledger.events("jobs")]
    assert (EventKind.REPLAYED, "a3") in kinds and (EventKind.SNAPSHOT, "before") in kinds


async def test_admin_seeks_to_a_time_and_deletes_a_snapshot(
    transcript: Transcript, service: PubSubService, clock: FakeClock
) -> None:
    await _retaining_queue(service, clock)
    start = service.clock()
    await service.retract(ALICE, "jobs", "a3")
    # Everything published since 'start - 10 s' (all three) comes back.
    when = (start.replace(microsecond=0) - timedelta(seconds=10)).isoformat()
    sought = await run(transcript, "seek", {"node": "jobs", "to": when}, "admin@example.org/c")
    assert values(forms(sought)[0])["replayed"] == ["3"]
    assert await _backlog(service) == (2, 1)
    await run(transcript, "snapshot", {"node": "jobs", "name": "s1"}, "admin@example.org/c")
    gone = await run(transcript, "snapshot-delete", {"node": "jobs", "name": "s1"}, OWNER.jid)
    assert note(gone) == "Deleted snapshot 's1' of 'jobs'."
    listed = await run(transcript, "snapshots", {"node": "jobs"}, "admin@example.org/c")
    assert tables(listed)["snapshots"] == []


async def test_bad_input_changes_nothing_and_says_what_to_fix(
    transcript: Transcript, service: PubSubService, clock: FakeClock
) -> None:
    await _retaining_queue(service, clock)
    both = {"node": "jobs", "to": "2024-01-01T00:00:00Z", "snapshot": "x"}
    assert_bad_payload(await run(transcript, "seek", both, OWNER.jid), "exactly one")
    naive = {"node": "jobs", "to": "2024-01-01T00:00:00"}
    assert_bad_payload(await run(transcript, "seek", naive, OWNER.jid), "time zone")
    garbage = {"node": "jobs", "to": "yesterday"}
    assert_bad_payload(await run(transcript, "seek", garbage, OWNER.jid), "not a date-time")
    missing = {"node": "jobs", "snapshot": "nope"}
    assert_bad_payload(await run(transcript, "seek", missing, OWNER.jid), "no snapshot nope")
    assert await _backlog(service) == (0, 1)
    assert transcript.sent.effects == []


async def test_non_owners_see_the_replay_commands_but_the_core_refuses_them(
    transcript: Transcript, service: PubSubService, clock: FakeClock
) -> None:
    await _retaining_queue(service, clock)
    listed = await transcript.disco("items", COMMANDS_NS, ALICE.jid)
    found = listed.xml.findall("{http://jabber.org/protocol/disco#items}query/*")
    assert [i.get("node") for i in found if "push" not in i.get("node", "")] == REPLAY
    info = await transcript.disco("info", P + "seek", ALICE.jid)
    assert info["type"] == "result"
    # ALICE (a member, not an owner) may start the command but not seek.
    refused = await run(transcript, "seek", {"node": "jobs", "snapshot": "x"}, ALICE.jid)
    assert error_of(refused)[:2] == ("cancel", "forbidden")
    refused = await run(transcript, "snapshot", {"node": "jobs", "name": "x"}, ALICE.jid)
    assert error_of(refused)[:2] == ("cancel", "forbidden")
    async with service.store.transaction() as tx:
        assert await tx.nodes.snapshots("jobs") == []
    # The admin-only commands stay closed to her and to strangers alike.
    for who in (ALICE.jid, STRANGER):
        assert error_of(await transcript.execute(P + "purge", who))[1] == "forbidden"
