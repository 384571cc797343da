"""XEP-0254 on the wire: the spec's examples, stanza in, stanza out.

Test names carry the XEP-0254 section (or docs/queueing.md's choice) they check.
"""

from __future__ import annotations

from datetime import timedelta

from tests.kit.stanzas import (
    ALICE,
    BOB,
    EVE,
    NS,
    OWNER,
    PUB,
    SERVICE,
    SUB_OPTIONS,
    Stream,
    assert_same_xml,
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

WORKER = "workerbee237@example.org/foo"


async def test_2_1_subscribe_without_options_gets_the_spec_first_example(stream: Stream) -> None:
    await make_queue(stream, "a290fjsl29j19kjb")
    reply, others = await stream.iq(
        "set",
        WORKER,
        pubsub("<subscribe jid='workerbee237@example.org' node='a290fjsl29j19kjb'/>"),
        iq_id="sub1",
    )
    assert others == []
    assert_same_xml(
        reply,
        f"""
        <iq from='{SERVICE}' id='sub1' to='{WORKER}' type='error'>
          <pubsub xmlns='http://jabber.org/protocol/pubsub'>
            <subscribe jid='workerbee237@example.org' node='a290fjsl29j19kjb'/>
            <options jid='workerbee237@example.org' node='a290fjsl29j19kjb'>
              <x xmlns='jabber:x:data' type='form'>
                <field var='FORM_TYPE' type='hidden'>
                  <value>http://jabber.org/protocol/pubsub#subscribe_options</value>
                </field>
                <field type='text-single' var='pubsub#queue_requests'><required/></field>
              </x>
            </options>
          </pubsub>
          <error type='modify'>
            <not-acceptable xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/>
            <configuration-required xmlns='http://jabber.org/protocol/pubsub#errors'/>
          </error>
        </iq>
        """,
    )


async def test_2_1_subscribe_with_options_echoes_them_in_the_result(stream: Stream) -> None:
    await make_queue(stream)
    reply = await subscribe_worker(stream, WORKER, 5)
    sub = find(reply, "ps:pubsub/ps:subscription")
    assert sub.get("subscription") == "subscribed"
    assert sub.get("node") == "jobs" and sub.get("jid") == WORKER and sub.get("subid")
    form = find(reply, "ps:pubsub/ps:options/x:x")
    assert form.get("type") == "result"
    assert find(form, "x:field[@var='FORM_TYPE']/x:value").text == SUB_OPTIONS
    assert find(form, "x:field[@var='pubsub#queue_requests']/x:value").text == "5"


async def test_design_queue_requests_must_be_a_positive_integer(stream: Stream) -> None:
    await make_queue(stream)
    options = f"<options>{submit(SUB_OPTIONS, pubsub__queue_requests='0')}</options>"
    reply, _ = await stream.iq(
        "set", WORKER, pubsub(f"<subscribe node='jobs' jid='{WORKER}'/>{options}")
    )
    assert error_of(reply) == ("modify", "not-acceptable", "invalid-options")


async def test_2_2_item_goes_to_one_subscriber_with_payload(stream: Stream) -> None:
    await make_queue(stream)
    await subscribe_worker(stream, ALICE, 1)
    await subscribe_worker(stream, BOB, 1)
    reply, out = await publish(stream, "jobs", "ae890ac52d0df67ed7cfdf51b644e901")
    assert find(reply, "ps:pubsub/ps:publish/ps:item").get("id") == (
        "ae890ac52d0df67ed7cfdf51b644e901"
    )
    notes = messages(out)
    assert len(notes) == 1
    note = notes[0]
    assert note.get("to") in (ALICE, BOB) and note.get("from") == SERVICE
    # pubsub#notification_type defaults to headline on queues too: never stored
    # offline for a worker that is gone (the item stays locked in the queue).
    assert note.get("type") == "headline"
    assert note.get("id", "").startswith("xq-")
    item = find(note, "ev:event/ev:items[@node='jobs']/ev:item")
    assert item.get("id") == "ae890ac52d0df67ed7cfdf51b644e901"
    assert find(item, "{urn:example}job").text == "x"
    assert find(note, "shim:headers/shim:header[@name='SubID']").text


async def test_2_2_items_are_spread_fifo_over_subscribers_with_room(stream: Stream) -> None:
    await make_queue(stream)
    await subscribe_worker(stream, ALICE, 1)
    await subscribe_worker(stream, BOB, 1)
    got = []
    for n in range(3):
        _, out = await publish(stream, "jobs", f"i{n}")
        got += [
            (m.get("to"), find(m, "ev:event/ev:items/ev:item").get("id")) for m in messages(out)
        ]
    assert sorted(to for to, _ in got) == [ALICE, BOB]  # the third waits for room
    assert {item for _, item in got} == {"i0", "i1"}


async def _held_by_alice(stream: Stream, **config: str) -> None:
    # XEP-0254's immediate hand-over (retry delay 0) unless a test says otherwise.
    await make_queue(stream, **({"pubsub__queue_retry_delay": "0"} | config))
    await subscribe_worker(stream, ALICE, 1)
    _, out = await publish(stream, "jobs", "job1")
    assert [m.get("to") for m in messages(out)] == [ALICE]


async def test_2_3_retract_as_ack_with_type_get_notifies_only_the_holder(stream: Stream) -> None:
    await _held_by_alice(stream)
    await subscribe_worker(stream, BOB, 1)
    reply, out = await stream.iq(
        "get", ALICE, pubsub("<retract node='jobs'><item id='job1'/></retract>"), iq_id="delete1"
    )
    assert reply.get("type") == "result"
    notes = messages(out)
    assert [m.get("to") for m in notes] == [ALICE]
    assert find(notes[0], "ev:event/ev:items[@node='jobs']/ev:retract").get("id") == "job1"
    # and the item is gone
    again, _ = await stream.iq(
        "set", ALICE, pubsub("<retract node='jobs'><item id='job1'/></retract>")
    )
    assert error_of(again) == ("cancel", "item-not-found", None)


async def test_2_3_retract_error_order(stream: Stream) -> None:
    await _held_by_alice(stream, pubsub__queue_retry_delay="60")
    await subscribe_worker(stream, BOB, 1)
    retract = pubsub("<retract node='jobs'><item id='{}'/></retract>")
    # no such item
    reply, _ = await stream.iq("get", ALICE, retract.format("nope"))
    assert error_of(reply) == ("cancel", "item-not-found", None)
    # not a subscriber, not a publisher
    reply, _ = await stream.iq("get", EVE, retract.format("job1"))
    assert error_of(reply) == ("auth", "forbidden", None)
    # locked by another subscriber
    reply, _ = await stream.iq("get", BOB, retract.format("job1"))
    assert error_of(reply) == ("cancel", "conflict", None)
    # no longer locked by the requester (unlocked, waiting out its retry delay)
    reply, _ = await stream.iq(
        "get",
        ALICE,
        pubsub("<unlock xmlns='urn:xmpp:pubsub:queueing:0' node='jobs'><item id='job1'/></unlock>"),
    )
    assert reply.get("type") == "result"
    reply, _ = await stream.iq("get", ALICE, retract.format("job1"))
    assert error_of(reply) == ("wait", "unexpected-request", None)
    # the error reply carries the request, as the spec's examples do
    assert find(reply, "ps:pubsub/ps:retract/ps:item").get("id") == "job1"


async def test_2_4_unlock_notifies_the_holder_in_the_protocol_namespace(stream: Stream) -> None:
    await _held_by_alice(stream)
    await subscribe_worker(stream, BOB, 1)
    reply, out = await stream.iq(
        "get",
        ALICE,
        pubsub("<unlock xmlns='urn:xmpp:pubsub:queueing:0' node='jobs'><item id='job1'/></unlock>"),
        iq_id="unlock1",
    )
    assert reply.get("type") == "result"
    notes = messages(out)
    assert [m.get("to") for m in notes] == [ALICE, BOB]  # unlock first, then the hand-over
    unlock = find(notes[0], "ev:event/ev:items[@node='jobs']/q:unlock")
    assert unlock.get("id") == "job1"
    assert notes[0].find("ev:event/ev:items/{urn:xmpp:queueing:0}unlock", NS) is None
    assert find(notes[0], "shim:headers/shim:header[@name='reason']").text == "unlocked"
    assert find(notes[1], "ev:event/ev:items/ev:item").get("id") == "job1"


async def test_2_4_unlock_errors(stream: Stream) -> None:
    await _held_by_alice(stream)
    await subscribe_worker(stream, BOB, 1)
    unlock = pubsub(
        "<unlock xmlns='urn:xmpp:pubsub:queueing:0' node='jobs'><item id='{}'/></unlock>"
    )
    reply, _ = await stream.iq("get", ALICE, unlock.format("nope"))
    assert error_of(reply) == ("cancel", "item-not-found", None)
    assert find(reply, "ps:pubsub/q:unlock/q:item").get("id") == "nope"
    reply, _ = await stream.iq("set", EVE, unlock.format("job1"))
    assert error_of(reply) == ("auth", "forbidden", None)
    reply, _ = await stream.iq("set", BOB, unlock.format("job1"))
    assert error_of(reply) == ("cancel", "conflict", None)


async def test_unlock_on_an_ordinary_node_is_bad_request(stream: Stream) -> None:
    await make_node(stream, "news")
    reply, _ = await stream.iq(
        "set",
        OWNER,
        pubsub("<unlock xmlns='urn:xmpp:pubsub:queueing:0' node='news'><item id='x'/></unlock>"),
    )
    assert error_of(reply) == ("modify", "bad-request", None)


async def test_extend_pushes_the_deadline_and_returns_it(stream: Stream) -> None:
    await _held_by_alice(stream)
    reply, out = await stream.iq(
        "set",
        ALICE,
        pubsub(
            "<extend xmlns='urn:xmpp-queue:0' node='jobs' seconds='900'><item id='job1'/></extend>"
        ),
    )
    expires = (stream.clock() + timedelta(seconds=900)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert find(reply, "ps:pubsub/ext:extend[@node='jobs']/ext:item").attrib == {
        "id": "job1",
        "expires": expires,
    }
    assert messages(out) == []
    reply, _ = await stream.iq(
        "set",
        BOB,
        pubsub("<extend xmlns='urn:xmpp-queue:0' node='jobs'><item id='job1'/></extend>"),
    )
    assert error_of(reply) == ("auth", "forbidden", None)
    reply, _ = await stream.iq(
        "set",
        ALICE,
        pubsub(
            "<extend xmlns='urn:xmpp-queue:0' node='jobs' seconds='soon'><item id='job1'/></extend>"
        ),
    )
    assert error_of(reply) == ("modify", "bad-request", None)


async def test_4_lock_timeout_unlocks_and_hands_on(stream: Stream) -> None:
    await _held_by_alice(stream, pubsub__queue_lock_timeout="30")
    await subscribe_worker(stream, BOB, 1)
    assert stream.deadlines.armed_for == stream.clock() + timedelta(seconds=30)
    stream.clock.advance(31)
    await stream.deadlines.sweep()
    await stream.settle()
    notes = messages(stream.take())
    assert [m.get("to") for m in notes] == [ALICE, BOB]
    assert find(notes[0], "ev:event/ev:items/q:unlock").get("id") == "job1"
    assert find(notes[0], "shim:headers/shim:header[@name='reason']").text == "timeout"
    assert find(notes[1], "ev:event/ev:items/ev:item").get("id") == "job1"
    assert stream.deadlines.armed_for == stream.clock() + timedelta(seconds=30)


async def test_dead_letter_notification_carries_shim_headers(stream: Stream) -> None:
    await make_node(stream, "jobs-dl")
    await stream.iq("set", OWNER, pubsub(f"<subscribe node='jobs-dl' jid='{OWNER}'/>"))
    await _held_by_alice(
        stream, pubsub__queue_max_deliveries="1", pubsub__queue_dead_letter="jobs-dl"
    )
    _, out = await stream.iq(
        "set",
        ALICE,
        pubsub("<unlock xmlns='urn:xmpp:pubsub:queueing:0' node='jobs'><item id='job1'/></unlock>"),
    )
    notes = messages(out)
    assert [m.get("to") for m in notes] == [ALICE, OWNER]
    dead = notes[1]
    assert dead.get("type") == "headline"  # the dead-letter node is an ordinary node
    assert find(dead, "ev:event/ev:items[@node='jobs-dl']/ev:item").get("id") == "job1"
    headers = {h.get("name"): h.text for h in dead.findall("shim:headers/shim:header", NS)}
    assert headers["origin-node"] == "jobs"
    assert headers["origin-item"] == "job1"
    assert headers["reason"] == "max-deliveries"


async def test_publisher_retracting_a_locked_item_tells_its_holder(stream: Stream) -> None:
    await _held_by_alice(stream)
    reply, out = await stream.iq(
        "set", PUB, pubsub("<retract node='jobs'><item id='job1'/></retract>")
    )
    assert reply.get("type") == "result"
    notes = messages(out)
    assert [m.get("to") for m in notes] == [ALICE]
    assert find(notes[0], "ev:event/ev:items/ev:retract").get("id") == "job1"


async def test_deleting_a_queue_tells_holder_and_subscribers_with_queue_notices(
    stream: Stream,
) -> None:
    await _held_by_alice(stream)
    reply, out = await stream.iq("set", OWNER, pubsub("<delete node='jobs'/>", NS["o"]))
    assert reply.get("type") == "result"
    notes = messages(out)
    assert [m.get("to") for m in notes] == [ALICE, ALICE]
    assert find(notes[0], "ev:event/ev:items/q:unlock").get("id") == "job1"
    assert find(notes[0], "shim:headers/shim:header[@name='reason']").text == "deleted"
    find(notes[1], "ev:event/ev:delete[@node='jobs']")
    assert all(m.get("type") == "headline" for m in notes)  # notification_type default
