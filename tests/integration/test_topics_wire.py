"""Topics with subscriptions on the wire, behind Prosody and behind ejabberd (issue 21):
queues bound to an ordinary node by ``pubsub#queue_topic``, one filtered by
``pubsub#queue_filter``; the topic's own subscriber keeps its broadcast; a bad
filter is refused with its position; a bound queue that cannot take a copy
refuses the whole publish. Raw stanzas, as a client in any language sends them.
"""

from __future__ import annotations

import pytest

from tests.integration.queue_helpers import (
    PUBSUB,
    SERVICE,
    TIMEOUT,
    Inbox,
    create_node,
    create_queue,
    expect_error,
    items,
    match,
    send,
    subscribe_queue,
    unique,
)
from tests.integration.test_message_model_wire import publish_iq, put

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

EU = 'attributes.region = "eu" OR attributes:vip'


def item_ids(reply) -> list[str]:  # type: ignore[no-untyped-def]
    return [i.get("id") for i in reply.xml.iter(f"{{{PUBSUB}}}item")]


async def test_a_topic_publish_reaches_every_bound_queue_and_the_broadcast(connect):
    alice, w1, w2, bob = [await connect(n) for n in ("alice", "w1", "w2", "bob")]
    topic = await create_node(alice, unique("topic"))
    everything = await create_queue(alice, queue_topic=topic)
    eu_only = await create_queue(alice, queue_topic=topic, queue_filter=EU)
    inbox1, inbox2, broadcast = Inbox(w1), Inbox(w2), Inbox(bob)
    await subscribe_queue(w1, everything, 5)
    await subscribe_queue(w2, eu_only, 5)
    await bob.plugin["xep_0060"].subscribe(SERVICE, topic, timeout=TIMEOUT)
    await put(alice, topic, "e1", region="eu")
    await put(alice, topic, "u1", region="us")
    await put(alice, topic, "v1", region="us", vip="1")
    got1 = [(await inbox1.next(match("item", everything), TIMEOUT)).item_id for _ in range(3)]
    assert sorted(got1) == ["e1", "u1", "v1"]
    first = await inbox2.next(match("item", eu_only), TIMEOUT)
    assert first.headers["region"] == "eu"
    second = await inbox2.next(match("item", eu_only), TIMEOUT)
    assert [first.item_id, second.item_id] == ["e1", "v1"]
    await inbox2.assert_none(match("item", eu_only, "u1"))
    heard = [(await broadcast.next(match("item", topic), TIMEOUT)).item_id for _ in range(3)]
    assert sorted(heard) == ["e1", "u1", "v1"]


async def test_a_bad_filter_is_refused_with_its_position(connect):
    alice = await connect("alice")
    topic = await create_node(alice, unique("topic"))
    info = await expect_error(
        create_queue(alice, queue_topic=topic, queue_filter='attributes.region = "eu" AND'),
        "not-acceptable",
        "modify",
    )
    assert "position" in info.xml, info.xml


async def test_a_queue_that_cannot_take_the_copy_refuses_the_whole_publish(connect):
    alice = await connect("alice")
    topic = await create_node(alice, unique("topic"))
    small = await create_queue(alice, queue_topic=topic, max_items="1")
    big = await create_queue(alice, queue_topic=topic)
    await put(alice, topic, "a")
    await expect_error(send(publish_iq(alice, topic, "b")), "conflict", "cancel", "node-full")
    assert item_ids(await items(alice, topic)) == ["a"]
    assert item_ids(await items(alice, big)) == ["a"]
    assert item_ids(await items(alice, small)) == ["a"]
