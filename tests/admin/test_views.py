"""Queue overview, queue details and service status, through whole command sessions."""

from __future__ import annotations

from datetime import timedelta

from tests.kit.admin import (
    ALICE,
    BOB,
    OWNER,
    PUB,
    FakeClock,
    Transcript,
    assert_bad_payload,
    field_vars,
    form_of,
    forms,
    make_queue,
    make_worker,
    note,
    notes,
    options,
    publish,
    values,
)
from xmpp_queue import __version__
from xmpp_queue.core.node_config import NODE_CONFIG_FIELDS
from xmpp_queue.core.service import PubSubService

OVERVIEW = "xmpp-queue#overview"
DETAILS = "xmpp-queue#details"
STATUS = "xmpp-queue#status"


def rows(form: object) -> list[dict[str, object]]:
    """Each ``<item/>`` as var -> value, a list for the reported ``text-multi`` columns."""
    x = "{jabber:x:data}"
    reported = form.xml.find(f"{x}reported")  # type: ignore[attr-defined]
    multi = {f.get("var") for f in reported if f.get("type") == "text-multi"}
    out = []
    for item in form.xml.findall(f"{x}item"):  # type: ignore[attr-defined]
        row: dict[str, object] = {}
        for f in item.findall(f"{x}field"):
            found = [v.text or "" for v in f.findall(f"{x}value")]
            row[f.get("var")] = found if f.get("var") in multi else (found[0] if found else "")
        out.append(row)
    return out


def tables(reply: object) -> dict[str, list[dict[str, object]]]:
    """The reply's tables by the name in their hidden ``table`` field."""
    return {values(f)["table"][0]: rows(f) for f in forms(reply) if "table" in values(f)}


def datatypes(form: object) -> dict[str, str]:
    """Column or field var -> its XEP-0122 datatype."""
    found = {}
    for f in form.xml.iter("{jabber:x:data}field"):  # type: ignore[attr-defined]
        v = f.find("{http://jabber.org/protocol/xdata-validate}validate")
        if v is not None:
            found[f.get("var")] = v.get("datatype")
    return found


async def test_overview_is_a_reported_table_of_every_queue(
    transcript: Transcript, service: PubSubService, clock: FakeClock
) -> None:
    await make_queue(service, "jobs", max_deliveries="2", retry_delay="0")
    await make_queue(service, "mail")
    await service.create_node(OWNER, "plain", {})  # not a queue: not in the table
    await make_worker(service, ALICE, 1)
    await publish(service, "jobs", "i1", "i2", "i3")  # ALICE holds i1
    await service.retract(ALICE, "jobs", "i1")  # ack; ALICE gets i2
    await service.unlock(ALICE, "jobs", "i2")  # redelivery 1; back to ALICE (nobody else)
    await service.unlock(ALICE, "jobs", "i2")  # redelivery 2; dead-lettered; ALICE gets i3
    await publish(service, "jobs", "i4")
    clock.advance(75)

    reply = await transcript.execute(OVERVIEW)

    assert reply["command"]["status"] == "completed"
    (table,) = forms(reply)
    assert table["type"] == "result"
    assert list(table.get_reported()) == [
        "node",
        "backlog",
        "delayed",
        "in_flight",
        "subscribers",
        "oldest_waiting_seconds",
        "dead_letters",
        "acks_last_hour",
        "redeliveries_last_hour",
    ]
    assert all(f["label"] for f in table.get_reported().values())
    jobs, mail = rows(table)
    assert jobs == {
        "node": "jobs",
        "backlog": "1",
        "delayed": "0",
        "in_flight": "1",
        "subscribers": "1",
        "oldest_waiting_seconds": "75",
        "dead_letters": "1",
        "acks_last_hour": "1",
        "redeliveries_last_hour": "2",
    }
    assert mail["node"] == "mail" and mail["oldest_waiting_seconds"] == ""
    types = datatypes(table)
    assert (types["backlog"], types["oldest_waiting_seconds"]) == ("xs:integer", "xs:decimal")
    assert values(table)["table"] == ["queues"]
    assert note(reply) == "2 queue(s): 1 waiting, 1 in flight, 1 dead letter(s)."


