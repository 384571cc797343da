"""Ordered work across a crash, on SQLite and PostgreSQL, behind Prosody and behind
ejabberd: the component is killed (SIGKILL) in the middle of a key; the restarted
one still holds the key for the item in flight, and hands out the rest in order."""

from __future__ import annotations

import pytest

from tests.integration.queue_helpers import (
    TIMEOUT,
    Inbox,
    create_queue,
    match,
    retract_iq,
    send,
    subscribe_queue,
)
from tests.integration.test_message_model_wire import put

pytestmark = [pytest.mark.integration]


async def test_a_kill_in_the_middle_of_a_key_keeps_its_order(
    xmpp_server, database_url, component, client
):
    proc = await component()
    alice, w1 = await client("alice", server=xmpp_server), await client("w1", server=xmpp_server)
    node = await create_queue(alice, queue_ordered=True, queue_retry_delay=0)
    inbox = Inbox(w1)
    await subscribe_queue(w1, node, 5)
    for n in range(1, 4):
        await put(alice, node, f"A{n}", **{"ordering-key": "A"})
    await put(alice, node, "B1", **{"ordering-key": "B"})
    got = {e.item_id for e in await inbox.collect(2, match("item", node), TIMEOUT)}
    assert got == {"A1", "B1"}
    await send(retract_iq(w1, node, "A1"))
    assert (await inbox.next(match("item", node), TIMEOUT)).item_id == "A2"

    proc.kill()  # A2 in flight, A3 waiting behind it
    await proc.astart()
    await inbox.take_resent(node, ["A2", "B1"])  # announced again: the same locks
    await put(alice, node, "A4", **{"ordering-key": "A"})
    await inbox.assert_none(match("item", node))  # A2 still holds the key
    await send(retract_iq(w1, node, "A2"))  # the lock survived the crash
    assert (await inbox.next(match("item", node), TIMEOUT)).item_id == "A3"
    await send(retract_iq(w1, node, "A3"))
    assert (await inbox.next(match("item", node), TIMEOUT)).item_id == "A4"
