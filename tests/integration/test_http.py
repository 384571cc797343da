"""The operations listener of the component as operators run it (issue 12): real
Prosody, ``xmpp-queue run`` with an ``[http]`` table on a free loopback port, real
slixmpp publishers and workers, and ``xmpp-queue admin --json`` as the reference.

The figures of ``/metrics`` (parsed with prometheus_client's own parser) must be
the figures of the admin "list" command on the same queue.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.queue_helpers import (
    Inbox,
    create_queue,
    match,
    publish,
    retract_iq,
    send,
    set_affiliations,
    subscribe_queue,
    unique,
    wait_until,
)
from tests.kit.integration import (
    ADMIN_JID,
    PASSWORD,
    ClientFactory,
    ComponentFactory,
    ComponentProcess,
    subprocess_env,
    xmpp_queue_cli,
)
from xmpp_queue.admin.commands import ADMIN_COMMANDS
from xmpp_queue.admin_cli import PREFIX, SUBCOMMANDS
from xmpp_queue.servers import PrivateProsody

pytestmark = pytest.mark.integration

TOKEN = "integration-token-0123456789"
HTTP = {"listen": "127.0.0.1:0", "admin_token": TOKEN}


async def admin_cli(server: PrivateProsody, *args: str) -> tuple[int, str, str]:
    """``python -m xmpp_queue admin ARGS`` as admin@localhost, as an operator types it."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "xmpp_queue",
        "admin",
        "-j",
        ADMIN_JID,
        "--host",
        server.host,
        "--port",
        str(server.c2s_port),
        "--allow-plain",
        *args,
        env={**subprocess_env(), "XMPP_QUEUE_PASSWORD": PASSWORD},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def admin_json(server: PrivateProsody, *args: str) -> Any:
    code, out, err = await admin_cli(server, "--json", *args)
    assert code == 0, err
    return json.loads(out)


