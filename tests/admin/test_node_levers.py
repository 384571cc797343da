"""Purge queue, delete node and create node, through whole command sessions."""

from __future__ import annotations

from tests.kit.admin import (
    ALICE,
    BOB,
    OWNER,
    Transcript,
    assert_bad_payload,
    form_of,
    ledger,
    make_queue,
    note,
    notes,
    options,
    seeded,
)
from xmpp_queue.core.effects import DeleteNotice, PurgeNotice, UnlockNotice
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import SYSTEM
from xmpp_queue.core.node_config import NODE_CONFIG_FIELDS
from xmpp_queue.core.service import PubSubService

PURGE = "xmpp-queue#purge"
DELETE = "xmpp-queue#delete-node"
CREATE = "xmpp-queue#create-node"


async def test_purge_asks_for_confirmation_then_purges_and_notifies(
    transcript: Transcript, service: PubSubService
) -> None:
    await seeded(service)
    await service.create_node(OWNER, "plain", {})
    first = await transcript.execute(PURGE)
    assert options(form_of(first), "node") == ["jobs", "plain"]
    confirm = await transcript.step(first, fields={"node": "jobs"})
    question = form_of(confirm)
    assert "1 waiting and 2 locked item(s); 2 subscriber(s)" in str(question)
    field = question.get_fields()["confirm"]
    assert (field["type"], field["value"], field["required"]) == ("boolean", False, True)
    assert confirm["command"]["actions"] == {"complete", "prev"}
    assert transcript.sent.effects == []

    done = await transcript.step(confirm, action="complete", fields={"confirm": "1"})

    assert done["command"]["status"] == "completed"
    assert note(done) == "Purged 3 item(s) from 'jobs'; subscribers and lock holders were told."
    assert (await service.queue_details(SYSTEM, "jobs")).backlog == 0
    effects = transcript.sent.effects
    assert {(type(e), e.to) for e in effects} == {
        (UnlockNotice, ALICE.jid),
        (UnlockNotice, BOB.jid),
        (PurgeNotice, ALICE.jid),
        (PurgeNotice, BOB.jid),
    }
    purged = [row for row in await ledger(service, "jobs") if row[0] is EventKind.PURGED]
    assert sorted(r[1] for r in purged) == ["i1", "i2", "i3"]


async def test_purge_by_admin_equals_purge_by_owner(
    transcript: Transcript, service: PubSubService, other_service: PubSubService
) -> None:
    """Issue 4 §3: the same notifications and ledger rows as the protocol operation."""
    await seeded(service)
    await seeded(other_service)
    by_owner = await other_service.purge_node(OWNER, "jobs")
    first = await transcript.execute(PURGE)
    confirm = await transcript.step(first, fields={"node": "jobs"})
    await transcript.step(confirm, fields={"confirm": "true"})
    assert transcript.sent.effects == list(by_owner.effects)
    assert await ledger(service, "jobs") == await ledger(other_service, "jobs")


async def test_purge_not_confirmed_changes_nothing(
    transcript: Transcript, service: PubSubService
) -> None:
    await seeded(service)
    first = await transcript.execute(PURGE)
    confirm = await transcript.step(first, fields={"node": "jobs"})
    done = await transcript.step(confirm, fields={"confirm": "0"})
    assert done["command"]["status"] == "completed"
    assert notes(done) == [("warn", "Nothing purged: 'jobs' was not confirmed.")]
    assert (await service.queue_details(SYSTEM, "jobs")).backlog == 1
    assert transcript.sent.effects == []


async def test_purge_with_a_bad_boolean_is_bad_payload(
    transcript: Transcript, service: PubSubService
) -> None:
    await seeded(service)
    first = await transcript.execute(PURGE)
    confirm = await transcript.step(first, fields={"node": "jobs"})
    assert_bad_payload(await transcript.step(confirm, fields={"confirm": "yes"}), "'yes'")


async def test_purge_of_a_node_deleted_meanwhile_is_bad_payload(
    transcript: Transcript, service: PubSubService
) -> None:
    await seeded(service)
    first = await transcript.execute(PURGE)
    confirm = await transcript.step(first, fields={"node": "jobs"})
    await service.delete_node(OWNER, "jobs")
    assert_bad_payload(await transcript.step(confirm, fields={"confirm": "1"}), "no such node")


async def test_purge_of_an_unknown_node_is_bad_payload(
    transcript: Transcript, service: PubSubService
) -> None:
    await seeded(service)
    first = await transcript.execute(PURGE)
    assert_bad_payload(await transcript.step(first, fields={"node": "ghost"}), "ghost")


async def test_purge_without_nodes_completes_with_a_warning(transcript: Transcript) -> None:
    reply = await transcript.execute(PURGE)
    assert notes(reply) == [("warn", "There are no nodes.")]


