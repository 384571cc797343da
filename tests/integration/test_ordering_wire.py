"""Ordered work on the wire, behind Prosody and behind ejabberd (issue 20): the
``ordering-key`` SHIM header on a ``pubsub#queue_ordered`` queue, and a
``pubsub#queue_single_active`` queue handing over when its worker leaves
(test_ordering_restart.py kills a component in the middle of a key).

Raw stanzas from slixmpp clients, as a worker in any language would send them.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.integration.queue_helpers import (
    PUBSUB,
    TIMEOUT,
    Inbox,
    create_queue,
    iq,
    match,
    retract_iq,
    send,
    send_presence_to_service,
    subscribe_queue,
    unique,
    unlock_iq,
)
from tests.integration.test_message_model_wire import put
from tests.kit.integration import logout

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]


async def test_the_issue_scenario_one_item_of_a_key_at_a_time(connect):
    """Four items of one customer, two workers with window 2: A1 alone in flight; a
    nack gives A1 again (attempt 2) before A2; B is never held up by A."""
    alice, w1, w2 = await connect("alice"), await connect("w1"), await connect("w2")
    node = await create_queue(alice, queue_ordered=True, queue_retry_delay=0)
    inboxes = {w.boundjid.full: Inbox(w) for w in (w1, w2)}
    workers = {w.boundjid.full: w for w in (w1, w2)}
    await subscribe_queue(w1, node, 2)
    await subscribe_queue(w2, node, 2)
    for n in range(1, 5):
        await put(alice, node, f"A{n}", **{"ordering-key": "A"})
    await put(alice, node, "B1", **{"ordering-key": "B"})

    async def next_delivery():  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            for jid, inbox in inboxes.items():
                found = inbox.take(match("item", node))
                if found:
                    return jid, found
            await asyncio.sleep(0.02)
        raise AssertionError("no delivery")

    seen: dict[str, str] = {}
    while len(seen) < 2:
        jid, events = await next_delivery()
        seen.update({e.item_id: jid for e in events})
    assert set(seen) == {"A1", "B1"}
    for inbox in inboxes.values():
        await inbox.assert_none(match("item", node, "A2"))

    holder = workers[seen["A1"]]
    await send(unlock_iq(holder, node, "A1"))
    jid, events = await next_delivery()
    (again,) = events
    assert again.item_id == "A1" and again.headers["delivery-attempt"] == "2"

    for n in range(1, 5):
        holder = workers[jid]
        await send(retract_iq(holder, node, f"A{n}"))
        if n < 4:
            jid, events = await next_delivery()
            assert [e.item_id for e in events] == [f"A{n + 1}"]


async def test_a_single_active_queue_hands_over_in_order(connect):
    alice, w1, w2 = await connect("alice"), await connect("w3"), await connect("w4")
    node = await create_queue(alice, queue_single_active=True, queue_retry_delay=30)
    first, second = Inbox(w1), Inbox(w2)
    await subscribe_queue(w1, node, 2)
    await subscribe_queue(w2, node, 2)
    for n in range(1, 5):
        await put(alice, node, f"i{n}")
    got = [e.item_id for e in await first.collect(2, match("item", node), TIMEOUT)]
    assert got == ["i1", "i2"]
    await second.assert_none(match("item", node))
    leave = f"<unsubscribe node='{node}' jid='{w1.boundjid}'/>"
    await send(iq(w1, f"<pubsub xmlns='{PUBSUB}'>{leave}</pubsub>"))
    # Released at once, not after the 30 s retry delay: the next worker takes them in order.
    taken = [e.item_id for e in await second.collect(2, match("item", node), TIMEOUT)]
    assert taken == ["i1", "i2"]
    await send(retract_iq(w2, node, "i1"))
    assert (await second.next(match("item", node), TIMEOUT)).item_id == "i3"


async def test_a_departed_active_worker_hands_over_at_once_in_order(connect, pool):
    """The active worker goes offline (its server sends unavailable presence): its
    locks are released without the 30 s retry delay and the standby takes them in
    their order, keys included."""
    alice, standby = await connect("alice"), await connect("w2")
    node = await create_queue(
        alice, queue_single_active=True, queue_ordered=True, queue_retry_delay=30
    )
    leaver = await pool.get("w5", fresh=True, resource=unique("leaver"))
    await send_presence_to_service(leaver)
    first, second = Inbox(leaver), Inbox(standby)
    await subscribe_queue(leaver, node, 2)
    await subscribe_queue(standby, node, 2)
    for item_id, key in (("a1", "a"), ("b1", "b"), ("a2", "a")):
        await put(alice, node, item_id, **{"ordering-key": key})
    got = [e.item_id for e in await first.collect(2, match("item", node), TIMEOUT)]
    assert got == ["a1", "b1"]
    await second.assert_none(match("item", node))
    await logout(leaver)
    taken = await second.collect(2, match("item", node), TIMEOUT)
    assert [(e.item_id, e.headers["ordering-key"]) for e in taken] == [("a1", "a"), ("b1", "b")]
    await send(retract_iq(standby, node, "a1"))
    assert (await second.next(match("item", node), TIMEOUT)).item_id == "a2"
