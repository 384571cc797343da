"""XEP-0254 queueing end to end (issue 3): the spec's examples stanza by stanza, the
error flows in docs/queueing.md's order, and what docs/queueing.md adds (lock timeout,
lock extension, retry delay, dead letters, departures, purge/delete).

Workers are ordinary slixmpp clients (users w1..w5) that subscribe with their full
JID, as docs/queueing.md advises; the owner alice publishes. Section numbers are
those of XEP-0254.
"""

from __future__ import annotations

import asyncio
import time
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import pytest

from tests.integration.queue_helpers import (
    CLIENT,
    DATA_FORMS,
    EXAMPLE_NS,
    PUBSUB,
    PUBSUB_OWNER,
    QUEUE_EXT,
    QUEUEING,
    SERVICE,
    SUBSCRIBE_OPTIONS,
    TIMEOUT,
    Event,
    Inbox,
    create_node,
    create_queue,
    expect_error,
    extend_iq,
    find_form,
    form_value,
    form_values,
    form_xml,
    iq,
    item_ids,
    items,
    items_of,
    match,
    publish,
    retract_iq,
    send,
    send_presence_to_service,
    subscribe_queue,
    subscribe_queue_iq,
    unique,
    unlock_iq,
    xml_of,
)
from tests.kit.integration import logout

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]


class Worker:
    """A worker client, its inbox, and its subscription to one queue node."""

    def __init__(self, client, node: str) -> None:
        self.client = client
        self.node = node
        self.inbox = Inbox(client)
        self.subid = ""

    @property
    def jid(self) -> str:
        return str(self.client.boundjid)

    async def subscribe(self, queue_requests: int) -> Worker:
        self.subid = await subscribe_queue(self.client, self.node, queue_requests)
        return self

    async def item(self, item_id: str | None = None, within: float = TIMEOUT) -> Event:
        return await self.inbox.next(match("item", self.node, item_id), within)

    async def ack(self, item_id: str, itype: str = "set"):
        return await send(retract_iq(self.client, self.node, item_id, itype))

    async def unlock(self, item_id: str, itype: str = "get"):
        return await send(unlock_iq(self.client, self.node, item_id, itype))

    async def nothing(self) -> None:
        """No event of this node reached the worker (round-trip barrier)."""
        await self.inbox.assert_none(match(node=self.node))


async def _workers(
    connect, node: str, *limits: int, users=("w1", "w2", "w3", "w4")
) -> list[Worker]:
    workers = []
    for user, limit in zip(users, limits, strict=False):
        workers.append(await Worker(await connect(user), node).subscribe(limit))
    return workers


async def _first(
    workers: list[Worker], item_id: str, within: float = TIMEOUT
) -> tuple[Worker, Event]:
    """The one worker the item went to (the others are then checked by the caller)."""
    tasks = {asyncio.ensure_future(w.item(item_id, within)): w for w in workers}
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    task = next(iter(done))
    return tasks[task], task.result()


def _pubsub_child(reply, name: str, ns: str = PUBSUB) -> ET.Element:
    el = reply.xml.find(f"{{{PUBSUB}}}pubsub/{{{ns}}}{name}")
    assert el is not None, f"no <{name}/> in {xml_of(reply)}"
    return el


# --- §2.1 subscribing -------------------------------------------------------------------------


