"""Admin commands (issue 4) end to end: real Prosody, the component as operators run
it, slixmpp's own ``xep_0050`` client plugin as an admin (admin@localhost) and as a
non-admin (alice), and ``examples/admin.py`` as a user would type it.

XEP-0050 sections in the test names. One component serves the module; each test
makes its own nodes (unique ids) and reads only its own rows.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from slixmpp import ClientXMPP, Iq
from slixmpp.exceptions import IqError
from slixmpp.plugins.xep_0004 import Form

from tests.integration.queue_helpers import (
    CLIENT,
    DISCO_ITEMS,
    SERVICE,
    TIMEOUT,
    Inbox,
    create_queue,
    error_info,
    item_ids,
    items,
    match,
    publish,
    subscribe_queue,
    unique,
)
from tests.kit.integration import (
    PASSWORD,
    REPO_ROOT,
    ClientFactory,
    ComponentProcess,
    make_component,
    subprocess_env,
)
from xmpp_queue.servers import PrivateProsody

pytestmark = pytest.mark.integration

COMMANDS_NS = "http://jabber.org/protocol/commands"
PREFIX = "xmpp-queue#"
COMMAND_NODES = [
    PREFIX + name
    for name in (
        "overview",
        "details",
        "consumers",
        "peek",
        "publish",
        "move",
        "delete-item",
        "affiliations",
        "purge",
        "unlock",
        "redrive",
        "kick",
        "configure",
        "seek",
        "snapshot",
        "snapshots",
        "snapshot-delete",
        "push-list",
        "push-add",
        "push-remove",
        "create-node",
        "delete-node",
        "move-node",
        "status",
    )
]


@pytest.fixture(scope="module")
def admin_component(
    prosody: PrivateProsody, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ComponentProcess]:
    """One component (SQLite, admins = admin@localhost) for the whole module."""
    workdir = tmp_path_factory.mktemp("admin-component")
    proc = make_component(prosody, f"sqlite:///{workdir / 'queue.sqlite'}", workdir)
    proc.migrate()
    proc.start()
    yield proc
    proc.stop()


def submit(values: Mapping[str, str]) -> Form:
    form = Form()
    form["type"] = "submit"
    for var, value in values.items():
        form.add_field(var=var, value=value)
    return form


async def execute(xmpp: ClientXMPP, node: str) -> Iq:
    reply: Iq = await xmpp.plugin["xep_0050"].send_command(SERVICE, node, timeout=TIMEOUT)
    return reply


async def answer(xmpp: ClientXMPP, previous: Iq, values: Mapping[str, str]) -> Iq:
    """Submit a stage's form with the action the stage offers (next, else complete)."""
    command = previous["command"]
    action = "next" if "next" in command["actions"] else "complete"
    reply: Iq = await xmpp.plugin["xep_0050"].send_command(
        SERVICE,
        command["node"],
        action=action,
        sessionid=command["sessionid"],
        payload=submit(values),
        timeout=TIMEOUT,
    )
    return reply


def result_forms(reply: Iq) -> list[Form]:
    return [s for s in reply["command"]["substanzas"] if isinstance(s, Form)]


def field_values(form: Form) -> dict[str, list[str]]:
    ns = "{jabber:x:data}"
    return {
        f.get("var", ""): [v.text or "" for v in f.findall(f"{ns}value")]
        for f in form.xml.findall(f"{ns}field")
        if f.get("var")
    }


def overview_row(reply: Iq, node: str) -> dict[str, str]:
    (table,) = result_forms(reply)
    rows = [{k: v or "" for k, v in row.items()} for row in table.get_items()]
    (row,) = [r for r in rows if r["node"] == node]
    return row


def command_error(exc: IqError) -> tuple[str, str, str | None, str]:
    """(type, condition, XEP-0050 specific condition, text) of an error reply."""
    info = error_info(exc.iq)
    error = exc.iq.xml.find(f"{{{CLIENT}}}error")
    assert error is not None
    specific = next(
        (c.tag.split("}", 1)[1] for c in error if c.tag.startswith(f"{{{COMMANDS_NS}}}")), None
    )
    return info.type, info.condition, specific, exc.iq["error"]["text"]