async def test_details_count_delayed_items_apart_and_show_attributes(
    transcript: Transcript, service: PubSubService, clock: FakeClock
) -> None:
    """Issue 19: a delayed item is waiting but counted apart; locks and dead letters
    show the publisher's attributes (not the service's own headers)."""
    await make_queue(service, "jobs", max_deliveries="1", retry_delay="0")
    await make_worker(service, ALICE, 1)
    start = (clock.now + timedelta(minutes=5)).isoformat().replace("+00:00", "Z")
    await service.publish(PUB, "jobs", "held", "<j/>", 4, attributes={"Start": start})
    await service.publish(PUB, "jobs", "poison", "<j/>", 4, attributes={"tenant": "acme"})
    await service.unlock(ALICE, "jobs", "poison", reason="KeyError: 'sku'")  # dead-lettered
    await service.publish(PUB, "jobs", "now", "<j/>", 4, attributes={"tenant": "beta", "k": "v"})

    (row,) = rows(form_of(await transcript.execute(OVERVIEW)))
    assert (row["backlog"], row["delayed"], row["in_flight"]) == ("1", "1", "1")
    first = await transcript.execute(DETAILS)
    reply = await transcript.step(first, fields={"node": "jobs"})
    shown = values(form_of(reply))
    assert (shown["backlog"], shown["delayed"]) == (["1"], ["1"])
    found = tables(reply)
    (lock,) = found["locks"]
    assert (lock["item"], lock["attributes"]) == ("now", ["tenant=beta", "k=v"])
    (letter,) = found["dead_letters"]
    assert (letter["item"], letter["attributes"]) == ("poison", ["tenant=acme"])
    assert letter["deliveries"] == "1"
    assert letter["last_error"] == "KeyError: 'sku'", "why it failed (issue 24)"
    assert note(reply).startswith("'jobs': 1 waiting (1 delayed), 1 locked")


async def test_details_name_the_active_subscriber_of_a_single_active_queue(
    transcript: Transcript, service: PubSubService
) -> None:
    """Issue 20 point 3: the earliest subscriber is active; when it leaves, the
    details name the one that took over (and a plain queue has no such field)."""
    await make_queue(service, "jobs", single_active="1", retry_delay="0")
    await make_queue(service, "mail")
    alice = await make_worker(service, ALICE, 1)
    bob = await make_worker(service, BOB, 1)
    await publish(service, "jobs", "i1", "i2")

    async def details(node: str) -> dict[str, list[str]]:
        first = await transcript.execute(DETAILS)
        return values(form_of(await transcript.step(first, fields={"node": node})))

    assert (await details("jobs"))["active"] == [f"{ALICE.jid} {alice}"]
    assert "active" not in await details("mail")
    await service.unsubscribe(ALICE, "jobs", ALICE.jid)  # its lock on i1 goes to bob
    assert (await details("jobs"))["active"] == [f"{BOB.jid} {bob}"]


async def test_overview_counts_only_the_last_hour(
    transcript: Transcript, service: PubSubService, clock: FakeClock
) -> None:
    await make_queue(service)
    await make_worker(service, ALICE, 1)
    await publish(service, "jobs", "i1")
    await service.retract(ALICE, "jobs", "i1")
    clock.advance(3601)
    (row,) = rows(form_of(await transcript.execute(OVERVIEW)))
    assert row["acks_last_hour"] == "0"


async def test_overview_without_queues_is_an_empty_table(transcript: Transcript) -> None:
    reply = await transcript.execute(OVERVIEW)
    assert reply["command"]["status"] == "completed"
    assert rows(form_of(reply)) == []
    assert note(reply).startswith("0 queue(s)")