async def test_delete_node_confirms_then_deletes_and_notifies(
    transcript: Transcript, service: PubSubService
) -> None:
    await seeded(service)
    first = await transcript.execute(DELETE)
    confirm = await transcript.step(first, fields={"node": "jobs"})
    assert form_of(confirm).get_fields()["confirm"]["type"] == "boolean"
    done = await transcript.step(confirm, fields={"confirm": "1"})
    assert note(done) == "Deleted node 'jobs'; its subscribers were told."
    assert "jobs" not in [n.node_id for n in await service.list_nodes(SYSTEM)]
    kinds = {(type(e), e.to) for e in transcript.sent.effects}
    assert {(DeleteNotice, ALICE.jid), (DeleteNotice, BOB.jid)} <= kinds
    assert {(UnlockNotice, ALICE.jid), (UnlockNotice, BOB.jid)} <= kinds


async def test_delete_node_not_confirmed_keeps_it(
    transcript: Transcript, service: PubSubService
) -> None:
    await seeded(service)
    first = await transcript.execute(DELETE)
    confirm = await transcript.step(first, fields={"node": "jobs"})
    done = await transcript.step(confirm, fields={})
    assert notes(done) == [("warn", "Nothing deleted: 'jobs' was not confirmed.")]
    assert (await service.get_node(SYSTEM, "jobs")).node_id == "jobs"


async def test_create_node_form_derives_from_the_config_table(
    transcript: Transcript, service: PubSubService
) -> None:
    first = await transcript.execute(CREATE)
    form = form_of(first)
    fields = form.get_fields()
    assert fields["node"]["type"] == "text-single" and fields["node"]["required"]
    queue_specs = [f for f in NODE_CONFIG_FIELDS if f.queue_only]
    for spec in queue_specs:
        assert fields[spec.var]["type"] == spec.kind
        assert fields[spec.var]["label"] == spec.label
    assert fields["pubsub#queue"]["type"] == "boolean"
    assert fields["pubsub#queue"]["value"] is True
    assert fields["pubsub#queue_lock_timeout"]["value"] == "300"
    validate = fields["pubsub#queue_lock_timeout"].xml.find(
        "{http://jabber.org/protocol/xdata-validate}validate"
    )
    assert validate is not None and validate.get("datatype") == "xs:integer"
    assert first["command"]["actions"] == {"complete"}


async def test_create_queue_node(transcript: Transcript, service: PubSubService) -> None:
    first = await transcript.execute(CREATE)
    done = await transcript.step(
        first,
        fields={
            "node": "orders",
            "pubsub#queue": "1",
            "pubsub#queue_lock_timeout": "60",
            "pubsub#queue_max_deliveries": "5",
            "pubsub#queue_dead_letter": "",
        },
    )
    assert done["command"]["status"] == "completed"
    assert note(done) == "Created queue node 'orders' (lock timeout 60 s, max deliveries 5)."
    config = await service.get_config(SYSTEM, "orders")
    assert (config.queue, config.queue_lock_timeout, config.queue_max_deliveries) == (True, 60, 5)


async def test_create_plain_node(transcript: Transcript, service: PubSubService) -> None:
    first = await transcript.execute(CREATE)
    done = await transcript.step(first, fields={"node": "news", "pubsub#queue": "0"})
    assert note(done) == "Created node 'news' (not a queue)."
    assert not (await service.get_config(SYSTEM, "news")).queue


async def test_create_existing_node_is_bad_payload(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    first = await transcript.execute(CREATE)
    assert_bad_payload(await transcript.step(first, fields={"node": "jobs"}), "already exists")


async def test_create_without_id_or_with_bad_values_is_bad_payload(
    transcript: Transcript, service: PubSubService
) -> None:
    first = await transcript.execute(CREATE)
    assert_bad_payload(await transcript.step(first, fields={"node": " "}), "Node id is required")
    negative = await transcript.step(
        first, fields={"node": "orders", "pubsub#queue_lock_timeout": "-5"}
    )
    assert_bad_payload(negative, "Seconds a subscriber holds an item", "at least 1")
    word = await transcript.step(
        first, fields={"node": "orders", "pubsub#queue_max_deliveries": "x"}
    )
    assert_bad_payload(word, "Deliveries before an item is dead-lettered", "integer")
    assert await service.list_nodes(SYSTEM) == []  # a refused form creates nothing


async def test_move_node_on_an_unsharded_service_says_so_and_changes_nothing(
    transcript: Transcript, service: PubSubService
) -> None:
    """The sharded flow (pick node and shard, moved) runs against real shards in
    tests/integration/test_shard_moves.py; the mover in tests/storage."""
    await seeded(service)
    done = await transcript.execute("xmpp-queue#move-node")
    assert done["command"]["status"] == "completed"
    assert "not sharded" in note(done)
    assert (await service.queue_details(SYSTEM, "jobs")).backlog == 1