async def fetch(base: str, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(base + path) as r:
        return r.status, await r.text()


def metric(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return float(s.value)
    raise KeyError(f"{name}{labels} not in the scrape")


@pytest.fixture
async def ops_component(component: ComponentFactory) -> ComponentProcess:
    return await component(http=HTTP)


async def test_metrics_match_the_admin_list_command(
    ops_component: ComponentProcess, client: ClientFactory, prosody: PrivateProsody
) -> None:
    base = ops_component.http_base()
    pub = await client("pub")
    worker = await client("w1", resource=unique("w"))
    inbox = Inbox(worker)
    node = await create_queue(pub)
    await subscribe_queue(worker, node, 2)
    for n in range(6):
        await publish(pub, node, f"i{n}")
    await inbox.next(match("item", node, "i0"))
    await inbox.next(match("item", node, "i1"))
    await send(retract_iq(worker, node, "i0"))  # ack one: i2 goes out
    await inbox.next(match("item", node, "i2"))

    listed = await admin_json(prosody, "list")
    rows = {r["node"]: r for r in listed["tables"]["queues"]}
    row = rows[node]
    status, text = await fetch(base, "/metrics")
    assert status == 200

    assert metric(text, "xmpp_queue_waiting", node=node) == row["backlog"] == 3
    assert isinstance(row["oldest_waiting_seconds"], float | int)
    assert metric(text, "xmpp_queue_in_flight", node=node) == int(row["in_flight"]) == 2
    assert metric(text, "xmpp_queue_dead_letters", node=node) == int(row["dead_letters"]) == 0
    assert metric(text, "xmpp_queue_subscribers", node=node) == int(row["subscribers"]) == 1
    assert metric(text, "xmpp_queue_oldest_waiting_seconds", node=node) > 0
    assert metric(text, "xmpp_queue_published_total", node=node) == 6
    assert metric(text, "xmpp_queue_delivered_total", node=node) == 3
    assert metric(text, "xmpp_queue_acked_total", node=node) == int(row["acks_last_hour"]) == 1
    assert metric(text, "xmpp_queue_publish_to_delivery_seconds_count", node=node) == 3
    assert metric(text, "xmpp_queue_delivery_to_ack_seconds_count", node=node) == 1
    assert metric(text, "xmpp_queue_xmpp_connected") == 1
    assert metric(text, "xmpp_queue_commit_batch_operations_count") >= 1
    assert metric(text, "process_resident_memory_bytes") > 0
    # SQLite: every commit counted where it ran (at least the queue's and the items')
    loop = metric(text, "xmpp_queue_sqlite_commits_total", place="loop")
    assert loop + metric(text, "xmpp_queue_sqlite_commits_total", place="thread") >= 3
    assert metric(text, "xmpp_queue_sqlite_back_offs_total", reason="slow_commits") >= 0


async def test_health_checks(ops_component: ComponentProcess) -> None:
    base = ops_component.http_base()
    assert (await fetch(base, "/healthz"))[0] == 200
    status, body = await fetch(base, "/readyz")
    assert status == 200, body
    assert json.loads(body)["checks"] == {"xmpp": "ok", "database": "ok"}
    # `xmpp-queue probe`, what the systemd unit runs
    probe = await asyncio.to_thread(xmpp_queue_cli, "probe", "--url", base, "readyz")
    assert probe.returncode == 0 and '"ready"' in probe.stdout, probe.stderr


async def test_readyz_fails_while_the_xmpp_server_is_gone(
    prosody: PrivateProsody, tmp_path: Any
) -> None:
    """A component whose server is not there is alive but not ready."""
    from tests.kit.integration import make_component

    proc = make_component(prosody, f"sqlite:///{tmp_path / 'gone.sqlite'}", tmp_path, http=HTTP)
    # A port nobody listens on: the component keeps retrying and never connects.
    # And JSON log lines, as [logging] format = "json" promises.
    text = proc.config_path.read_text()
    text = text.replace(f"server_port = {prosody.component_port}", "server_port = 9")
    proc.config_path.write_text(text.replace("[logging]\n", '[logging]\nformat = "json"\n'))
    await asyncio.to_thread(proc.migrate)
    proc.spawn()
    try:
        await wait_until(lambda: "event=http_listening" in proc.run_log(), 30, "the listener")
        base = proc.http_base()
        assert (await fetch(base, "/healthz"))[0] == 200
        status, body = await fetch(base, "/readyz")
        assert status == 503 and "not connected" in body
        probe = await asyncio.to_thread(xmpp_queue_cli, "probe", "--url", base, "readyz")
        assert probe.returncode == 1 and "not connected" in probe.stderr
        lines = [json.loads(line) for line in proc.run_log().splitlines() if line.strip()]
        assert any(e.get("event") == "http_listening" for e in lines)
        assert any(e.get("event") == "connect_failed" for e in lines)
    finally:
        await proc.astop()


async def test_admin_cli_covers_every_command(prosody: PrivateProsody) -> None:
    assert sorted(PREFIX + n for n in SUBCOMMANDS.values()) == sorted(
        c.node for c in ADMIN_COMMANDS
    )


async def test_admin_cli_runs_each_command_with_json(
    ops_component: ComponentProcess, client: ClientFactory, prosody: PrivateProsody
) -> None:
    node = unique("cli")
    created = await admin_json(prosody, "create-node", node, "--set", "max_deliveries=1")
    assert created["status"] == "completed" and node in created["notes"][0]["text"]
    configured = await admin_json(prosody, "configure", node, "--set", "lock_timeout=120")
    assert "120" in configured["notes"][0]["text"]

    pub = await client("admin")  # a node the service created has no owner but the admins
    await set_affiliations(pub, node, [("w2@localhost", "member")])  # queues are whitelisted
    worker = await client("w2", resource=unique("w"))
    inbox = Inbox(worker)
    await subscribe_queue(worker, node, 1)
    await publish(pub, node, "a")
    await inbox.next(match("item", node, "a"))
    details = await admin_json(prosody, "details", node)
    fields = details["fields"]
    assert fields["pubsub#queue_lock_timeout"] == 120
    (lock,) = details["tables"]["locks"]
    assert (lock["item"], lock["holder"], lock["deliveries"]) == ("a", worker.boundjid.full, 1)
    assert details["tables"]["dead_letters"] == []

    code, out, err = await admin_cli(prosody, "--json", "details", unique("ghost"))
    assert code == 1 and json.loads(out)["error"]["condition"] == "bad-request"

    unlocked = await admin_json(prosody, "unlock", node, "--item", "a")  # 1 delivery: dead
    assert "Unlocked item 'a'" in unlocked["notes"][0]["text"]
    kicked = await admin_json(prosody, "kick", node, worker.boundjid.full)
    assert kicked["status"] == "completed"
    moved = await admin_json(prosody, "redrive", f"{node}/dead-letter")
    assert "Moved 1 item(s)" in moved["notes"][0]["text"]
    code, _, err = await admin_cli(prosody, "purge", node)
    assert code == 2 and "--yes" in err  # nothing sent without confirmation
    purged = await admin_json(prosody, "purge", node, "--yes")
    assert "Purged 1 item(s)" in purged["notes"][0]["text"]
    deleted = await admin_json(prosody, "delete-node", node, "--yes")
    assert "Deleted node" in deleted["notes"][0]["text"]
    status = await admin_json(prosody, "status")
    assert status["fields"]["nodes"] >= 1
    commands = await admin_json(prosody, "commands")
    assert {c["node"] for c in commands} == {c.node for c in ADMIN_COMMANDS}
