"""The private servers the other suites stand on: they start, serve, route, and stop.

What is checked: a private Prosody and a private ejabberd start on free
loopback ports with their own files, a client logs in, an external component
is accepted with its secret and refused without it, stanzas for one
component never reach another (ejabberd's ``global_routes`` pitfall), and
stop leaves no process, port or directory behind. Only slixmpp is used on the
component side here: these tests hold before and apart from our component.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from typing import Any

import pytest
from slixmpp import ComponentXMPP
from slixmpp.exceptions import IqError

from tests.kit.env import missing
from xmpp_queue.servers import PrivateEjabberd, PrivateProsody, ServerNotInstalled
from xmpp_queue.servers._process import pid_alive, port_accepts

TIMEOUT = 10.0
XmppServer = Any  # PrivateProsody | PrivateEjabberd (conftest.XmppServer)


class RawComponent:
    """A bare slixmpp component (disco only) that records the stanzas it is sent."""

    def __init__(self, server: XmppServer, jid: str, secret: str) -> None:
        self.xmpp = ComponentXMPP(jid, secret, server.host, server.component_port)
        self.xmpp.enable_direct_tls = False
        self.xmpp.register_plugin("xep_0030")
        self.xmpp.plugin["xep_0030"].add_identity("automation", "rpc", name="raw test component")
        self.received: list[Any] = []  # every IQ request and message routed to us
        self.xmpp.add_filter("in", self._record)

    def _record(self, stanza: Any) -> Any:
        if stanza.name == "message" or (stanza.name == "iq" and stanza["type"] in ("get", "set")):
            self.received.append(stanza)
        return stanza

    async def session(self) -> str:
        """Connect; "ok" once the handshake is accepted, else the stream error or "closed"."""
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[str] = loop.create_future()

        def finish(value: str) -> None:
            if not outcome.done():
                outcome.set_result(value)

        self.xmpp.add_event_handler("session_start", lambda _: finish("ok"))
        self.xmpp.add_event_handler(
            "stream_error", lambda e: finish(e["condition"] or "stream-error")
        )
        self.xmpp.add_event_handler("disconnected", lambda _: finish("closed"))
        self.xmpp.connect()
        try:
            return await asyncio.wait_for(outcome, TIMEOUT)
        finally:
            self.xmpp.cancel_connection_attempt()  # never retry behind a test's back

    async def close(self) -> None:
        self.xmpp.cancel_connection_attempt()
        if self.xmpp.transport is not None:
            await asyncio.wait_for(self.xmpp.disconnect(wait=1.0), 5.0)


@pytest.fixture
async def raw_components() -> AsyncIterator[list[RawComponent]]:
    made: list[RawComponent] = []
    yield made
    for comp in made:
        await comp.close()


# --- lifecycle, on instances of the test's own ------------------------------------------


async def test_private_prosody_starts_serves_and_stops_cleanly(client: Any) -> None:
    if shutil.which("prosody") is None:
        missing(str(ServerNotInstalled("prosody", "prosody")))
    server = PrivateProsody({"lifecycle.localhost": "secret"}, {"carol": "pw"})
    async with server:  # the async API the demo uses
        pid, workdir = server.pid, server.workdir
        assert pid is not None and workdir is not None
        assert server.config_path.parent == workdir
        config = server.config_path.read_text()
        assert "network_settings = { nagle = false }" in config
        assert 'interfaces = { "127.0.0.1" }' in config
        assert 'Component "lifecycle.localhost"' in config
        assert {server.c2s_port, server.component_port}.isdisjoint({5222, 5269, 5347})
        assert port_accepts(server.c2s_port) and port_accepts(server.component_port)

        carol = await client("carol", password="pw", server=server)
        assert carol.boundjid.bare == "carol@localhost"
    assert not pid_alive(pid)
    assert not port_accepts(server.c2s_port) and not port_accepts(server.component_port)
    assert not workdir.exists()


async def test_private_ejabberd_starts_serves_and_stops_cleanly(client: Any) -> None:
    server = PrivateEjabberd({"lifecycle.localhost": "secret"}, {"carol": "pw"})
    try:
        await asyncio.to_thread(server.start)
    except Exception as exc:  # the fixture's policy: skip without ejabberd, fail in CI
        if isinstance(exc, ServerNotInstalled) or "needs root" in str(exc):
            missing(str(exc))
        raise
    try:
        pid, workdir = server.pid, server.workdir
        assert pid is not None and workdir is not None
        assert server.node != "ejabberd@localhost" and server.node.endswith("@localhost")
        config = server.config_path.read_text()
        assert "global_routes: false" in config
        assert '"lifecycle.localhost":' in config
        ports = {server.c2s_port, server.component_port, server.dist_port}
        assert len(ports) == 3 and ports.isdisjoint({5222, 5269, 5347, 4369})
        assert port_accepts(server.dist_port)  # our own distribution port, not epmd

        carol = await client("carol", password="pw", server=server)
        assert carol.boundjid.bare == "carol@localhost"
    finally:
        await asyncio.to_thread(server.stop)
    assert not pid_alive(pid)
    assert not port_accepts(server.c2s_port) and not port_accepts(server.dist_port)
    assert not workdir.exists()


# --- the shared session servers, both kinds ----------------------------------------------


async def test_a_user_logs_in_and_reaches_the_server(
    xmpp_server: XmppServer, client: Any, accounts: Any
) -> None:
    alice = await client("alice")
    assert alice.boundjid.bare == f"alice@{accounts.domain}"
    info = await alice.plugin["xep_0030"].get_info(jid=accounts.domain, timeout=TIMEOUT)
    categories = {identity[0] for identity in info["disco_info"]["identities"]}
    assert "server" in categories


async def test_a_wrong_password_is_refused(xmpp_server: XmppServer, client: Any) -> None:
    with pytest.raises(ConnectionError, match="authentication failed"):
        await client("bob", password="not-the-password")


async def test_a_component_with_its_secret_is_routed_its_stanzas_only(
    xmpp_server: XmppServer, client: Any, accounts: Any, raw_components: list[RawComponent]
) -> None:
    spare = RawComponent(xmpp_server, accounts.spare_jid, accounts.spare_secret)
    raw_components.append(spare)
    assert await spare.session() == "ok"
    alice = await client("alice")

    info = await alice.plugin["xep_0030"].get_info(jid=accounts.spare_jid, timeout=TIMEOUT)
    assert ("automation", "rpc") in {i[:2] for i in info["disco_info"]["identities"]}
    assert len(spare.received) == 1

    # queue.localhost is declared but not connected: the server answers with an
    # error, and the stanza is NOT handed to the component that is connected.
    with pytest.raises(IqError):
        await alice.plugin["xep_0030"].get_info(jid=accounts.component_jid, timeout=TIMEOUT)
    assert len(spare.received) == 1


async def test_a_component_with_a_wrong_secret_is_refused(
    xmpp_server: XmppServer, accounts: Any, raw_components: list[RawComponent]
) -> None:
    intruder = RawComponent(xmpp_server, accounts.spare_jid, accounts.spare_secret + "-wrong")
    raw_components.append(intruder)
    assert await intruder.session() != "ok"


async def test_the_shipped_prosody_example_lets_a_new_stream_replace_a_hung_one(
    prosody: XmppServer, accounts: Any, raw_components: list[RawComponent]
) -> None:
    """High availability needs it: a standby that took the lease must replace the
    stream of an old process that hangs (examples/prosody.cfg.lua, which the
    session's Prosody runs, sets component_conflict_resolve globally)."""
    old = RawComponent(prosody, accounts.spare_jid, accounts.spare_secret)
    raw_components.append(old)
    assert await old.session() == "ok"
    replaced: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    old.xmpp.add_event_handler(
        "disconnected", lambda _: replaced.done() or replaced.set_result(None)
    )
    new = RawComponent(prosody, accounts.spare_jid, accounts.spare_secret)
    raw_components.append(new)
    assert await new.session() == "ok"
    await asyncio.wait_for(replaced, TIMEOUT)