async def queue_with_work(client: ClientFactory) -> tuple[str, ClientXMPP, Inbox]:
    """A queue, a worker w1 holding the first item, and a second item waiting.
    Retry delay 0 (XEP-0254's immediate hand-over): an unlocked item is offered anew at once."""
    pub = await client("pub")
    worker = await client("w1", resource=unique("w"))
    inbox = Inbox(worker)
    node = await create_queue(pub, queue_retry_delay=0)
    await subscribe_queue(worker, node, 1)
    await publish(pub, node, "i1")
    await publish(pub, node, "i2")
    await inbox.next(match("item", node, "i1"))
    return node, worker, inbox


async def test_2_2_admin_sees_the_commands_others_only_the_owners_ones(
    admin_component: ComponentProcess, client: ClientFactory
) -> None:
    admin = await client("admin")
    alice = await client("alice")
    listed = await admin.plugin["xep_0050"].get_commands(SERVICE, timeout=TIMEOUT)
    found = listed.xml.findall(f"{{{DISCO_ITEMS}}}query/{{{DISCO_ITEMS}}}item")
    assert [i.get("node") for i in found] == COMMAND_NODES
    assert all(i.get("jid") == SERVICE and i.get("name") for i in found)
    hidden = await alice.plugin["xep_0050"].get_commands(SERVICE, timeout=TIMEOUT)
    owners = hidden.xml.findall(f"{{{DISCO_ITEMS}}}query/{{{DISCO_ITEMS}}}item")
    assert [i.get("node") for i in owners] == [
        PREFIX + name
        for name in (
            "seek",
            "snapshot",
            "snapshots",
            "snapshot-delete",
            "push-list",
            "push-add",
            "push-remove",
        )
    ]


async def test_2_2_command_node_info_is_forbidden_to_non_admins(
    admin_component: ComponentProcess, client: ClientFactory
) -> None:
    admin = await client("admin")
    alice = await client("alice")
    info = await admin.plugin["xep_0030"].get_info(
        jid=SERVICE, node=PREFIX + "purge", timeout=TIMEOUT
    )
    assert COMMANDS_NS in info["disco_info"]["features"]
    with pytest.raises(IqError) as denied:
        await alice.plugin["xep_0030"].get_info(jid=SERVICE, node=PREFIX + "purge", timeout=TIMEOUT)
    assert denied.value.iq["error"]["condition"] == "forbidden"


async def test_overview_and_details_show_the_live_queue(
    admin_component: ComponentProcess, client: ClientFactory
) -> None:
    node, worker, _ = await queue_with_work(client)
    admin = await client("admin")
    overview = await execute(admin, PREFIX + "overview")
    assert overview["command"]["status"] == "completed"
    row = overview_row(overview, node)
    assert (row["backlog"], row["in_flight"], row["subscribers"]) == ("1", "1", "1")

    first = await execute(admin, PREFIX + "details")
    assert first["command"]["status"] == "executing"
    details = await answer(admin, first, {"node": node})
    assert details["command"]["status"] == "completed"
    shown = field_values(result_forms(details)[0])
    assert shown["backlog"] == ["1"]
    tables = {field_values(f)["table"][0]: f for f in result_forms(details)[1:]}
    (lock,) = tables["locks"].get_items()
    assert (lock["item"], lock["holder"]) == ("i1", worker.boundjid.full)
    (subscriber,) = tables["subscribers"].get_items()
    assert subscriber["jid"] == worker.boundjid.full


async def test_4_4_non_admin_is_forbidden_and_nothing_changes(
    admin_component: ComponentProcess, client: ClientFactory
) -> None:
    node, _, _ = await queue_with_work(client)
    alice = await client("alice")
    admin = await client("admin")
    for command in (PREFIX + "purge", PREFIX + "overview", PREFIX + "status"):
        with pytest.raises(IqError) as denied:
            await execute(alice, command)
        assert command_error(denied.value)[:2] == ("cancel", "forbidden")
    # Nor can alice continue a session an admin opened.
    first = await execute(admin, PREFIX + "purge")
    confirm = await answer(admin, first, {"node": node})
    with pytest.raises(IqError) as denied:
        await answer(alice, confirm, {"confirm": "1"})
    assert command_error(denied.value)[1] == "forbidden"
    assert overview_row(await execute(admin, PREFIX + "overview"), node)["backlog"] == "1"
    cancelled = await admin.plugin["xep_0050"].send_command(
        SERVICE,
        confirm["command"]["node"],
        action="cancel",
        sessionid=confirm["command"]["sessionid"],
        timeout=TIMEOUT,
    )
    assert cancelled["command"]["status"] == "canceled"


