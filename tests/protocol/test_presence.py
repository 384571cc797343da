"""Workers going away (docs/queueing.md; XEP-0254 §4; XEP-0060 §13.4): presence and bounces."""

from __future__ import annotations

from tests.kit.stanzas import (
    ALICE,
    BOB,
    SERVICE,
    SUB_OPTIONS,
    Stream,
    find,
    local,
    make_queue,
    messages,
    publish,
    pubsub,
    submit,
)
from xmpp_queue.core.model import Actor
from xmpp_queue.runtime.presence import PresenceTracker


async def _alice_holds_job(stream: Stream, alice: str = ALICE) -> str:
    # XEP-0254 §4's immediate hand-over (retry delay 0) to see the item move on.
    await make_queue(stream, pubsub__queue_retry_delay="0")
    options = f"<options>{submit(SUB_OPTIONS, pubsub__queue_requests='1')}</options>"
    await stream.iq("set", alice, pubsub(f"<subscribe node='jobs' jid='{alice}'/>{options}"))
    _, out = await publish(stream, "jobs", "job1")
    [note] = messages(out)
    assert note.get("to") == alice
    return note.get("id", "")


async def _worker(stream: Stream, who: str) -> None:
    options = f"<options>{submit(SUB_OPTIONS, pubsub__queue_requests='1')}</options>"
    await stream.iq("set", who, pubsub(f"<subscribe node='jobs' jid='{who}'/>{options}"))


async def test_directed_presence_is_answered_once(stream: Stream) -> None:
    out = await stream.send(f"<presence from='{ALICE}' to='{SERVICE}'/>")
    [answer] = out
    assert local(answer) == "presence"
    assert (answer.get("to"), answer.get("from"), answer.get("type")) == (ALICE, SERVICE, None)
    out = await stream.send(f"<presence from='{ALICE}' to='{SERVICE}'><show>away</show></presence>")
    assert out == []


async def test_unavailable_worker_releases_its_items_and_subscription(stream: Stream) -> None:
    await _alice_holds_job(stream)
    await _worker(stream, BOB)
    await stream.send(f"<presence from='{ALICE}' to='{SERVICE}'/>")
    out = await stream.send(f"<presence type='unavailable' from='{ALICE}' to='{SERVICE}'/>")
    notes = messages(out)
    assert [m.get("to") for m in notes] == [BOB]  # the dead worker is not told
    assert find(notes[0], "ev:event/ev:items/ev:item").get("id") == "job1"
    assert await stream.service.own_subscriptions(Actor(ALICE), "jobs") == []


async def test_bare_subscription_released_when_the_last_resource_leaves(stream: Stream) -> None:
    account = "carol@example.org"
    await _alice_holds_job(stream, account)
    await _worker(stream, BOB)
    for res in ("one", "two"):
        await stream.send(f"<presence from='{account}/{res}' to='{SERVICE}'/>")
    out = await stream.send(f"<presence type='unavailable' from='{account}/one' to='{SERVICE}'/>")
    assert messages(out) == []
    assert await stream.service.own_subscriptions(Actor(account), "jobs") != []
    out = await stream.send(f"<presence type='unavailable' from='{account}/two' to='{SERVICE}'/>")
    assert [m.get("to") for m in messages(out)] == [BOB]
    assert await stream.service.own_subscriptions(Actor(account), "jobs") == []


async def test_13_4_cancel_bounce_of_a_notification_releases_the_worker(stream: Stream) -> None:
    note_id = await _alice_holds_job(stream)
    await _worker(stream, BOB)
    error = "<error type='{}'><{} xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error>"
    # not one of ours: ignored
    out = await stream.send(
        f"<message type='error' id='chat-1' from='{ALICE}' to='{SERVICE}'>"
        + error.format("cancel", "service-unavailable")
        + "</message>"
    )
    assert out == []
    # transient: only logged
    out = await stream.send(
        f"<message type='error' id='{note_id}' from='{ALICE}' to='{SERVICE}'>"
        + error.format("wait", "resource-constraint")
        + "</message>"
    )
    assert out == []
    out = await stream.send(
        f"<message type='error' id='{note_id}' from='{ALICE}' to='{SERVICE}'>"
        + error.format("cancel", "service-unavailable")
        + "</message>"
    )
    assert [m.get("to") for m in messages(out)] == [BOB]
    assert await stream.service.own_subscriptions(Actor(ALICE), "jobs") == []


async def test_tracker_rule_without_a_stream() -> None:
    released: list[str] = []

    async def release(jid: str, reason: str) -> None:
        released.append(jid)

    tracker = PresenceTracker(release)
    assert tracker.available("d@example.org/1")
    assert not tracker.available("d@example.org/1")
    assert tracker.available("d@example.org/2")
    await tracker.gone("d@example.org/1", "unavailable")
    assert released == ["d@example.org/1"]
    await tracker.gone("d@example.org/2", "unavailable")
    assert released == ["d@example.org/1", "d@example.org/2", "d@example.org"]
    await tracker.gone("e@example.org", "unavailable")  # a bare JID goes away
    assert released[-1] == "e@example.org"
    assert not tracker.is_available("d@example.org/2")