async def test_2_1_subscribe_without_options_returns_the_options_form(connect):
    """The spec's first example, element by element."""
    alice, w1 = await connect("alice"), await connect("w1")
    node = await create_queue(alice)
    bare = w1.boundjid.bare
    request = iq(w1, f"<pubsub xmlns='{PUBSUB}'><subscribe jid='{bare}' node='{node}'/></pubsub>")
    info = await expect_error(send(request), "not-acceptable", "modify", "configuration-required")
    reply = ET.fromstring(info.xml)
    pubsub = reply.find(f"{{{PUBSUB}}}pubsub")
    assert pubsub is not None, info.xml
    subscribe = pubsub.find(f"{{{PUBSUB}}}subscribe")
    options = pubsub.find(f"{{{PUBSUB}}}options")
    assert subscribe is not None and subscribe.attrib == {"jid": bare, "node": node}, info.xml
    assert options is not None and options.attrib == {"jid": bare, "node": node}, info.xml
    x = options.find(f"{{{DATA_FORMS}}}x")
    assert x is not None and x.get("type") == "form", info.xml
    fields = x.findall(f"{{{DATA_FORMS}}}field")
    assert [f.get("var") for f in fields] == ["FORM_TYPE", "pubsub#queue_requests"], info.xml
    form_type, queue_requests = fields
    assert form_type.get("type") == "hidden"
    assert form_value(x, "FORM_TYPE") == SUBSCRIBE_OPTIONS
    assert queue_requests.get("type") == "text-single"
    assert queue_requests.find(f"{{{DATA_FORMS}}}required") is not None, info.xml
    assert queue_requests.find(f"{{{DATA_FORMS}}}value") is None, info.xml
    error = reply.find(f"{{{CLIENT}}}error")
    assert error is not None and error.get("type") == "modify"
    # and no subscription was made
    subs = await alice.plugin["xep_0060"].get_node_subscriptions(SERVICE, node, timeout=TIMEOUT)
    assert list(subs.xml.iter(f"{{{PUBSUB_OWNER}}}subscription")) == []


async def test_2_1_subscribe_with_options_echoes_them_with_a_subid(connect):
    """The spec's second and third examples (bare JID, queue_requests 5)."""
    alice, w1 = await connect("alice"), await connect("w1")
    node = await create_queue(alice)
    bare = w1.boundjid.bare
    reply = await send(subscribe_queue_iq(w1, node, 5, jid=bare))
    assert reply["type"] == "result"
    sub = _pubsub_child(reply, "subscription")
    assert sub.get("jid") == bare and sub.get("node") == node
    assert sub.get("subscription") == "subscribed"
    assert sub.get("subid"), xml_of(reply)
    options = _pubsub_child(reply, "options")
    x = options.find(f"{{{DATA_FORMS}}}x")
    assert x is not None and x.get("type") == "result", xml_of(reply)
    assert form_value(x, "FORM_TYPE") == SUBSCRIBE_OPTIONS
    assert form_values(x)["pubsub#queue_requests"] == ["5"]


@pytest.mark.parametrize("value", ["0", "-1", "abc", "2.5", "10001", ""])
async def test_2_1_invalid_queue_requests_is_invalid_options(connect, value):
    alice, w1 = await connect("alice"), await connect("w1")
    node = await create_queue(alice)
    await expect_error(
        send(subscribe_queue_iq(w1, node, value)), "not-acceptable", "modify", "invalid-options"
    )
    subs = await alice.plugin["xep_0060"].get_node_subscriptions(SERVICE, node, timeout=TIMEOUT)
    assert list(subs.xml.iter(f"{{{PUBSUB_OWNER}}}subscription")) == []


# --- §2.2 assigning an item -----------------------------------------------------------------------


async def test_2_2_each_item_goes_to_exactly_one_subscriber_with_its_payload(connect):
    alice = await connect("alice")
    node = await create_queue(alice)
    workers = await _workers(connect, node, 1, 1, 1)
    item_id = "ae890ac52d0df67ed7cfdf51b644e901"
    await publish(alice, node, item_id, "payload")
    holder, event = await _first(workers, item_id)
    assert event.payload is not None and event.payload.tag == f"{{{EXAMPLE_NS}}}example"
    assert event.payload.text == "payload"
    assert event.message.get("from") == SERVICE
    for other in workers:
        if other is not holder:
            await other.nothing()
    # fewest in flight first: the next two items go to the two idle workers
    await publish(alice, node, "second")
    await publish(alice, node, "third")
    got = {}
    for other in workers:
        if other is not holder:
            got[other.jid] = (await other.item()).item_id
    assert sorted(got.values()) == ["second", "third"]
    await holder.nothing()


async def test_2_2_fifo_backlog_waits_for_capacity(connect):
    alice = await connect("alice")
    node = await create_queue(alice)
    (w,) = await _workers(connect, node, 1)
    for i in ("a", "b", "c"):
        await publish(alice, node, i)
    assert (await w.item()).item_id == "a"
    await w.nothing()  # b and c wait in the backlog
    await w.ack("a")
    assert (await w.item()).item_id == "b"
    await w.ack("b")
    assert (await w.item()).item_id == "c"
    await w.ack("c")
    assert item_ids(await items(alice, node)) == []


