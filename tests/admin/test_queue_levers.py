"""Unlock, redrive, kick and configure, through whole command sessions."""

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
    make_worker,
    note,
    notes,
    options,
    publish,
    seeded,
    values,
)
from xmpp_queue.core.effects import Effect, ItemNotice, UnlockNotice
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import SYSTEM
from xmpp_queue.core.service import PubSubService

UNLOCK = "xmpp-queue#unlock"
REDRIVE = "xmpp-queue#redrive"
KICK = "xmpp-queue#kick"
CONFIGURE = "xmpp-queue#configure"


def shape(effects: list[Effect] | tuple[Effect, ...]) -> list[tuple[str, str, str]]:
    """(kind, recipient, item) of each effect: what must match the protocol path."""
    out = []
    for e in effects:
        if isinstance(e, UnlockNotice):
            out.append(("unlock", e.to, e.item_id))
        elif isinstance(e, ItemNotice):
            out.append(("item", e.to, e.items[0].item_id))
        else:
            out.append((type(e).__name__, e.to, ""))
    return out


async def locked_by(service: PubSubService, node: str = "jobs") -> dict[str, str | None]:
    details = await service.queue_details(SYSTEM, node)
    return {item.item_id: item.lock_jid for item in details.locks}


# --- unlock -------------------------------------------------------------------------------


async def test_unlock_one_item_tells_its_holder_and_redispatches(
    transcript: Transcript, service: PubSubService
) -> None:
    await seeded(service)  # ALICE holds i1, BOB holds i2, i3 waits
    await service.create_node(OWNER, "plain", {})
    first = await transcript.execute(UNLOCK)
    assert options(form_of(first), "node") == ["jobs"]
    pick = await transcript.step(first, fields={"node": "jobs"})
    form = form_of(pick)
    fields = form.get_fields()
    assert fields["item"]["type"] == "list-single"
    assert fields["holder"]["type"] == "jid-single"
    assert options(form, "item") == ["i1", "i2"]
    assert "alice@example.org/a" in fields["holder"]["desc"]

    done = await transcript.step(pick, fields={"item": "i1"})

    assert note(done) == "Unlocked item 'i1' of 'jobs'; its holder was told."
    # ALICE is told; BOB is full, so the next free slot (ALICE's) gets the oldest item.
    assert shape(transcript.sent.effects) == [
        ("unlock", ALICE.jid, "i1"),
        ("item", ALICE.jid, "i1"),
    ]
    (unlock,) = [e for e in transcript.sent.effects if isinstance(e, UnlockNotice)]
    assert unlock.reason == "admin"


async def test_unlock_by_admin_equals_unlock_by_holder(
    transcript: Transcript, service: PubSubService, other_service: PubSubService
) -> None:
    """Issue 4 §3: the same notifications and ledger rows as XEP-0254 §2.4's unlock."""
    await seeded(service)
    await seeded(other_service)
    by_holder = await other_service.unlock(ALICE, "jobs", "i1")
    first = await transcript.execute(UNLOCK)
    pick = await transcript.step(first, fields={"node": "jobs"})
    await transcript.step(pick, fields={"item": "i1"})
    assert by_holder.effects
    assert shape(transcript.sent.effects) == shape(by_holder.effects)
    assert await ledger(service, "jobs") == await ledger(other_service, "jobs")


