"""The admin commands on the real QueueComponent, wired as app/term.py wires them.

The other admin tests record effects as data; here they go through the glue's
own sender (``send_outcome``), so a forced unlock reaches the holder as the
XEP-0254 unlock ``<message/>``, after the command's reply.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from slixmpp import Iq, Message

from tests.kit.admin import (
    ALICE,
    DB_URL,
    SERVICE,
    STRANGER,
    Transcript,
    error_of,
    note,
    seeded,
)
from xmpp_queue.admin.commands import register_admin_commands
from xmpp_queue.admin.errors import COMMANDS_NS
from xmpp_queue.core.service import PubSubService
from xmpp_queue.xmpp.component import QueueComponent

QUEUEING = "urn:xmpp:pubsub:queueing:0"
EVENT = "http://jabber.org/protocol/pubsub#event"


@pytest.fixture
async def wired(service: PubSubService, unused_tls: None) -> AsyncIterator[Transcript]:
    component = QueueComponent(SERVICE, "secret", "127.0.0.1", 0, service)
    t = Transcript(component)
    register_admin_commands(component, service, frozenset({"admin@example.org"}), DB_URL)
    t.handshake_accepted()
    yield t
    t.close()


async def test_forced_unlock_reaches_the_holder_after_the_reply(
    wired: Transcript, service: PubSubService
) -> None:
    await seeded(service)  # ALICE holds i1
    first = await wired.execute("xmpp-queue#unlock")
    pick = await wired.step(first, fields={"node": "jobs"})
    done = await wired.step(pick, fields={"item": "i1"})
    assert note(done) == "Unlocked item 'i1' of 'jobs'; its holder was told."
    unlock = await wired.next()
    assert isinstance(unlock, Message) and unlock["to"] == ALICE.jid
    found = unlock.xml.find(f"{{{EVENT}}}event/{{{EVENT}}}items/{{{QUEUEING}}}unlock")
    assert found is not None and found.get("id") == "i1"
    again = await wired.next()  # ALICE has room again: the item is offered anew
    assert isinstance(again, Message) and again["to"] == ALICE.jid
    assert again.xml.find(f"{{{EVENT}}}event/{{{EVENT}}}items/{{{EVENT}}}item").get("id") == "i1"


async def test_service_disco_advertises_commands_and_non_admins_are_refused(
    wired: Transcript,
) -> None:
    info = await wired.request(
        f"<iq type='get' id='d1' from='{STRANGER}' to='{SERVICE}'>"
        "<query xmlns='http://jabber.org/protocol/disco#info'/></iq>"
    )
    assert isinstance(info, Iq) and COMMANDS_NS in info["disco_info"]["features"]
    listing = await wired.disco("items", COMMANDS_NS, STRANGER)
    listed = listing.xml.findall("{http://jabber.org/protocol/disco#items}query/*")
    assert {i.get("node") for i in listed} == {  # an owner's own commands only
        "xmpp-queue#push-list",
        "xmpp-queue#push-add",
        "xmpp-queue#push-remove",
        "xmpp-queue#seek",
        "xmpp-queue#snapshot",
        "xmpp-queue#snapshots",
        "xmpp-queue#snapshot-delete",
    }
    refused = await wired.execute("xmpp-queue#status", STRANGER)
    assert error_of(refused)[1] == "forbidden"
    status = await wired.execute("xmpp-queue#status")
    assert status["command"]["status"] == "completed"
