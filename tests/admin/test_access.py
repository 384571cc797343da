"""Who may see and run the admin commands, and how sessions are kept to their owner.

XEP-0050 sections in the test names: §2.2 command list, §2.4 execution and
cancel, §3.3 session lifetime, §3.4 actions, §4.4 errors.
"""

from __future__ import annotations

import logging

import pytest
from slixmpp import ComponentXMPP, Iq

from tests.kit.admin import (
    ALICE,
    OTHER_ADMIN,
    OWNER,
    SERVICE,
    STRANGER,
    Monotonic,
    Transcript,
    error_of,
    form_of,
    make_queue,
    make_worker,
    note,
    options,
    publish,
)
from xmpp_queue.admin.commands import ADMIN_COMMANDS, AdminCommandSet
from xmpp_queue.admin.errors import COMMANDS_NS
from xmpp_queue.core.model import SYSTEM
from xmpp_queue.core.service import PubSubService
from xmpp_queue.xmpp.refusals import RefusalLog

ALL_NODES = [c.node for c in ADMIN_COMMANDS]
OWNER_NODES = [c.node for c in ADMIN_COMMANDS if c.owners_may]
ADMIN_ONLY = [n for n in ALL_NODES if n not in OWNER_NODES]


def item_nodes(reply: Iq) -> list[str]:
    """The command nodes of a disco#items reply, in document order."""
    found = reply.xml.findall("{http://jabber.org/protocol/disco#items}query/*")
    return [item.get("node", "") for item in found]


async def test_2_2_admin_sees_every_command_in_the_list(transcript: Transcript) -> None:
    reply = await transcript.disco("items", COMMANDS_NS)
    assert reply["type"] == "result"
    assert reply["disco_items"]["node"] == COMMANDS_NS
    assert item_nodes(reply) == ALL_NODES
    names = [i[2] for i in reply["disco_items"]["items"]]
    assert "Queue overview" in names and "Service status" in names
    assert {i[0] for i in reply["disco_items"]["items"]} == {transcript.component.boundjid}


async def test_2_2_admin_jids_compare_as_bare_normalised_jids(transcript: Transcript) -> None:
    # Configured as ROOT@example.org; the server stamps root@example.org/shell.
    assert item_nodes(await transcript.disco("items", COMMANDS_NS, OTHER_ADMIN)) == ALL_NODES


async def test_2_2_non_admin_sees_only_the_owners_commands(transcript: Transcript) -> None:
    reply = await transcript.disco("items", COMMANDS_NS, STRANGER)
    assert reply["type"] == "result"
    assert item_nodes(reply) == OWNER_NODES
    assert set(OWNER_NODES) == {
        "xmpp-queue#push-list",
        "xmpp-queue#push-add",
        "xmpp-queue#push-remove",
        "xmpp-queue#seek",
        "xmpp-queue#snapshot",
        "xmpp-queue#snapshots",
        "xmpp-queue#snapshot-delete",
    }


@pytest.mark.parametrize("node", [n for n in OWNER_NODES if "push" in n])
async def test_an_owners_command_offers_a_non_admin_only_the_queues_it_owns(
    transcript: Transcript, service: PubSubService, node: str
) -> None:
    await make_queue(service)  # owned by OWNER, not by the stranger
    info = await transcript.disco("info", node, STRANGER)
    assert info["type"] == "result"
    reply = await transcript.execute(node, STRANGER)
    assert reply["command"]["status"] == "completed"
    assert note(reply) == "There are no queues you own."
    mine = await transcript.execute(node, OWNER.jid)
    assert options(form_of(mine), "node") == ["jobs"]


async def test_2_2_command_node_info_for_admins_forbidden_to_others(
    transcript: Transcript,
) -> None:
    node = "xmpp-queue#purge"
    info = await transcript.disco("info", node)
    assert info["type"] == "result"
    assert ("automation", "command-node", None, "Purge queue") in info["disco_info"]["identities"]
    assert {COMMANDS_NS, "jabber:x:data"} <= set(info["disco_info"]["features"])
    denied = await transcript.disco("info", node, STRANGER)
    assert error_of(denied)[:3] == ("cancel", "forbidden", None)


async def test_2_2_commands_node_info_names_the_command_list(transcript: Transcript) -> None:
    info = await transcript.disco("info", COMMANDS_NS, STRANGER)
    identities = info["disco_info"]["identities"]
    assert ("automation", "command-list", None, "Ad-Hoc Commands") in identities