# --- §2.3 retract = ack ---------------------------------------------------------------------------


@pytest.mark.parametrize("itype", ["get", "set"])
async def test_2_3_retract_by_the_holder_is_the_ack(connect, itype):
    alice = await connect("alice")
    alice_inbox = Inbox(alice)
    node = await create_queue(alice)
    workers = await _workers(connect, node, 1, 1)
    await publish(alice, node, "job")
    holder, _ = await _first(workers, "job")
    other = next(w for w in workers if w is not holder)
    reply = await holder.ack("job", itype)
    assert reply["type"] == "result"
    event = await holder.inbox.next(match("retract", node, "job"))
    assert event.message.get("from") == SERVICE
    await other.nothing()
    await alice_inbox.assert_none(match("retract", node))
    assert item_ids(await items(alice, node)) == []


@pytest.mark.parametrize(
    "verb", ["retract-get", "retract-set", "unlock-get", "unlock-set", "extend"]
)
async def test_2_3_2_4_error_flows_in_design_order(connect, verb):
    """item-not-found, then forbidden, then conflict, then unexpected-request (wait)."""
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_queue(alice)
    workers = await _workers(connect, node, 1, 1)
    await publish(alice, node, "A")
    holder, _ = await _first(workers, "A")
    other = next(w for w in workers if w is not holder)
    await publish(alice, node, "B")
    assert (await other.item("B")).item_id == "B"
    await publish(alice, node, "C")  # both full: C waits, locked by nobody

    def request(client, item_id: str):
        name, _, itype = verb.partition("-")
        if name == "retract":
            return send(retract_iq(client, node, item_id, itype))
        if name == "unlock":
            return send(unlock_iq(client, node, item_id, itype))
        return send(extend_iq(client, node, item_id, 60))

    # no such item: first, whoever asks
    await expect_error(request(bob, "nope"), "item-not-found", "cancel")
    await expect_error(request(holder.client, "nope"), "item-not-found", "cancel")
    # not a subscriber (and not a publisher/owner)
    await expect_error(request(bob, "A"), "forbidden", "auth")
    # locked by another subscriber
    await expect_error(request(other.client, "A"), "conflict", "cancel")
    # a subscriber, but the item is not locked by it (C is in the backlog)
    await expect_error(request(holder.client, "C"), "unexpected-request", "wait")
    # nothing changed: A still held and ackable by its holder, B by the other
    await holder.ack("A")
    await other.ack("B")
    assert (await _first(workers, "C"))[1].item_id == "C"


async def test_2_3_ack_of_an_acked_item_is_item_not_found(connect):
    alice = await connect("alice")
    node = await create_queue(alice)
    (w,) = await _workers(connect, node, 1)
    await publish(alice, node, "once")
    await w.item("once")
    await w.ack("once")
    await expect_error(w.ack("once"), "item-not-found", "cancel")


# --- §2.4 unlock ----------------------------------------------------------------------------------


async def test_2_4_unlock_tells_the_holder_and_hands_the_item_on(connect):
    alice = await connect("alice")
    node = await create_queue(alice)
    first = await Worker(await connect("w1"), node).subscribe(1)
    await publish(alice, node, "ae890ac52d0df67ed7cfdf51b644e901")
    await first.item("ae890ac52d0df67ed7cfdf51b644e901")
    second = await Worker(await connect("w2"), node).subscribe(1)
    await second.nothing()  # the item is locked to the first worker
    reply = await first.unlock("ae890ac52d0df67ed7cfdf51b644e901", "get")  # as the spec's example
    assert reply["type"] == "result"
    event = await first.inbox.next(match("unlock", node, "ae890ac52d0df67ed7cfdf51b644e901"))
    unlock = event.message.find(f".//{{{QUEUEING}}}unlock")
    assert unlock is not None, "the unlock event is in urn:xmpp:pubsub:queueing:0"
    handed = await second.item("ae890ac52d0df67ed7cfdf51b644e901")
    assert handed.payload is not None and handed.payload.text == "payload"
    await second.inbox.assert_none(match("unlock", node))
    await first.inbox.assert_none(match("item", node))
    await second.ack("ae890ac52d0df67ed7cfdf51b644e901")


