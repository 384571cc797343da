"""Batches on the wire (issue 14): several items per notification, per retract, per
unlock. Names carry XEP-0060 §7.1.2.1 / §13.11, XEP-0254 §2.x, or this project's
``pubsub#queue_max_batch`` and ``<unlock xmlns='urn:xmpp-queue:0'/>``.
"""

from __future__ import annotations

from tests.kit.stanzas import (
    NS,
    PUB,
    SERVICE,
    SUB_OPTIONS,
    Stream,
    error_of,
    find,
    make_node,
    make_queue,
    messages,
    publish,
    pubsub,
    submit,
    subscribe_worker,
)

WORKER = "workerbee237@example.org/w1"  # a member of make_queue's whitelisted queue
QUEUE_EXT = "urn:xmpp-queue:0"
QUEUEING = "urn:xmpp:pubsub:queueing:0"
SHIM = "{http://jabber.org/protocol/shim}"


async def subscribe_batched(s: Stream, who: str, window: int, max_batch: int) -> str:
    form = submit(
        SUB_OPTIONS, pubsub__queue_requests=str(window), pubsub__queue_max_batch=str(max_batch)
    )
    reply, _ = await s.iq(
        "set", who, pubsub(f"<subscribe node='jobs' jid='{who}'/><options>{form}</options>")
    )
    assert reply.get("type") == "result"
    echo = find(reply, "ps:pubsub/ps:options/x:x")
    assert find(echo, "x:field[@var='pubsub#queue_max_batch']/x:value").text == str(max_batch)
    return find(reply, "ps:pubsub/ps:subscription").get("subid") or ""


def item_ids(message) -> list[str]:  # type: ignore[no-untyped-def]
    return [i.get("id") for i in message.findall("ev:event/ev:items/ev:item", NS)]


async def test_2_1_plain_subscription_echo_and_one_item_per_message(stream: Stream) -> None:
    """A plain XEP-0254 worker sees neither the option in its echo nor batches."""
    await make_queue(stream)
    for i in range(3):
        await publish(stream, "jobs", f"i{i}")
    reply = await subscribe_worker(stream, WORKER, 3)
    echo = find(reply, "ps:pubsub/ps:options/x:x")
    assert echo.find("x:field[@var='pubsub#queue_max_batch']", NS) is None
    options, _ = await stream.iq(
        "get", WORKER, pubsub(f"<options node='jobs' jid='{WORKER}'/>"), iq_id="o"
    )
    field = find(options, "ps:pubsub/ps:options/x:x/x:field[@var='pubsub#queue_max_batch']")
    assert find(field, "x:value").text == "1"


async def test_7_1_2_1_several_items_in_one_notification_with_their_own_headers(
    stream: Stream,
) -> None:
    await make_queue(stream)
    for i in range(5):
        await publish(stream, "jobs", f"i{i}", f"<job xmlns='urn:example'>{i}</job>")
    form = submit(SUB_OPTIONS, pubsub__queue_requests="4", pubsub__queue_max_batch="3")
    out = await stream.send(
        f"<iq type='set' id='s' from='{WORKER}' to='{SERVICE}'>"
        + pubsub(f"<subscribe node='jobs' jid='{WORKER}'/><options>{form}</options>")
        + "</iq>"
    )
    notes = messages(out)
    assert [item_ids(m) for m in notes] == [["i0", "i1", "i2"], ["i3"]]
    first = notes[0]
    assert first.get("type") == "headline"  # the default pubsub#notification_type
    items = first.findall("ev:event/ev:items/ev:item", NS)
    for n, item in enumerate(items):
        assert item[0].tag == "{urn:example}job" and item[0].text == str(n)
        headers = {h.get("name"): h.text for h in item.iter(f"{SHIM}header")}
        assert headers == {"delivery-attempt": "1"}
    # the message itself carries only the SubID
    top = first.find("shim:headers", NS)
    assert top is not None
    assert [h.get("name") for h in top] == ["SubID"]
    # a one-item notice is exactly as before: headers on the message
    single = notes[1].find("ev:event/ev:items/ev:item", NS)
    assert single is not None and len(single) == 1
    top_single = notes[1].find("shim:headers", NS)
    assert top_single is not None
    assert {h.get("name") for h in top_single} == {"delivery-attempt", "SubID"}