@pytest.mark.parametrize("node", ADMIN_ONLY)
async def test_4_4_non_admin_executing_an_admin_command_is_forbidden(
    transcript: Transcript, node: str
) -> None:
    reply = await transcript.execute(node, STRANGER)
    etype, condition, specific, text = error_of(reply)
    assert (etype, condition, specific) == ("cancel", "forbidden", None)
    assert "admins" in text
    assert transcript.sent.effects == []


async def test_4_4_non_admin_cannot_continue_an_admins_session(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    await publish(service, "jobs", "i1", "i2")
    first = await transcript.execute("xmpp-queue#purge")
    confirm = await transcript.step(first, fields={"node": "jobs"})
    for action in (None, "complete", "next", "prev", "cancel"):
        denied = await transcript.step(confirm, STRANGER, action=action, fields={"confirm": "1"})
        assert error_of(denied)[1] == "forbidden"
    assert (await service.queue_details(SYSTEM, "jobs")).backlog == 2
    assert transcript.sent.effects == []
    # The admin's session is intact.
    done = await transcript.step(confirm, fields={"confirm": "1"})
    assert done["command"]["status"] == "completed"
    assert (await service.queue_details(SYSTEM, "jobs")).backlog == 0


async def test_3_3_another_admin_cannot_use_a_session_it_did_not_start(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    first = await transcript.execute("xmpp-queue#details")
    reply = await transcript.step(first, OTHER_ADMIN, fields={"node": "jobs"})
    assert error_of(reply)[:3] == ("modify", "bad-request", "bad-sessionid")


async def test_3_3_a_session_id_of_another_command_is_refused(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    first = await transcript.execute("xmpp-queue#details")
    reply = await transcript.execute(
        "xmpp-queue#purge", sessionid=first["command"]["sessionid"], action="next"
    )
    assert error_of(reply)[:3] == ("modify", "bad-request", "bad-sessionid")


async def test_3_3_unknown_or_finished_session_is_expired(
    transcript: Transcript, service: PubSubService
) -> None:
    reply = await transcript.execute("xmpp-queue#status", sessionid="nope", action="next")
    assert error_of(reply)[:3] == ("cancel", "not-allowed", "session-expired")
    done = await transcript.execute("xmpp-queue#status")
    assert done["command"]["status"] == "completed"
    again = await transcript.step(done, action="next")
    assert error_of(again)[:3] == ("cancel", "not-allowed", "session-expired")
    assert transcript.component.plugin["xep_0050"].sessions == {}


async def test_3_3_an_idle_session_expires(
    transcript: Transcript, service: PubSubService, monotonic: Monotonic
) -> None:
    await make_queue(service)
    first = await transcript.execute("xmpp-queue#details")
    monotonic.now += 601
    await transcript.execute("xmpp-queue#status")  # any later request sweeps
    reply = await transcript.step(first, fields={"node": "jobs"})
    assert error_of(reply)[:3] == ("cancel", "not-allowed", "session-expired")


async def test_3_3_activity_keeps_a_session_alive(
    transcript: Transcript, service: PubSubService, monotonic: Monotonic
) -> None:
    await make_queue(service)
    first = await transcript.execute("xmpp-queue#purge")
    monotonic.now += 400
    confirm = await transcript.step(first, fields={"node": "jobs"})
    monotonic.now += 400
    done = await transcript.step(confirm, fields={"confirm": "0"})
    assert done["command"]["status"] == "completed"


async def test_2_4_cancel_ends_the_session_and_changes_nothing(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    await publish(service, "jobs", "i1")
    first = await transcript.execute("xmpp-queue#purge")
    confirm = await transcript.step(first, fields={"node": "jobs"})
    cancelled = await transcript.step(confirm, action="cancel")
    assert cancelled["type"] == "result"
    assert cancelled["command"]["status"] == "canceled"
    assert cancelled["command"]["sessionid"] == first["command"]["sessionid"]
    assert "nothing was changed" in note(cancelled)
    assert (await service.queue_details(SYSTEM, "jobs")).backlog == 1
    after = await transcript.step(confirm, fields={"confirm": "1"})
    assert error_of(after)[2] == "session-expired"


async def test_3_4_stages_name_their_default_action(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    first = await transcript.execute("xmpp-queue#purge")
    actions = first.xml.find(f".//{{{COMMANDS_NS}}}actions")
    assert actions is not None and actions.get("execute") == "next"
    assert first["command"]["actions"] == {"next"}
    confirm = await transcript.step(first, fields={"node": "jobs"})
    actions = confirm.xml.find(f".//{{{COMMANDS_NS}}}actions")
    assert actions is not None and actions.get("execute") == "complete"
    assert confirm["command"]["actions"] == {"complete", "prev"}


async def test_4_4_complete_on_a_stage_that_cannot_complete_is_bad_action(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    await publish(service, "jobs", "i1")
    first = await transcript.execute("xmpp-queue#purge")
    reply = await transcript.step(first, action="complete", fields={"node": "jobs"})
    assert error_of(reply)[:3] == ("modify", "bad-request", "bad-action")
    assert (await service.queue_details(SYSTEM, "jobs")).backlog == 1


async def test_4_4_prev_without_a_previous_stage_is_bad_action(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    first = await transcript.execute("xmpp-queue#purge")
    assert error_of(await transcript.step(first, action="prev"))[2] == "bad-action"


async def test_2_4_prev_goes_back_with_the_earlier_choice_kept(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    await make_queue(service, "mail")
    first = await transcript.execute("xmpp-queue#purge")
    confirm = await transcript.step(first, fields={"node": "mail"})
    back = await transcript.step(confirm, action="prev")
    assert back["command"]["status"] == "executing"
    field = form_of(back).get_fields()["node"]
    assert field["value"] == "mail"
    confirm2 = await transcript.step(back, fields={"node": "jobs"})
    assert "'jobs'" in form_of(confirm2).get_fields()["confirm"]["label"]


async def test_4_4_unknown_action_is_malformed(transcript: Transcript) -> None:
    reply = await transcript.execute("xmpp-queue#status", action="jump")
    assert error_of(reply)[:3] == ("modify", "bad-request", "malformed-action")


async def test_4_4_a_session_starts_with_execute(transcript: Transcript) -> None:
    reply = await transcript.execute("xmpp-queue#status", action="complete")
    assert error_of(reply)[:3] == ("modify", "bad-request", "bad-action")


async def test_2_4_execute_without_action_attribute_starts(transcript: Transcript) -> None:
    reply = await transcript.execute("xmpp-queue#status", action=None)
    assert reply["command"]["status"] == "completed"


async def test_4_4_unknown_command_node_is_item_not_found(transcript: Transcript) -> None:
    reply = await transcript.execute("xmpp-queue#nope")
    assert error_of(reply)[1] == "item-not-found"


async def test_effects_go_out_after_the_reply(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service)
    await make_worker(service, ALICE, 1)
    await publish(service, "jobs", "i1")
    first = await transcript.execute("xmpp-queue#purge")
    confirm = await transcript.step(first, fields={"node": "jobs"})
    queued_before_reply = transcript.queued
    done = await transcript.step(confirm, fields={"confirm": "1"})
    assert done["command"]["status"] == "completed"
    assert transcript.sent.effects, "purge of a locked item must notify"
    # The reply was queued (queued_before_reply + 1) when the effects were handed over.
    assert transcript.sent.queued_before == [queued_before_reply + 1]


async def test_refusals_are_counted_and_logged_once_per_jid_a_minute(
    service: PubSubService,
    monotonic: Monotonic,
    unused_tls: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 27 point 8 for the commands: a user knocking on admin commands, bad
    session ids and a stranger's disco are refused, counted by condition, and logged
    at most once per JID per interval (the component's refusal log)."""
    refusals = RefusalLog(monotonic, interval=60.0)
    component = ComponentXMPP(SERVICE, "secret", "127.0.0.1", 0)
    for plugin in ("xep_0030", "xep_0004", "xep_0050"):
        component.register_plugin(plugin)
    t = Transcript(component)
    AdminCommandSet(
        component,
        service,
        frozenset({"admin@example.org"}),
        send_effects=t.record_effects,
        refusals=refusals.note,
    ).install()
    t.handshake_accepted()
    outsider = "mallory@elsewhere.example/r"
    try:
        with caplog.at_level(logging.INFO):
            for n in range(30):
                reply = await t.execute(ADMIN_ONLY[n % len(ADMIN_ONLY)], STRANGER)
                assert error_of(reply)[1] == "forbidden"
            reply = await t.execute(ADMIN_ONLY[0], STRANGER, action="next", sessionid="nope")
            assert error_of(reply)[1] == "forbidden"  # not an admin: refused first
            for _ in range(5):
                reply = await t.disco("items", COMMANDS_NS, outsider)
                assert reply["error"]["condition"] == "service-unavailable"
            monotonic.now += 61
            await t.execute(ADMIN_ONLY[0], STRANGER)
    finally:
        t.close()
    assert refusals.counts == {"forbidden": 32, "service-unavailable": 5}
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(lines) == 3, lines  # eve, mallory, eve again after the interval
    assert "from=eve@example.org/x" in lines[0] and "suppressed=0" in lines[0]
    assert "from=mallory@elsewhere.example" in lines[1]
    assert lines[2].endswith("suppressed=30")