async def test_2_4_unlock_with_nobody_else_returns_the_item_to_the_holder(connect):
    alice = await connect("alice")
    node = await create_queue(alice)
    (w,) = await _workers(connect, node, 1)
    await publish(alice, node, "again")
    await w.item("again")
    await w.unlock("again", "set")
    await w.inbox.next(match("unlock", node, "again"))
    await w.item("again")
    await w.ack("again")


async def test_unlock_on_an_ordinary_node_is_bad_request(connect):
    """README "Queueing as implemented": the service implements queueing; the request
    is wrong for a node that is not a queue, so bad-request (modify)."""
    alice = await connect("alice")
    node = await create_node(alice, unique("plain"))
    await publish(alice, node, "x")
    await expect_error(send(unlock_iq(alice, node, "x")), "bad-request", "modify")


# --- queue_requests changes, unsubscribe, lock holder identity ------------------------------------


async def test_raising_queue_requests_by_subscription_options_takes_effect_at_once(connect):
    alice = await connect("alice")
    node = await create_queue(alice)
    (w,) = await _workers(connect, node, 1)
    for i in range(4):
        await publish(alice, node, f"j{i}")
    assert (await w.item()).item_id == "j0"
    await w.nothing()
    attrs = f"node='{node}' jid='{w.jid}' subid='{w.subid}'"
    options = iq(w.client, f"<pubsub xmlns='{PUBSUB}'><options {attrs}/></pubsub>")
    options.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}options").append(
        form_xml(SUBSCRIBE_OPTIONS, {"pubsub#queue_requests": 3})
    )
    await send(options)
    got = [(await w.item()).item_id for _ in range(2)]
    assert got == ["j1", "j2"]
    await w.nothing()  # three in hand: j3 waits
    got_options = await send(
        iq(
            w.client,
            f"<pubsub xmlns='{PUBSUB}'><options node='{node}' jid='{w.jid}'/></pubsub>",
            "get",
        )
    )
    assert form_value(find_form(got_options.xml, SUBSCRIBE_OPTIONS), "pubsub#queue_requests") == "3"
    await w.ack("j0")
    assert (await w.item()).item_id == "j3"


async def test_unsubscribed_worker_keeps_its_locks_until_it_acks(connect):
    alice = await connect("alice")
    node = await create_queue(alice)
    (w,) = await _workers(connect, node, 2)
    await publish(alice, node, "held")
    await w.item("held")
    await w.client.plugin["xep_0060"].unsubscribe(
        SERVICE, node, subid=w.subid, subscribee=w.jid, timeout=TIMEOUT
    )
    await publish(alice, node, "later")
    await w.nothing()
    await w.ack("held")  # docs/queueing.md: unsubscribe, then release
    assert item_ids(await items(alice, node)) == ["later"]


async def test_full_jid_lock_is_acked_only_from_that_resource(connect, pool):
    alice = await connect("alice")
    node = await create_queue(alice)
    w = await Worker(await pool.get("w3", resource=unique("proc-a")), node).subscribe(1)
    twin = await pool.get("w3", resource=unique("proc-b"))
    await publish(alice, node, "mine")
    await w.item("mine")
    await expect_error(send(retract_iq(twin, node, "mine")), "forbidden", "auth")
    await w.ack("mine")


async def test_bare_jid_lock_may_be_acked_by_any_resource(connect, pool):
    alice = await connect("alice")
    node = await create_queue(alice)
    a = await pool.get("w4", resource=unique("proc-a"))
    b = await pool.get("w4", resource=unique("proc-b"))
    inbox = Inbox(a)
    await subscribe_queue(a, node, 1, jid=a.boundjid.bare)
    await publish(alice, node, "shared")
    await inbox.next(match("item", node, "shared"))
    reply = await send(retract_iq(b, node, "shared"))
    assert reply["type"] == "result"


# --- timeouts, extension, retry delay, dead letters -----------------------------------------------


async def test_4_lock_timeout_unlocks_and_hands_the_item_to_the_next_worker(connect):
    alice = await connect("alice")
    node = await create_queue(alice, queue_lock_timeout=1)
    first = await Worker(await connect("w1"), node).subscribe(1)
    await publish(alice, node, "slow")
    await first.item("slow")
    second = await Worker(await connect("w2"), node).subscribe(1)
    started = time.monotonic()
    await first.inbox.next(match("unlock", node, "slow"), within=8)
    assert time.monotonic() - started < 6
    await second.item("slow", within=5)
    await expect_error(first.ack("slow"), "conflict", "cancel")  # it belongs to the second now
    await second.ack("slow")


