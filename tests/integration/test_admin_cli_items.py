"""``xmpp-queue admin`` for operators and scripts (issue 24): the login from
``-c config.toml``, typed ``--json``, affiliations, consumers, peek, publish,
move, delete-item, and a closed pipe, through a real Prosody and the component
as operators run it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from slixmpp.exceptions import IqError

from tests.integration.queue_helpers import Inbox, match, subscribe_queue, unique
from tests.kit.integration import (
    ADMIN_JID,
    PASSWORD,
    REPO_ROOT,
    ClientFactory,
    ComponentFactory,
    subprocess_env,
    xmpp_queue_cli,
)
from xmpp_queue.servers import PrivateProsody

pytestmark = pytest.mark.integration


def admin_section(server: PrivateProsody) -> str:
    return (
        "\n[admin]\n"
        f'jid = "{ADMIN_JID}"\n'
        f'password = "{PASSWORD}"\n'
        f'server = "{server.host}:{server.c2s_port}"\n'
        "plain = true\n"
    )


async def admin(config: Path, *args: str) -> tuple[int, str, str]:
    """``python -m xmpp_queue admin -c CONFIG ARGS``: the login from the file only."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "xmpp_queue",
        "admin",
        "-c",
        str(config),
        *args,
        env={k: v for k, v in subprocess_env().items() if k != "XMPP_QUEUE_PASSWORD"},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def admin_json(config: Path, *args: str) -> Any:
    code, out, err = await admin(config, "--json", *args)
    assert code == 0, err
    return json.loads(out)


async def test_an_operator_lets_a_worker_in_and_handles_items_from_the_command_line(
    component: ComponentFactory, client: ClientFactory, prosody: PrivateProsody
) -> None:
    proc = await component()
    config = proc.config_path
    config.write_text(config.read_text() + admin_section(prosody))
    checked = await asyncio.to_thread(xmpp_queue_cli, "check-config", "-c", str(config))
    assert checked.returncode == 0, checked.stderr  # `run` accepts the [admin] section

    node, other = unique("ops"), unique("other")
    await admin_json(config, "create-node", node)
    await admin_json(config, "create-node", other)
    worker = await client("w3", resource=unique("w"))
    with pytest.raises(IqError):  # new queues are whitelisted
        await subscribe_queue(worker, node, 2)

    listed = await admin_json(
        config, "affiliations", node, "--set", "w3@localhost=member", "--set", "bob@localhost=owner"
    )
    rows = {r["jid"]: r["affiliation"] for r in listed["tables"]["affiliations"]}
    assert rows == {"w3@localhost": "member", "bob@localhost": "owner"}
    inbox = Inbox(worker)
    await subscribe_queue(worker, node, 2)

    published = await admin_json(
        config, "publish", node, "--data", '{"n": 1}', "--id", "a", "--attribute", "tenant=acme"
    )
    assert published["fields"]["item"] == "a"
    event = await inbox.next(match("item", node, "a"))
    assert event.headers.get("tenant") == "acme"
    await admin_json(config, "publish", node, "--payload", "<job xmlns='urn:x'/>", "--id", "b")
    await inbox.next(match("item", node, "b"))
    await admin_json(config, "publish", node, "--payload", "<job xmlns='urn:x'/>", "--id", "c")

    consumers = (await admin_json(config, "consumers", node))["tables"]["consumers"]
    assert [(c["jid"], c["queue_requests"], c["in_flight"]) for c in consumers] == [
        (worker.boundjid.full, 2, 2)
    ]
    assert isinstance(consumers[0]["idle_seconds"], int | float)

    first = await admin_json(config, "peek", node, "--max", "2")
    assert [(i["item"], i["state"]) for i in first["tables"]["items"]] == [
        ("a", "locked"),
        ("b", "locked"),
    ]
    assert first["tables"]["items"][0]["attributes"] == {"tenant": "acme"}
    assert first["tables"]["items"][0]["published_at"].endswith("Z")
    assert (first["fields"]["count"], first["fields"]["next"]) == (3, "b")
    rest = await admin_json(config, "peek", node, "--after", "b")
    assert [i["item"] for i in rest["tables"]["items"]] == ["c"] and rest["fields"]["next"] is None

    code, out, _ = await admin(config, "--json", "move", node, "a", other)
    assert code == 1 and "locked" in json.loads(out)["error"]["text"]
    await admin_json(config, "move", node, "c", other, "--as", "c2")
    moved = await admin_json(config, "peek", other)
    assert [i["item"] for i in moved["tables"]["items"]] == ["c2"]

    await admin_json(config, "delete-item", node, "a")
    await inbox.next(match("retract", node, "a"))

    listing = await admin_json(config, "list")
    (row,) = [r for r in listing["tables"]["queues"] if r["node"] == node]
    assert (row["backlog"], row["in_flight"], row["dead_letters"]) == (0, 1, 0)
    status = await admin_json(config, "status")
    assert isinstance(status["fields"]["uptime_seconds"], int | float)
    assert status["fields"]["started"].endswith("Z")
    text = await admin(config, "consumers", node)
    assert text[0] == 0 and worker.boundjid.full in text[1]


async def test_output_into_a_closed_pipe_ends_quietly(
    component: ComponentFactory, prosody: PrivateProsody
) -> None:
    proc = await component()
    config = proc.config_path
    config.write_text(config.read_text() + admin_section(prosody))
    command = (
        f"{sys.executable} -m xmpp_queue admin -c {config} status 2>{config.parent / 'err'} "
        "| true; echo ${PIPESTATUS[0]}"
    )
    done = await asyncio.to_thread(
        subprocess.run,
        ["bash", "-c", command],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    err = (config.parent / "err").read_text()
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert done.stdout.strip() == "0"


async def test_a_config_without_an_admin_login_is_a_usage_error(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[component]\njid = "queue.localhost"\nsecret = "s"\n')
    code, _, err = await admin(config, "list")
    assert code == 2 and "[admin]" in err
    config.write_text(config.read_text() + '[admin]\njid = "a@localhost"\npasword = "x"\n')
    code, _, err = await admin(config, "list")
    assert code == 2 and "admin.pasword: unknown key" in err


async def test_the_example_publisher_creates_a_queue_with_its_members(
    component: ComponentFactory, client: ClientFactory, prosody: PrivateProsody
) -> None:
    await component()
    node = unique("members")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(REPO_ROOT / "examples" / "publisher.py"),
        *("--jid", "pub@localhost", "--password", PASSWORD, "--service", "queue.localhost"),
        *("--node", node, "--host", prosody.host, "--port", str(prosody.c2s_port), "--plain"),
        *("--create", "--member", "w4@localhost", "--count", "1"),
        env=subprocess_env(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, out.decode(errors="replace")
    member = await client("w4", resource=unique("w"))
    inbox = Inbox(member)
    await subscribe_queue(member, node, 1)
    await inbox.next(match("item", node))
    stranger = await client("w5", resource=unique("w"))
    with pytest.raises(IqError):
        await subscribe_queue(stranger, node, 1)
