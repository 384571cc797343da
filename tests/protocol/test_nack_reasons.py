"""A nack that says why (``<unlock xmlns='urn:xmpp-queue:0' reason='...'>``), on the
wire: the reason reaches the next delivery's headers and the dead letter's; a bad one
is refused and changes nothing (docs/queueing.md "Why it failed")."""

from __future__ import annotations

import json

from tests.kit.stanzas import (
    ALICE,
    BOB,
    NS,
    OWNER,
    Stream,
    error_of,
    find,
    make_node,
    make_queue,
    messages,
    publish,
    pubsub,
    subscribe_worker,
)


def headers_of(message: object) -> dict[str, str]:
    return {
        h.get("name"): h.text or ""
        for h in message.findall("shim:headers/shim:header", NS)  # type: ignore[attr-defined]
    }


async def _held_by_alice(stream: Stream, **config: str) -> None:
    await make_queue(stream, **({"pubsub__queue_retry_delay": "0"} | config))
    await subscribe_worker(stream, ALICE, 1)
    _, out = await publish(stream, "jobs", "job1")
    assert [m.get("to") for m in messages(out)] == [ALICE]


async def test_a_nack_reason_reaches_the_next_worker_in_its_headers(stream: Stream) -> None:
    await _held_by_alice(stream)
    await subscribe_worker(stream, BOB, 1)
    reply, out = await stream.iq(
        "set",
        ALICE,
        pubsub(
            "<unlock xmlns='urn:xmpp-queue:0' node='jobs' reason=\"ValueError: no 'id'\">"
            "<item id='job1'/></unlock>"
        ),
    )
    assert reply.get("type") == "result"
    to_bob = [m for m in messages(out) if m.get("to") == BOB]
    assert find(to_bob[0], "ev:event/ev:items/ev:item").get("id") == "job1"
    headers = headers_of(to_bob[0])
    assert headers["last-error"] == "ValueError: no 'id'"
    assert headers["delivery-attempt"] == "2"
    (entry,) = json.loads(headers["error-history"])
    assert entry["by"] == ALICE and entry["delivery"] == 1


async def test_a_dead_letter_carries_the_last_reason(stream: Stream) -> None:
    await make_node(stream, "jobs-dl")
    await stream.iq("set", OWNER, pubsub(f"<subscribe node='jobs-dl' jid='{OWNER}'/>"))
    await _held_by_alice(
        stream, pubsub__queue_max_deliveries="1", pubsub__queue_dead_letter="jobs-dl"
    )
    _, out = await stream.iq(
        "set",
        ALICE,
        pubsub(
            "<unlock xmlns='urn:xmpp-queue:0' node='jobs'>"
            "<item id='job1' reason='TimeoutError: upstream 503'/></unlock>"
        ),
    )
    dead = next(m for m in messages(out) if m.get("to") == OWNER)
    headers = headers_of(dead)
    assert headers["reason"] == "max-deliveries"
    assert headers["last-error"] == "TimeoutError: upstream 503"


async def test_a_reason_too_long_is_bad_request_and_the_lock_stays(stream: Stream) -> None:
    await _held_by_alice(stream)
    reason = "x" * 201
    reply, out = await stream.iq(
        "set",
        ALICE,
        pubsub(
            f"<unlock xmlns='urn:xmpp-queue:0' node='jobs' reason='{reason}'>"
            "<item id='job1'/></unlock>"
        ),
    )
    assert error_of(reply) == ("modify", "bad-request", None)
    assert "200 characters" in (reply.findtext(".//{*}text") or "")
    assert messages(out) == []
    again, _ = await stream.iq(  # still Alice's: her ack works
        "set", ALICE, pubsub("<retract node='jobs'><item id='job1'/></retract>")
    )
    assert again.get("type") == "result"