async def test_lock_extension_pushes_the_deadline(connect):
    alice, bob = await connect("alice"), await connect("bob")
    node = await create_queue(alice, queue_lock_timeout=1)
    first = await Worker(await connect("w1"), node).subscribe(1)
    await publish(alice, node, "long")
    await first.item("long")
    second = await Worker(await connect("w2"), node).subscribe(1)
    reply = await send(extend_iq(first.client, node, "long", 30))
    extend = _pubsub_child(reply, "extend", QUEUE_EXT)
    assert extend.get("node") == node
    item = extend.find(f"{{{QUEUE_EXT}}}item")
    assert item is not None and item.get("id") == "long", xml_of(reply)
    expires = datetime.fromisoformat(item.get("expires", "").replace("Z", "+00:00"))
    ahead = (expires - datetime.now(UTC)).total_seconds()
    assert 25 <= ahead <= 31, f"expires {expires} is {ahead:.1f}s ahead, wanted about 30"
    # past the node's 1 s timeout nothing moves: no unlock, no hand-over
    await first.inbox.wait_none(match("unlock", node, "long"), 2.5)
    await second.nothing()
    # extension errors are those of unlock
    await expect_error(send(extend_iq(first.client, node, "nope", 10)), "item-not-found", "cancel")
    await expect_error(send(extend_iq(bob, node, "long", 10)), "forbidden", "auth")
    await expect_error(send(extend_iq(second.client, node, "long", 10)), "conflict", "cancel")
    await expect_error(send(extend_iq(first.client, node, "long", 0)), "bad-request", "modify")
    # without seconds: the node's lock timeout, from now
    reply = await send(extend_iq(first.client, node, "long"))
    expires = datetime.fromisoformat(
        _pubsub_child(reply, "extend", QUEUE_EXT)
        .find(f"{{{QUEUE_EXT}}}item")
        .get("expires")
        .replace("Z", "+00:00")
    )
    assert (expires - datetime.now(UTC)).total_seconds() <= 2
    await first.inbox.next(match("unlock", node, "long"), within=6)
    await second.item("long", within=5)


async def test_extend_on_an_ordinary_node_is_bad_request(connect):
    """README "Queueing as implemented": the service implements queueing; the request
    is wrong for a node that is not a queue, so bad-request (modify)."""
    alice = await connect("alice")
    node = await create_node(alice, unique("plain"))
    await publish(alice, node, "x")
    await expect_error(send(extend_iq(alice, node, "x", 10)), "bad-request", "modify")


async def test_retry_delay_keeps_an_unlocked_item_out_of_dispatch(connect):
    alice = await connect("alice")
    node = await create_queue(alice, queue_retry_delay=2)
    (w,) = await _workers(connect, node, 1)
    await publish(alice, node, "poison")
    await w.item("poison")
    await publish(alice, node, "good")
    # The service starts the delay when it handles the unlock, which is after we
    # send it and before its result reaches us; measuring from the send is the
    # bound that holds however slowly the server relays the result.
    sent_at = time.monotonic()
    await w.unlock("poison")
    # the poison item waits; the good one behind it goes out at once (well before
    # the poison's 2 s are up, with room for a slow relay)
    good = await w.item()
    assert good.item_id == "good"
    assert good.received_at - sent_at < 1.5
    await w.ack("good")
    again = await w.item("poison", within=8)
    waited = again.received_at - sent_at
    assert waited >= 1.95, f"redelivered {waited:.2f}s after the unlock, retry delay is 2 s"
    await w.ack("poison")


async def test_dead_letter_after_max_deliveries(connect):
    alice = await connect("alice")
    node = await create_queue(alice, queue_max_deliveries=2)
    (w,) = await _workers(connect, node, 1)
    await publish(alice, node, "doomed", "bad input")
    await w.item("doomed")
    await w.unlock("doomed")  # delivery 1 failed
    await w.item("doomed")
    await w.unlock("doomed")  # delivery 2 failed: past the limit
    await w.inbox.assert_none(match("item", node, "doomed"))
    assert item_ids(await items(alice, node)) == []
    dead = items_of(await items(alice, f"{node}/dead-letter"))
    assert list(dead) == ["doomed"]
    body = dead["doomed"].find(f"{{{EXAMPLE_NS}}}example")
    assert body is not None and body.text == "bad input"
    # Items retrieval returns the payload alone (an <item/> holds one payload element);
    # the origin headers travel with notifications, checked in the next test.


