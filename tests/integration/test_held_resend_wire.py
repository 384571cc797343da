"""After a restart the service announces every held item to its holder again
(docs/queueing.md, "After a restart"), through Prosody and ejabberd, on SQLite and
PostgreSQL.

The worker here is a bare XMPP client that takes its two notices and does
nothing: what a worker looks like whose notices were committed but never sent
before a crash. After the component restarts on the same database, the same two
items arrive again, same attempt, marked ``delivery-resent``; the third item
still waits (the window is full), and an ack makes room for it as usual.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.queue_helpers import (
    Inbox,
    create_queue,
    match,
    publish,
    retract_iq,
    send,
    subscribe_queue,
    unique,
)

pytestmark = pytest.mark.integration


async def test_held_items_are_announced_again_after_a_restart(
    xmpp_server: Any, component: Any, client: Any, database_url: str
) -> None:
    proc = await component(server=xmpp_server, database_url=database_url)
    owner = await client("pub", server=xmpp_server)
    worker = await client("w1", server=xmpp_server)
    inbox = Inbox(worker)
    node = await create_queue(owner, unique("held"), queue_lock_timeout=300)
    await subscribe_queue(worker, node, 2)
    for item in ("i0", "i1", "i2"):
        await publish(owner, node, item)
    first = await inbox.collect(2, match("item", node), within=30)
    assert sorted(e.item_id or "" for e in first) == ["i0", "i1"]
    assert all("delivery-resent" not in e.headers for e in first)

    await proc.astop()
    await proc.astart()

    again = await inbox.collect(2, match("item", node), within=30)
    assert sorted(e.item_id or "" for e in again) == ["i0", "i1"]
    for event in again:
        assert event.headers["delivery-resent"] == "1"
        assert event.headers["delivery-attempt"] == "1"
        assert event.payload is not None
    assert not inbox.take(match("item", node, "i2"))  # the window is still full

    await send(retract_iq(worker, node, "i0"))
    third = await inbox.next(match("item", node, "i2"), within=30)
    assert "delivery-resent" not in third.headers
    assert third.headers["delivery-attempt"] == "1"
    assert "event=held_resent notices=2" in proc.log_text()
