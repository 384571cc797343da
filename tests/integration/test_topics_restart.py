"""Topics across a crash, on SQLite and PostgreSQL, behind Prosody and ejabberd:
the component is killed (SIGKILL) after a topic publish was fanned out and one
copy was handed to a worker but not acked; the restarted component still holds
the lock, every bound queue still has its copy, the filtered queue still has
none of the items its filter kept out, and the binding still copies new items."""

from __future__ import annotations

import pytest

from tests.integration.queue_helpers import (
    PUBSUB,
    TIMEOUT,
    Inbox,
    create_node,
    create_queue,
    items,
    match,
    retract_iq,
    send,
    subscribe_queue,
    unique,
)
from tests.integration.test_message_model_wire import put

pytestmark = [pytest.mark.integration]


def item_ids(reply) -> list[str]:  # type: ignore[no-untyped-def]
    return [i.get("id") for i in reply.xml.iter(f"{{{PUBSUB}}}item")]


async def test_a_kill_between_fan_out_and_ack_keeps_every_copy(
    xmpp_server, database_url, component, client
):
    proc = await component()
    alice, w1 = await client("alice", server=xmpp_server), await client("w1", server=xmpp_server)
    topic = await create_node(alice, unique("topic"))
    work = await create_queue(alice, queue_topic=topic, queue_retry_delay=0)
    eu = await create_queue(alice, queue_topic=topic, queue_filter='attributes.region = "eu"')
    inbox = Inbox(w1)
    await subscribe_queue(w1, work, 1)
    await put(alice, topic, "e1", region="eu")
    await put(alice, topic, "u1", region="us")
    assert (await inbox.next(match("item", work), TIMEOUT)).item_id == "e1"

    proc.kill()  # e1 locked to w1 in one queue, waiting in the other; u1 filtered out there
    await proc.astart()
    assert item_ids(await items(alice, eu)) == ["e1"]
    assert item_ids(await items(alice, work)) == ["e1", "u1"]
    await send(retract_iq(w1, work, "e1"))  # the lock survived the crash
    # The restarted component re-sends the notice of the lock it found (e1, the holder
    # may have missed it): what follows the ack is u1, and nothing else was handed out.
    assert (await inbox.next(match("item", work, "u1"), TIMEOUT)).item_id == "u1"
    assert {e.item_id for e in inbox.history if e.kind == "item"} == {"e1", "u1"}
    await put(alice, topic, "e2", region="eu")  # the binding survived too
    assert item_ids(await items(alice, eu)) == ["e1", "e2"]