async def test_details_picks_a_queue_then_shows_config_subscribers_and_locks(
    transcript: Transcript, service: PubSubService, clock: FakeClock
) -> None:
    await make_queue(service, "jobs", lock_timeout="300")
    await make_queue(service, "mail")
    await service.create_node(OWNER, "plain", {})
    alice = await make_worker(service, ALICE, 2)
    bob = await make_worker(service, BOB, 1)
    await publish(service, "jobs", "i1", "i2", "i3", "i4")
    clock.advance(60)

    first = await transcript.execute(DETAILS)
    assert first["command"]["status"] == "executing"
    choice = form_of(first)
    assert choice["type"] == "form"
    field = choice.get_fields()["node"]
    assert (field["type"], field["required"]) == ("list-single", True)
    assert field["label"] and field["desc"]
    assert options(choice, "node") == ["jobs", "mail"]  # queue nodes only

    reply = await transcript.step(first, fields={"node": "jobs"})

    assert reply["command"]["status"] == "completed"
    shown = values(form_of(reply))
    assert shown["node"] == ["jobs"]
    assert shown["backlog"] == ["1"]
    assert shown["in_flight"] == ["3"]
    queue_vars = [f.var for f in NODE_CONFIG_FIELDS if f.queue_only]
    assert set(queue_vars) <= set(shown)
    assert shown["pubsub#queue_lock_timeout"] == ["300"]
    found = tables(reply)
    subscribers = sorted(found["subscribers"], key=lambda r: str(r["jid"]))
    assert [(r["jid"], r["subid"], r["queue_requests"], r["in_flight"]) for r in subscribers] == [
        ("alice@example.org/a", alice, "2", "2"),
        ("bob@example.org/b", bob, "1", "1"),
    ]
    assert {r["idle_seconds"] for r in subscribers} == {"60"}
    locks = found["locks"]
    assert len(locks) == 3
    assert {(r["locked_at"], r["expires_at"], r["expires_in_seconds"]) for r in locks} == {
        ("2026-01-01T12:00:00.000Z", "2026-01-01T12:05:00.000Z", "240")
    }
    assert {r["holder"] for r in locks} == {"alice@example.org/a", "bob@example.org/b"}
    assert found["dead_letters"] == []
    assert note(reply) == "'jobs': 1 waiting (0 delayed), 3 locked, 2 subscriber(s)."


async def test_details_of_an_unknown_node_is_bad_payload(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    first = await transcript.execute(DETAILS)
    reply = await transcript.step(first, fields={"node": "ghost"})
    assert_bad_payload(reply, "no such node: ghost")
    # The session stays open: the admin fixes the form and resubmits.
    again = await transcript.step(first, fields={"node": "jobs"})
    assert again["command"]["status"] == "completed"


async def test_details_of_a_plain_node_is_bad_payload(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    await service.create_node(OWNER, "plain", {})
    first = await transcript.execute(DETAILS)
    assert_bad_payload(await transcript.step(first, fields={"node": "plain"}), "not a queue")


async def test_details_without_a_node_or_with_two_is_bad_payload(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    first = await transcript.execute(DETAILS)
    assert_bad_payload(await transcript.step(first, fields={}), "Node is required")
    assert_bad_payload(await transcript.step(first), "Node is required")  # no form at all
    two = await transcript.step(first, fields={"node": ["jobs", "mail"]})
    assert_bad_payload(two, "expected one value")


async def test_details_without_queues_completes_with_a_warning(transcript: Transcript) -> None:
    reply = await transcript.execute(DETAILS)
    assert reply["command"]["status"] == "completed"
    assert notes(reply) == [("warn", "There are no queue nodes.")]


async def test_status_shows_version_uptime_redacted_database_and_counts(
    transcript: Transcript, service: PubSubService, clock: FakeClock
) -> None:
    await make_queue(service)
    await service.create_node(OWNER, "plain", {})
    await make_worker(service, ALICE, 1)
    await publish(service, "jobs", "i1", "i2")
    clock.advance(3725)

    reply = await transcript.execute(STATUS)

    assert reply["command"]["status"] == "completed"
    form = form_of(reply)
    assert form["type"] == "result"
    shown = values(form)
    assert shown["version"] == [__version__]
    assert shown["uptime_seconds"] == ["3725"]
    assert shown["started"] == ["2026-01-01T12:00:00.000Z"]
    assert datatypes(form)["started"] == "xs:dateTime"
    assert shown["database"] == ["postgresql+asyncpg://queue:***@db.example.org:5432/queue"]
    assert "hunter2" not in str(reply)
    assert (shown["nodes"], shown["queues"], shown["items"]) == (["2"], ["1"], ["2"])
    assert (shown["subscriptions"], shown["locks"]) == (["1"], ["1"])
    assert field_vars(form)[:2] == ["version", "started"]
    assert note(reply).startswith(f"xmpp-queue {__version__}, up 1h 02m: 2 node(s)")