async def test_forced_unlock_tells_the_holder_and_redelivers(
    admin_component: ComponentProcess, client: ClientFactory
) -> None:
    node, _, inbox = await queue_with_work(client)
    admin = await client("admin")
    first = await execute(admin, PREFIX + "unlock")
    pick = await answer(admin, first, {"node": node})
    done = await answer(admin, pick, {"item": "i1"})
    assert done["command"]["status"] == "completed"
    assert done["command"]["notes"] == [
        ("info", f"Unlocked item 'i1' of '{node}'; its holder was told.")
    ]
    await inbox.next(match("unlock", node, "i1"))
    # w1 is the only worker: the item comes back to it (docs/queueing.md: same one only when
    # nobody else can take it).
    await inbox.next(match("item", node, "i1"))


async def test_purge_confirms_then_notifies(
    admin_component: ComponentProcess, client: ClientFactory
) -> None:
    node, _, inbox = await queue_with_work(client)
    admin = await client("admin")
    first = await execute(admin, PREFIX + "purge")
    confirm = await answer(admin, first, {"node": node})
    assert confirm["command"]["status"] == "executing"
    done = await answer(admin, confirm, {"confirm": "1"})
    assert done["command"]["notes"][0][1].startswith(f"Purged 2 item(s) from '{node}'")
    await inbox.next(match("unlock", node, "i1"))
    await inbox.next(match("purge", node))
    pub = await client("pub")
    assert item_ids(await items(pub, node)) == []


async def test_4_4_bad_form_input_is_bad_payload(
    admin_component: ComponentProcess, client: ClientFactory
) -> None:
    node, _, _ = await queue_with_work(client)
    admin = await client("admin")
    first = await execute(admin, PREFIX + "details")
    with pytest.raises(IqError) as refused:
        await answer(admin, first, {"node": unique("ghost")})
    etype, condition, specific, text = command_error(refused.value)
    assert (etype, condition, specific) == ("modify", "bad-request", "bad-payload")
    assert "no such node" in text
    configure = await execute(admin, PREFIX + "configure")
    edit = await answer(admin, configure, {"node": node})
    with pytest.raises(IqError) as negative:
        await answer(admin, edit, {"pubsub#queue_lock_timeout": "-1"})
    assert command_error(negative.value)[2] == "bad-payload"
    assert "at least 1" in command_error(negative.value)[3]


async def test_status_hides_the_database_password(
    admin_component: ComponentProcess, client: ClientFactory
) -> None:
    admin = await client("admin")
    reply = await execute(admin, PREFIX + "status")
    shown = field_values(result_forms(reply)[0])
    assert shown["database"] == [admin_component.database_url]  # SQLite: nothing to hide
    assert int(shown["nodes"][0]) >= 0 and shown["version"][0]


# --- examples/admin.py --------------------------------------------------------------------


async def example(server: PrivateProsody, *args: str) -> tuple[int, str, str]:
    """Run examples/admin.py as admin@localhost, as an operator would."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(REPO_ROOT / "examples" / "admin.py"),
        "-j",
        "admin@localhost",
        "--server",
        f"{server.host}:{server.c2s_port}",
        "--plain",
        *args,
        env={**subprocess_env(), "XMPP_QUEUE_PASSWORD": PASSWORD},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_example_admin_client_lists_details_and_unlocks(
    admin_component: ComponentProcess, client: ClientFactory, prosody: PrivateProsody
) -> None:
    node, worker, inbox = await queue_with_work(client)

    code, out, err = await example(prosody, "list")
    assert code == 0, err
    assert "Waiting" in out and any(line.startswith(node) for line in out.splitlines())

    code, out, err = await example(prosody, "details", node)
    assert code == 0, err
    (lock_line,) = [line for line in out.splitlines() if line.startswith("i1 ")]
    assert worker.boundjid.full in lock_line

    code, out, err = await example(prosody, "unlock", node, "--item", "i1")
    assert code == 0, err
    assert f"info: Unlocked item 'i1' of '{node}'" in out
    await inbox.next(match("unlock", node, "i1"))

    code, out, err = await example(prosody, "details", unique("ghost"))
    assert code == 1 and "bad-request" in err and "no such node" in err

    code, out, err = await example(prosody, "commands")
    assert code == 0 and PREFIX + "redrive" in out


def test_example_is_runnable_without_a_server() -> None:
    """--help works from a bare checkout (argparse only; no connection)."""
    import subprocess

    result = subprocess.run(
        [sys.executable, str(Path(REPO_ROOT) / "examples" / "admin.py"), "--help"],
        env={**os.environ},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and "unlock" in result.stdout
