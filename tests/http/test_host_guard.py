"""Issue 27: the listener serves only requests that name it (DNS rebinding).

A page whose own name resolves to 127.0.0.1 makes the browser send ``Host:
evil.example:PORT``; it must read nothing (421) and post nothing. A browser's POST
from a foreign origin is refused even with the right Host. Run against the real
aiohttp listener on a free loopback port (``ops`` fixture), headers forged.
"""

from __future__ import annotations

import aiohttp
import pytest

from tests.kit.http import TOKEN, Ops
from xmpp_queue.config import parse_config
from xmpp_queue.config_error import ConfigError
from xmpp_queue.http.server import OpsServer

PATHS = ("/", "/queue?node=jobs", "/api/queues", "/api/queue?node=jobs", "/metrics", "/healthz")


async def _get(ops: Ops, path: str, host: str) -> int:
    async with ops.session.get(ops.base + path, headers={"Host": host}) as r:
        return r.status


async def _post(ops: Ops, path: str, headers: dict[str, str]) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {TOKEN}", **headers}
    async with ops.session.post(ops.base + path, json={"node": "jobs"}, headers=headers) as r:
        return r.status, await r.text()


async def test_a_foreign_host_header_reads_nothing(ops: Ops) -> None:
    await ops.service.create_node(_owner(), "jobs", {"pubsub#queue": ["1"]})
    port = ops.base.rsplit(":", 1)[1]
    for path in PATHS:
        assert await _get(ops, path, f"evil.example:{port}") == 421, path
        assert await _get(ops, path, "evil.example") == 421, path
    async with ops.session.get(ops.base + "/api/queues", headers={"Host": "evil.example"}) as r:
        assert "jobs" not in await r.text()
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}"):
        assert await _get(ops, "/api/queues", host) == 200, host


async def test_actions_refuse_a_foreign_origin_and_a_foreign_host(ops: Ops) -> None:
    await ops.service.create_node(_owner(), "jobs", {"pubsub#queue": ["1"]})
    await ops.service.publish(_owner(), "jobs", "i1", "<p/>", 4)
    port = ops.base.rsplit(":", 1)[1]
    status, _ = await _post(ops, "/api/actions/purge", {"Host": "evil.example"})
    assert status == 421
    for origin in ("http://evil.example", f"http://evil.example:{port}", "null"):
        status, _ = await _post(ops, "/api/actions/purge", {"Origin": origin})
        assert status == 403, origin
        status, _ = await _post(ops, "/api/token", {"Origin": origin})
        assert status == 403, origin
    assert len((await ops.service.get_items(_owner(), "jobs")).items) == 1  # nothing purged
    # The dashboard's own origin (and curl, which sends none) reach the action.
    status, body = await _post(ops, "/api/actions/purge", {"Origin": ops.base})
    assert status != 403 and status != 421, body


async def test_allowed_hosts_admit_a_reverse_proxys_name(ops: Ops) -> None:
    server = OpsServer(
        "127.0.0.1",
        0,
        ops.service,
        ops.metrics,
        ops.server.health,
        ops.server.actions,
        TOKEN,
        "queue.test",
        allowed_hosts=("queue.example.org",),
    )
    host, port = await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            url = f"http://{host}:{port}/api/queues"
            async with session.get(url, headers={"Host": "queue.example.org"}) as r:
                assert r.status == 200
            async with session.get(url, headers={"Host": "other.example.org"}) as r:
                assert r.status == 421
    finally:
        await server.stop()


def test_allowed_hosts_in_the_config() -> None:
    base = {"component": {"jid": "queue.example.org", "secret": "s" * 16}}
    got = parse_config({**base, "http": {"allowed_hosts": ["queue.example.org"]}})
    assert got.http is not None and got.http.allowed_hosts == ("queue.example.org",)
    for bad in ("queue.example.org:443", "a b", "x/y"):
        with pytest.raises(ConfigError):
            parse_config({**base, "http": {"allowed_hosts": [bad]}})


def _owner():  # type: ignore[no-untyped-def]
    from xmpp_queue.core.model import SYSTEM

    return SYSTEM