async def test_unlock_every_item_of_one_holder(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    await make_worker(service, ALICE, 2)
    await make_worker(service, BOB, 2)
    await publish(service, "jobs", "i1", "i2", "i3", "i4")
    assert sorted(await locked_by(service)) == ["i1", "i2", "i3", "i4"]
    first = await transcript.execute(UNLOCK)
    pick = await transcript.step(first, fields={"node": "jobs"})
    done = await transcript.step(pick, fields={"holder": "bob@example.org/b"})
    assert note(done) == "Unlocked 2 item(s) of 'jobs' held by bob@example.org/b; it was told."
    told = [e for e in transcript.sent.effects if isinstance(e, UnlockNotice)]
    assert sorted((e.to, e.item_id) for e in told) == [(BOB.jid, "i2"), (BOB.jid, "i4")]
    unlocked = [r for r in await ledger(service, "jobs") if r[0] is EventKind.UNLOCKED]
    assert sorted(r[1] for r in unlocked) == ["i2", "i4"]


async def test_unlock_for_a_holder_without_items_warns(
    transcript: Transcript, service: PubSubService
) -> None:
    await seeded(service)
    first = await transcript.execute(UNLOCK)
    pick = await transcript.step(first, fields={"node": "jobs"})
    done = await transcript.step(pick, fields={"holder": "carol@example.org"})
    assert notes(done) == [("warn", "carol@example.org holds no item of 'jobs'; nothing changed.")]
    assert transcript.sent.effects == []


async def test_unlock_of_a_waiting_item_warns(
    transcript: Transcript, service: PubSubService
) -> None:
    await seeded(service)
    first = await transcript.execute(UNLOCK)
    pick = await transcript.step(first, fields={"node": "jobs"})
    done = await transcript.step(pick, fields={"item": "i3"})
    assert notes(done) == [("warn", "Item 'i3' of 'jobs' was no longer locked.")]


async def test_unlock_bad_input_is_bad_payload(
    transcript: Transcript, service: PubSubService
) -> None:
    await seeded(service)
    first = await transcript.execute(UNLOCK)
    pick = await transcript.step(first, fields={"node": "jobs"})
    both = await transcript.step(pick, fields={"item": "i1", "holder": "bob@example.org/b"})
    assert_bad_payload(both, "exactly one")
    assert_bad_payload(await transcript.step(pick, fields={"item": ""}), "exactly one")
    bad_jid = await transcript.step(pick, fields={"holder": "bob@@example.org"})
    assert_bad_payload(bad_jid, "Holder JID", "not a valid JID")
    assert_bad_payload(await transcript.step(pick, fields={"item": "nope"}), "no item nope")
    assert transcript.sent.effects == []
    assert await locked_by(service) == {"i1": ALICE.jid, "i2": BOB.jid}


async def test_unlock_of_a_plain_node_is_bad_payload(
    transcript: Transcript, service: PubSubService
) -> None:
    await seeded(service)
    await service.create_node(OWNER, "plain", {})
    first = await transcript.execute(UNLOCK)
    assert_bad_payload(await transcript.step(first, fields={"node": "plain"}), "not a queue")


async def test_unlock_without_locks_completes_with_a_warning(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    first = await transcript.execute(UNLOCK)
    done = await transcript.step(first, fields={"node": "jobs"})
    assert done["command"]["status"] == "completed"
    assert notes(done) == [("warn", "No item of 'jobs' is locked; nothing to unlock.")]


# --- redrive ------------------------------------------------------------------------------


async def dead_letters(service: PubSubService) -> None:
    """jobs (max 1 delivery) with two items in jobs/dead-letter and an idle worker."""
    await make_queue(service, max_deliveries="1")
    await make_worker(service, ALICE, 1)
    await publish(service, "jobs", "i1", "i2")
    await service.unlock(ALICE, "jobs", "i1")  # past its limit: dead-lettered; ALICE gets i2
    await service.unlock(ALICE, "jobs", "i2")


async def dead_ids(service: PubSubService) -> list[str]:
    page = await service.get_items(SYSTEM, "jobs/dead-letter")
    return [i.item_id for i in page.items]


async def test_redrive_some_dead_letters(transcript: Transcript, service: PubSubService) -> None:
    await dead_letters(service)
    assert await dead_ids(service) == ["i1", "i2"]
    first = await transcript.execute(REDRIVE)
    form = form_of(first)
    assert options(form, "node") == ["jobs/dead-letter"]
    assert form.get_fields()["count"]["type"] == "text-single"
    done = await transcript.step(first, fields={"node": "jobs/dead-letter", "count": "1"})
    assert note(done) == "Moved 1 item(s) from 'jobs/dead-letter' back to their queue."
    assert await dead_ids(service) == ["i2"]
    assert shape(transcript.sent.effects) == [("item", ALICE.jid, "i1")]


async def test_redrive_all_dead_letters(transcript: Transcript, service: PubSubService) -> None:
    await dead_letters(service)
    first = await transcript.execute(REDRIVE)
    done = await transcript.step(first, fields={"node": "jobs/dead-letter", "count": ""})
    assert note(done) == "Moved 2 item(s) from 'jobs/dead-letter' back to their queue."
    assert await dead_ids(service) == []
    details = await service.queue_details(SYSTEM, "jobs")
    assert (details.backlog, len(details.locks)) == (1, 1)


async def test_redrive_counts_must_be_positive_whole_numbers(
    transcript: Transcript, service: PubSubService
) -> None:
    await dead_letters(service)
    first = await transcript.execute(REDRIVE)
    for raw, words in (
        ("-1", ("How many", "must not be negative")),
        ("0", ("How many", "at least 1")),
        ("two", ("How many", "'two' is not a whole number")),
    ):
        reply = await transcript.step(first, fields={"node": "jobs/dead-letter", "count": raw})
        assert_bad_payload(reply, *words)
    assert await dead_ids(service) == ["i1", "i2"]


async def test_redrive_of_an_unknown_node_is_bad_payload(
    transcript: Transcript, service: PubSubService
) -> None:
    await dead_letters(service)
    first = await transcript.execute(REDRIVE)
    assert_bad_payload(await transcript.step(first, fields={"node": "ghost"}), "no such node")


async def test_redrive_without_dead_letter_nodes_warns(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    reply = await transcript.execute(REDRIVE)
    assert notes(reply) == [("warn", "No dead-letter node exists yet.")]


# --- kick ---------------------------------------------------------------------------------


async def test_kick_unsubscribes_and_releases_the_subscribers_items(
    transcript: Transcript, service: PubSubService
) -> None:
    await seeded(service)
    first = await transcript.execute(KICK)
    pick = await transcript.step(first, fields={"node": "jobs"})
    form = form_of(pick)
    assert form.get_fields()["jid"]["type"] == "jid-single"
    assert "alice@example.org/a (subid" in str(form)
    done = await transcript.step(pick, fields={"jid": "alice@example.org/a"})
    assert note(done) == (
        "Unsubscribed alice@example.org/a from 'jobs'; 1 locked item(s) were released."
    )
    subs = await service.get_node_subscriptions(SYSTEM, "jobs")
    assert [s.jid for s in subs] == [BOB.jid]
    assert ("unlock", ALICE.jid, "i1") in shape(transcript.sent.effects)
    assert (await locked_by(service)) == {"i2": BOB.jid}


async def test_kick_bad_input_is_bad_payload(
    transcript: Transcript, service: PubSubService
) -> None:
    await seeded(service)
    first = await transcript.execute(KICK)
    pick = await transcript.step(first, fields={"node": "jobs"})
    assert_bad_payload(await transcript.step(pick, fields={}), "Subscriber JID is required")
    assert_bad_payload(await transcript.step(pick, fields={"jid": "a@b@c"}), "not a valid JID")
    stranger = await transcript.step(pick, fields={"jid": "carol@example.org"})
    assert_bad_payload(stranger, "carol@example.org has no subscription to jobs")
    assert len(await service.get_node_subscriptions(SYSTEM, "jobs")) == 2


async def test_kick_on_a_node_without_subscribers_warns(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    first = await transcript.execute(KICK)
    done = await transcript.step(first, fields={"node": "jobs"})
    assert notes(done) == [("warn", "'jobs' has no subscribers; nothing to do.")]


# --- configure ----------------------------------------------------------------------------


async def test_configure_shows_current_values_and_applies_changes(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service, lock_timeout="120")
    first = await transcript.execute(CONFIGURE)
    edit = await transcript.step(first, fields={"node": "jobs"})
    current = values(form_of(edit))
    assert current["pubsub#queue_lock_timeout"] == ["120"]
    assert current["pubsub#queue_max_deliveries"] == ["10"]  # the safe default
    assert "pubsub#queue_dead_letter" in current and "pubsub#queue_retry_delay" in current
    assert "pubsub#title" not in current  # queue fields only
    done = await transcript.step(
        edit,
        fields={
            "pubsub#queue_lock_timeout": "60",
            "pubsub#queue_max_deliveries": "3",
            "pubsub#queue_dead_letter": "jobs-failed",
            "pubsub#queue_retry_delay": "0",
        },
    )
    text = note(done)
    assert text.startswith("Configured 'jobs'. ")
    assert "120 -> 60" in text and "0 -> 3" in text and " -> jobs-failed" in text
    config = await service.get_config(SYSTEM, "jobs")
    assert (config.queue_lock_timeout, config.queue_max_deliveries) == (60, 3)
    assert config.queue_dead_letter == "jobs-failed"


async def test_configure_without_changes_says_so(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    first = await transcript.execute(CONFIGURE)
    edit = await transcript.step(first, fields={"node": "jobs"})
    done = await transcript.step(edit, fields={"pubsub#queue_lock_timeout": "300"})
    assert note(done) == "No value of 'jobs' changed."


async def test_configure_bad_values_are_bad_payload(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    first = await transcript.execute(CONFIGURE)
    edit = await transcript.step(first, fields={"node": "jobs"})
    negative = await transcript.step(edit, fields={"pubsub#queue_retry_delay": "-3"})
    assert_bad_payload(negative, "Seconds before an unlocked or expired item", "at least 0")
    word = await transcript.step(edit, fields={"pubsub#queue_lock_timeout": "soon"})
    assert_bad_payload(word, "expected an integer")
    itself = await transcript.step(edit, fields={"pubsub#queue_dead_letter": "jobs"})
    assert_bad_payload(itself, "must name another node")
    assert (await service.get_config(SYSTEM, "jobs")).queue_lock_timeout == 300


async def test_configure_of_a_plain_node_is_bad_payload(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    await service.create_node(OWNER, "plain", {})
    first = await transcript.execute(CONFIGURE)
    assert_bad_payload(
        await transcript.step(first, fields={"node": "plain"}), "'plain' is not a queue node"
    )
