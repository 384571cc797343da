"""Issue 10's XEP-0060 points behind a real Prosody and a real ejabberd.

The ``publisher`` attribute (§7.1.2 "Item Publisher", §12 itemreply) on
notifications and item retrieval, on an ordinary node and on a queue; unsubscribe
answered with ``subscription='none'`` (§6.2.2); the description, type,
notification_type and itemreply fields through configure and publish-options
(§16.4, §7.1.5); XEP-0254's ``<options/>`` without node/jid (docs/queueing.md).
One component per server for the module (``service``), unique node ids per test.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from slixmpp import ClientXMPP

from tests.integration.queue_helpers import (
    PUBLISH_OPTIONS,
    PUBSUB,
    SUBSCRIBE_OPTIONS,
    Inbox,
    config_form,
    create_node,
    create_queue,
    expect_error,
    form_values,
    form_xml,
    iq,
    items,
    match,
    payload,
    send,
    send_presence_to_service,
    subscribe_queue,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]
Connect = Callable[..., Awaitable[ClientXMPP]]


def _item_publisher(reply: Any) -> str | None:
    item = reply.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}items/{{{PUBSUB}}}item")
    assert item is not None, ET.tostring(reply.xml, encoding="unicode")
    return item.get("publisher")


async def test_7_1_2_publisher_on_notifications_and_retrieval_when_itemreply_is_publisher(
    service: Any, connect: Connect
) -> None:
    pub, alice = await connect("pub"), await connect("alice")
    inbox = Inbox(alice)
    shown = await create_node(pub, unique("n"), itemreply="publisher")
    hidden = await create_node(pub, unique("n"))
    for node in (shown, hidden):
        await alice.plugin["xep_0060"].subscribe("queue.localhost", node, timeout=10)
        await pub.plugin["xep_0060"].publish("queue.localhost", node, id="i1", payload=payload())
    event = await inbox.next(match("item", shown, "i1"))
    assert event.attrs.get("publisher") == pub.boundjid.bare
    event = await inbox.next(match("item", hidden, "i1"))
    assert "publisher" not in event.attrs
    assert _item_publisher(await items(alice, shown)) == pub.boundjid.bare
    assert _item_publisher(await items(alice, hidden)) is None


async def test_7_1_2_a_worker_sees_who_sent_the_job(service: Any, connect: Connect) -> None:
    pub, w1 = await connect("pub"), await connect("w1")
    inbox = Inbox(w1)
    await send_presence_to_service(w1)
    node = await create_queue(pub, itemreply="publisher")
    await subscribe_queue(w1, node, 1)
    await pub.plugin["xep_0060"].publish("queue.localhost", node, id="job", payload=payload())
    event = await inbox.next(match("item", node, "job"))
    assert event.attrs.get("publisher") == pub.boundjid.bare


async def test_6_2_2_unsubscribe_answers_with_subscription_none(
    service: Any, connect: Connect
) -> None:
    pub, alice = await connect("pub"), await connect("alice")
    node = await create_node(pub, unique("n"))
    await alice.plugin["xep_0060"].subscribe("queue.localhost", node, timeout=10)
    reply = await alice.plugin["xep_0060"].unsubscribe("queue.localhost", node, timeout=10)
    sub = reply.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}subscription")
    assert sub is not None, ET.tostring(reply.xml, encoding="unicode")
    assert sub.get("subscription") == "none" and sub.get("node") == node
    assert sub.get("jid") == alice.boundjid.bare and sub.get("subid")


async def test_16_4_description_type_notification_type_itemreply_round_trip(
    service: Any, connect: Connect
) -> None:
    pub = await connect("pub")
    values = {
        "description": "Invoices to render",
        "type": "urn:xmpp:example",
        "notification_type": "normal",
        "itemreply": "publisher",
    }
    node = await create_node(pub, unique("n"), **values)
    reply = await pub.plugin["xep_0060"].get_node_config("queue.localhost", node, timeout=10)
    form = reply.xml.find(".//{jabber:x:data}x")
    current = form_values(form)
    for var, value in values.items():
        assert current[f"pubsub#{var}"] == [value]
    await pub.plugin["xep_0060"].set_node_config(
        "queue.localhost", node, config_form(notification_type="headline"), timeout=10
    )
    # §7.1.5: publish-options are preconditions on the same fields.
    good = form_xml(PUBLISH_OPTIONS, {"pubsub#itemreply": "publisher"})
    bad = form_xml(PUBLISH_OPTIONS, {"pubsub#notification_type": "normal"})
    for options, ok in ((good, True), (bad, False)):
        stanza = iq(
            pub,
            f"<pubsub xmlns='{PUBSUB}'><publish node='{node}'><item id='p'>"
            f"<x xmlns='urn:xmpp:example'/></item></publish><publish-options/></pubsub>",
        )
        stanza.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}publish-options").append(options)
        if ok:
            await send(stanza)
        else:
            await expect_error(send(stanza), "conflict", "cancel", "precondition-not-met")


async def test_xep_0254_options_without_node_and_jid_belong_to_the_subscribe(
    service: Any, connect: Connect
) -> None:
    pub, w2 = await connect("pub"), await connect("w2")
    node = await create_queue(pub)
    jid = str(w2.boundjid)
    for attrs in ("", " node='' jid=''"):
        stanza = iq(
            w2,
            f"<pubsub xmlns='{PUBSUB}'><subscribe node='{node}' jid='{jid}'/>"
            f"<options{attrs}/></pubsub>",
        )
        stanza.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}options").append(
            form_xml(SUBSCRIBE_OPTIONS, {"pubsub#queue_requests": 2})
        )
        reply = await send(stanza)
        sub = reply.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}subscription")
        assert sub is not None and sub.get("subscription") == "subscribed", attrs
    stanza = iq(
        w2,
        f"<pubsub xmlns='{PUBSUB}'><subscribe node='{node}' jid='{jid}'/>"
        "<options node='elsewhere'/></pubsub>",
    )
    stanza.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}options").append(
        form_xml(SUBSCRIBE_OPTIONS, {"pubsub#queue_requests": 2})
    )
    await expect_error(send(stanza), "bad-request", "modify")