async def test_dead_letter_to_a_configured_node_notifies_its_subscribers(connect):
    alice = await connect("alice")
    alice_inbox = Inbox(alice)
    graveyard = await create_node(alice, unique("graveyard"))
    await alice.plugin["xep_0060"].subscribe(SERVICE, graveyard, timeout=TIMEOUT)
    node = await create_queue(alice, queue_max_deliveries=1, queue_dead_letter=graveyard)
    (w,) = await _workers(connect, node, 1)
    await publish(alice, node, "bad")
    await w.item("bad")
    await w.unlock("bad")
    event = await alice_inbox.next(match("item", graveyard, "bad"))
    assert event.headers.get("origin-node") == node
    assert event.headers.get("origin-item") == "bad"
    assert event.headers.get("deliveries") == "1"
    assert event.payload is not None and event.payload.text == "payload"


# --- departures, publisher retract, purge, delete -------------------------------------------------


async def test_4_worker_going_offline_releases_its_items_to_the_others(connect, pool):
    alice = await connect("alice")
    node = await create_queue(alice)
    leaver_client = await pool.get("w5", fresh=True, resource=unique("leaver"))
    leaver = Worker(leaver_client, node)
    await send_presence_to_service(leaver_client)
    await leaver.subscribe(2)
    await publish(alice, node, "x1")
    await publish(alice, node, "x2")
    await leaver.item("x1")
    await leaver.item("x2")
    (stayer,) = await _workers(connect, node, 2, users=("w2",))
    await stayer.nothing()
    await logout(leaver_client)  # the server sends unavailable presence to the component
    got = {(await stayer.item(within=8)).item_id for _ in range(2)}
    assert got == {"x1", "x2"}
    subs = await alice.plugin["xep_0060"].get_node_subscriptions(SERVICE, node, timeout=TIMEOUT)
    jids = {s.get("jid") for s in subs.xml.iter(f"{{{PUBSUB_OWNER}}}subscription")}
    assert leaver.jid not in jids, "§4: the departed subscriber is unsubscribed"
    await stayer.ack("x1")
    await stayer.ack("x2")


async def test_publisher_retract_of_a_locked_item_tells_the_holder(connect):
    alice = await connect("alice")
    node = await create_queue(alice)
    workers = await _workers(connect, node, 1, 1)
    await publish(alice, node, "cancelled")
    holder, _ = await _first(workers, "cancelled")
    other = next(w for w in workers if w is not holder)
    await send(retract_iq(alice, node, "cancelled"))
    await holder.inbox.next(match("retract", node, "cancelled"))
    await other.nothing()
    await expect_error(holder.ack("cancelled"), "item-not-found", "cancel")


async def test_purge_tells_every_holder(connect):
    alice = await connect("alice")
    node = await create_queue(alice)
    workers = await _workers(connect, node, 1, 1)
    await publish(alice, node, "p1")
    await publish(alice, node, "p2")
    await publish(alice, node, "p3")  # backlog
    held = {}
    for w in workers:
        held[w.jid] = (await w.item()).item_id
    assert sorted(held.values()) == ["p1", "p2"]
    await alice.plugin["xep_0060"].purge(SERVICE, node, timeout=TIMEOUT)
    for w in workers:
        await w.inbox.next(match("unlock", node, held[w.jid]))
    assert item_ids(await items(alice, node)) == []
    for w in workers:
        await w.inbox.assert_none(match("item", node))
        await expect_error(w.ack(held[w.jid]), "item-not-found", "cancel")


async def test_delete_tells_every_holder(connect):
    alice = await connect("alice")
    node = await create_queue(alice)
    (w,) = await _workers(connect, node, 1)
    await publish(alice, node, "d1")
    await w.item("d1")
    await alice.plugin["xep_0060"].delete_node(SERVICE, node, timeout=TIMEOUT)
    await w.inbox.next(match("unlock", node, "d1"))
    await w.inbox.next(match("delete", node))
