"""The message model on the wire, behind Prosody and behind ejabberd (issue 19):
XEP-0131 headers inside ``<item/>`` as attributes, delayed delivery by ``Start``,
expiry by ``TTL``, ``Urgency`` order, the dedup window, and the refusals
(test_message_model_restart.py restarts a component with such work in it).

Raw stanzas from slixmpp clients, as a worker in any language would send them.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.integration.queue_helpers import (
    EXAMPLE_NS,
    PUBSUB,
    SUBSCRIBE_OPTIONS,
    TIMEOUT,
    Inbox,
    create_queue,
    expect_error,
    form_xml,
    iq,
    items,
    match,
    retract_iq,
    send,
    subscribe_queue,
    unique,
    unlock_iq,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

SHIM = "http://jabber.org/protocol/shim"


def zulu(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def publish_iq(client, node: str, item_id: str, **attributes: str):  # type: ignore[no-untyped-def]
    headers = "".join(f"<header name='{k}'>{v}</header>" for k, v in attributes.items())
    shim = f"<headers xmlns='{SHIM}'>{headers}</headers>" if attributes else ""
    body = (
        f"<pubsub xmlns='{PUBSUB}'><publish node='{node}'><item id='{item_id}'>"
        f"<example xmlns='{EXAMPLE_NS}'>{item_id}</example>{shim}</item></publish></pubsub>"
    )
    return iq(client, body)


async def put(client, node: str, item_id: str, **attributes: str) -> None:  # type: ignore[no-untyped-def]
    await send(publish_iq(client, node, item_id, **attributes))


def stored_headers(reply) -> dict[str, dict[str, str]]:  # type: ignore[no-untyped-def]
    found = {}
    for item in reply.xml.iter(f"{{{PUBSUB}}}item"):
        shim = item.find(f"{{{SHIM}}}headers")
        found[item.get("id")] = {} if shim is None else {h.get("name"): h.text or "" for h in shim}
    return found


async def test_attributes_travel_in_the_item_and_reach_the_worker(connect):
    alice, w1 = await connect("alice"), await connect("w1")
    node = await create_queue(alice)
    inbox = Inbox(w1)
    await subscribe_queue(w1, node, 1)
    await put(alice, node, "a", region="eu", Urgency="high")
    event = await inbox.next(match("item", node, "a"), TIMEOUT)
    assert event.headers["region"] == "eu" and event.headers["delivery-attempt"] == "1"
    assert stored_headers(await items(alice, node))["a"]["region"] == "eu"


async def test_a_batched_notice_and_a_redelivery_keep_each_items_attributes(connect, pool):
    """Several items in one message (pubsub#queue_max_batch): each <item/> carries its
    own headers; a nacked item comes back with its attributes and the next attempt.

    The worker is a client of its own without slixmpp's XEP-0060 event handler: that
    handler (slixmpp 1.17) raises on any several-item event, and slixmpp then answers
    the notification with an error, which the service takes for a bounce and releases
    the worker (docs/queueing.md, "Batches")."""
    alice = await connect("alice")
    w1 = await pool.get("w1", fresh=True, resource=unique("batch"))
    w1.remove_handler("Pubsub Event: Items")
    node = await create_queue(alice, queue_retry_delay="0")
    await put(alice, node, "a", tenant="acme")
    await put(alice, node, "b", tenant="beta", Urgency="low")
    inbox = Inbox(w1)
    options = {"pubsub#queue_requests": 2, "pubsub#queue_max_batch": 2}
    sub = iq(
        w1,
        f"<pubsub xmlns='{PUBSUB}'><subscribe node='{node}' jid='{w1.boundjid}'/>"
        "<options/></pubsub>",
    )
    sub.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}options").append(  # type: ignore[union-attr]
        form_xml(SUBSCRIBE_OPTIONS, options)
    )
    await send(sub)
    a, b = await inbox.collect(2, match("item", node))
    assert a.message is b.message, "one notification carries both"
    assert (a.item_id, a.headers["tenant"], a.headers["delivery-attempt"]) == ("a", "acme", "1")
    assert (b.item_id, b.headers["tenant"], b.headers["Urgency"]) == ("b", "beta", "low")
    await send(unlock_iq(w1, node, "a"))
    again = await inbox.next(match("item", node, "a"))
    assert (again.headers["tenant"], again.headers["delivery-attempt"]) == ("acme", "2")


async def test_drop_oldest_tells_the_subscriber_how_much_was_truncated(connect):
    alice, w1 = await connect("alice"), await connect("w1")
    node = await create_queue(alice, max_items="2", queue_overflow="drop-oldest")
    inbox = Inbox(w1)
    await subscribe_queue(w1, node, 1)
    await put(alice, node, "x1")
    await inbox.next(match("item", node, "x1"))  # held
    for item_id in ("x2", "x3"):  # x3 takes the room of waiting x2
        await put(alice, node, item_id)
    told = await inbox.next(match(node=node, kind="other:{urn:xmpp-queue:0}truncated"))
    assert (told.attrs["items"], told.headers["reason"]) == ("1", "truncated")
    assert sorted(stored_headers(await items(alice, node))) == ["x1", "x3"]
    await send(retract_iq(w1, node, "x1"))
    assert (await inbox.next(match("item", node))).item_id == "x3"


async def test_delayed_item_waits_for_its_start(connect):
    alice, w1 = await connect("alice"), await connect("w1")
    node = await create_queue(alice)
    inbox = Inbox(w1)
    await subscribe_queue(w1, node, 5)
    start = datetime.now(UTC) + timedelta(seconds=2)
    await put(alice, node, "later", Start=zulu(start))
    await put(alice, node, "now")
    assert (await inbox.next(match("item", node), TIMEOUT)).item_id == "now"
    await inbox.next(match("item", node, "later"), TIMEOUT)
    assert time.time() >= start.timestamp() - 0.05  # never before its start


async def test_urgency_orders_the_backlog(connect):
    alice, w1 = await connect("alice"), await connect("w1")
    node = await create_queue(alice)
    for item_id, urgency in (("n1", "medium"), ("n2", "low"), ("n3", "medium"), ("u", "high")):
        await put(alice, node, item_id, Urgency=urgency)
    inbox = Inbox(w1)
    await subscribe_queue(w1, node, 1)
    order = []
    for _ in range(4):
        event = await inbox.next(match("item", node), TIMEOUT)
        order.append(event.item_id)
        await send(retract_iq(w1, node, event.item_id))
    assert order == ["u", "n1", "n3", "n2"]


async def test_an_expired_item_goes_to_the_dead_letters_not_to_a_worker(connect):
    alice, w1 = await connect("alice"), await connect("w1")
    node = await create_queue(alice)
    await put(alice, node, "stale", TTL="1", k="v")
    await asyncio.sleep(1.5)  # the component's timer expires it while nobody listens
    inbox = Inbox(w1)
    await subscribe_queue(w1, node, 1)
    await inbox.assert_none(match("item", node))
    dead = stored_headers(await items(alice, f"{node}/dead-letter"))
    assert dead["stale"]["reason"] == "expired" and dead["stale"]["k"] == "v"


async def test_a_repeat_inside_the_dedup_window_is_answered_and_not_worked_again(connect):
    alice, w1 = await connect("alice"), await connect("w1")
    node = await create_queue(alice, queue_dedup_window="300")
    inbox = Inbox(w1)
    await subscribe_queue(w1, node, 1)
    await put(alice, node, "x")
    await inbox.next(match("item", node, "x"), TIMEOUT)
    await send(retract_iq(w1, node, "x"))
    await put(alice, node, "x")  # a publisher's retry: a result, as before
    await inbox.assert_none(match("item", node, "x"))


async def test_bad_attributes_are_refused_with_the_error_table(connect):
    alice = await connect("alice")
    node = await create_queue(alice, queue_max_delay="60")
    await expect_error(
        send(publish_iq(alice, node, "a", **{"delivery-attempt": "3"})),
        "bad-request",
        "modify",
        "invalid-payload",
    )
    far = zulu(datetime.now(UTC) + timedelta(hours=1))
    await expect_error(send(publish_iq(alice, node, "b", Start=far)), "not-acceptable", "modify")
    await expect_error(
        send(publish_iq(alice, node, "c", big="x" * 2000)),
        "not-acceptable",
        "modify",
        "payload-too-big",
    )
    assert stored_headers(await items(alice, node)) == {}
