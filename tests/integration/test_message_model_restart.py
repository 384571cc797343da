"""The message model across a component restart, on SQLite and PostgreSQL, behind
Prosody and behind ejabberd: delayed, prioritised and deduplicated work is in the
database, so a restarted component hands it out as the first one would have."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.integration.queue_helpers import (
    PUBSUB,
    SUBSCRIBE_OPTIONS,
    TIMEOUT,
    Inbox,
    create_queue,
    form_xml,
    iq,
    match,
    retract_iq,
    send,
    subscribe_queue,
)
from tests.integration.test_message_model_wire import put, zulu

pytestmark = [pytest.mark.integration]


async def test_delays_priorities_and_the_dedup_window_survive_a_restart(
    xmpp_server, database_url, component, client
):
    proc = await component()
    alice, w1 = await client("alice", server=xmpp_server), await client("w1", server=xmpp_server)
    node = await create_queue(alice, queue_dedup_window="600", queue_priority_age="0")
    inbox = Inbox(w1)
    await subscribe_queue(w1, node, 1)
    await put(alice, node, "done")
    await inbox.next(match("item", node, "done"), TIMEOUT)
    await send(retract_iq(w1, node, "done"))
    await send(
        iq(
            w1,
            f"<pubsub xmlns='{PUBSUB}'><unsubscribe node='{node}' jid='{w1.boundjid}'/></pubsub>",
        )
    )
    # "later" is as urgent as "low" and published after it, so it comes after "low"
    # even when the restart outlasts its delay (a loaded machine).
    await put(alice, node, "low", Urgency="low")
    start = datetime.now(UTC) + timedelta(seconds=4)
    await put(alice, node, "later", Start=zulu(start), Urgency="low", k="v")
    await put(alice, node, "high", Urgency="high")

    await proc.restart()
    await put(alice, node, "done")  # inside the window, across the restart
    await subscribe_queue(w1, node, 1)
    first = await inbox.next(match("item", node), TIMEOUT)
    assert first.item_id == "high"
    await send(retract_iq(w1, node, "high"))
    assert (await inbox.next(match("item", node), TIMEOUT)).item_id == "low"
    await send(retract_iq(w1, node, "low"))
    later = await inbox.next(match("item", node), TIMEOUT)
    assert later.item_id == "later" and later.headers["k"] == "v"
    assert time.time() >= start.timestamp() - 0.05
    await send(retract_iq(w1, node, "later"))
    await inbox.assert_none(match("item", node, "done"))


async def test_a_batch_held_for_a_worker_goes_out_after_a_restart(
    xmpp_server, database_url, component, client
):
    """``pubsub#queue_batch_wait`` is a timer in memory: a restart loses it. The worker
    stays subscribed across the restart, nothing else touches the queue, and the
    restarted component's first tick (over every queue) sends the held batch."""
    proc = await component()
    alice, w1 = await client("alice", server=xmpp_server), await client("w1", server=xmpp_server)
    w1.remove_handler("Pubsub Event: Items")  # slixmpp's handler refuses several items
    node = await create_queue(alice)
    inbox = Inbox(w1)
    sub = iq(
        w1,
        f"<pubsub xmlns='{PUBSUB}'><subscribe node='{node}' jid='{w1.boundjid}'/>"
        "<options/></pubsub>",
    )
    options = {
        "pubsub#queue_requests": 4,
        "pubsub#queue_max_batch": 4,
        "pubsub#queue_batch_wait": 2000,
    }
    sub.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}options").append(  # type: ignore[union-attr]
        form_xml(SUBSCRIBE_OPTIONS, options)
    )
    await send(sub)
    await put(alice, node, "a")
    await put(alice, node, "b")
    await inbox.wait_none(match("item", node), 0.3)  # two of four: held

    await proc.restart()
    a, b = await inbox.collect(2, match("item", node), TIMEOUT)
    assert {a.item_id, b.item_id} == {"a", "b"}
    assert a.message is b.message, "the held batch came as one notification"
    await send(
        iq(
            w1,
            f"<pubsub xmlns='{PUBSUB}'><retract node='{node}'><item id='a'/><item id='b'/>"
            "</retract></pubsub>",
        )
    )