async def test_13_11_retract_with_several_items_acks_all_in_one_answer(stream: Stream) -> None:
    await make_queue(stream)
    subid = await subscribe_batched(stream, WORKER, 4, 4)
    for i in range(4):
        await publish(stream, "jobs", f"i{i}")
    body = "".join(f"<item id='i{i}'/>" for i in range(3))
    reply, out = await stream.iq("set", WORKER, pubsub(f"<retract node='jobs'>{body}</retract>"))
    assert reply.get("type") == "result"
    (ack,) = messages(out)
    retracts = ack.findall("ev:event/ev:items/ev:retract", NS)
    assert [r.get("id") for r in retracts] == ["i0", "i1", "i2"]
    top = ack.find("shim:headers", NS)
    assert top is not None and [h.text for h in top] == [subid]


async def test_13_11_retract_batch_fails_whole_with_the_first_failing_item(
    stream: Stream,
) -> None:
    await make_queue(stream)
    await subscribe_batched(stream, WORKER, 2, 2)
    await publish(stream, "jobs", "i0")
    await publish(stream, "jobs", "i1")
    body = "<item id='i0'/><item id='gone'/><item id='i1'/>"
    reply, out = await stream.iq("set", WORKER, pubsub(f"<retract node='jobs'>{body}</retract>"))
    assert error_of(reply) == ("cancel", "item-not-found", None)
    assert messages(out) == []
    # nothing was acked: both can still be acked
    ok, _ = await stream.iq(
        "set", WORKER, pubsub("<retract node='jobs'><item id='i0'/><item id='i1'/></retract>")
    )
    assert ok.get("type") == "result"


async def test_13_11_retract_item_without_id_is_item_required(stream: Stream) -> None:
    await make_node(stream, "news")
    reply, _ = await stream.iq(
        "set", PUB, pubsub("<retract node='news'><item id='a'/><item/></retract>")
    )
    assert error_of(reply)[1:] == ("bad-request", "item-required")


async def test_batch_unlock_in_our_namespace_is_all_or_none(stream: Stream) -> None:
    await make_queue(stream)
    await subscribe_batched(stream, WORKER, 3, 3)
    for i in range(3):
        await publish(stream, "jobs", f"i{i}")
    bad = f"<unlock xmlns='{QUEUE_EXT}' node='jobs'><item id='i0'/><item id='x'/></unlock>"
    reply, out = await stream.iq("set", WORKER, pubsub(bad))
    assert error_of(reply) == ("cancel", "item-not-found", None)
    assert messages(out) == []
    good = f"<unlock xmlns='{QUEUE_EXT}' node='jobs'><item id='i0'/><item id='i1'/></unlock>"
    reply, out = await stream.iq("set", WORKER, pubsub(good))
    assert reply.get("type") == "result"
    unlocked = [u.get("id") for m in messages(out) for u in m.iter(f"{{{QUEUEING}}}unlock")]
    assert unlocked == ["i0", "i1"]


async def test_2_4_xep_0254_unlock_stays_one_item(stream: Stream) -> None:
    await make_queue(stream)
    await subscribe_batched(stream, WORKER, 2, 2)
    await publish(stream, "jobs", "i0")
    await publish(stream, "jobs", "i1")
    two = f"<unlock xmlns='{QUEUEING}' node='jobs'><item id='i0'/><item id='i1'/></unlock>"
    reply, _ = await stream.iq("set", WORKER, pubsub(two))
    assert error_of(reply)[1] == "bad-request"
