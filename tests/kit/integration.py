"""The integration suites' helpers: private Prosody/ejabberd, the component as a
process, its config, the CLI, clients. Fixtures: tests/kit/server_fixtures.py (servers,
the component) and tests/integration/conftest.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest
from slixmpp import ClientXMPP

import xmpp_queue
from tests.kit.env import missing
from xmpp_queue.servers import PrivateEjabberd, PrivateProsody, ServerError, ServerNotInstalled

DOMAIN = "localhost"


COMPONENT_JID = "queue.localhost"


COMPONENT_SECRET = "queue-secret"


SPARE_JID = "spare.localhost"


SPARE_SECRET = "spare-secret"


SHARDED_JID = "shards.localhost"  # a sharded deployment's public name (the directory)


SHARD_JIDS = tuple(f"p{n}.{SHARDED_JID}" for n in range(3))


SHARDS_SECRET = "shards-secret"


COMPONENTS = {
    COMPONENT_JID: COMPONENT_SECRET,
    SPARE_JID: SPARE_SECRET,
    **dict.fromkeys((SHARDED_JID, *SHARD_JIDS), SHARDS_SECRET),
}


PASSWORD = "pass"


USERS = ("pub", "w1", "w2", "w3", "w4", "w5", "admin", "alice", "bob")


ADMIN_JID = f"admin@{DOMAIN}"


CLIENT_PLUGINS = ("xep_0030", "xep_0004", "xep_0060", "xep_0050")


CONNECTED_LINE = f"event=connected jid={COMPONENT_JID}"


START_TIMEOUT = 30.0  # a cold start on a busy 2-core machine imports slixmpp, lxml, SQLAlchemy


LOGIN_TIMEOUT = 15.0


REPO_ROOT = Path(xmpp_queue.__file__).resolve().parent.parent


PROSODY_EXAMPLE = REPO_ROOT / "examples" / "prosody.cfg.lua"


EJABBERD_EXAMPLE = REPO_ROOT / "examples" / "ejabberd.yml"


class XmppServer(Protocol):
    """What tests need of a private server (PrivateProsody or PrivateEjabberd)."""

    host: str
    domain: str
    c2s_port: int
    component_port: int


@dataclass(frozen=True)
class Accounts:
    """What the session servers are set up with (the ``accounts`` fixture)."""

    domain: str = DOMAIN
    component_jid: str = COMPONENT_JID
    component_secret: str = COMPONENT_SECRET
    spare_jid: str = SPARE_JID
    spare_secret: str = SPARE_SECRET
    password: str = PASSWORD
    users: tuple[str, ...] = USERS
    admin_jid: str = ADMIN_JID


def _start(server: PrivateProsody | PrivateEjabberd, name: str) -> None:
    try:
        server.start()
    except ServerNotInstalled as exc:
        missing(str(exc))
    except ServerError as exc:
        if "needs root" in str(exc):
            missing(f"{name}: {exc}")
        raise


def _server_for(request: pytest.FixtureRequest) -> XmppServer:
    """The server a test runs against: ``xmpp_server`` when it asks for it, else Prosody."""
    name = "xmpp_server" if "xmpp_server" in request.fixturenames else "prosody"
    server: XmppServer = request.getfixturevalue(name)
    return server


def subprocess_env() -> dict[str, str]:
    """The environment of ``python -m xmpp_queue``: this checkout first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def xmpp_queue_cli(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run ``python -m xmpp_queue ARGS`` to completion, capturing its output."""
    return subprocess.run(
        [sys.executable, "-m", "xmpp_queue", *args],
        env=subprocess_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, Iterable):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def config_toml(
    server: XmppServer,
    database_url: str,
    *,
    jid: str = COMPONENT_JID,
    secret: str = COMPONENT_SECRET,
    admins: Iterable[str] = (ADMIN_JID,),
    queue: Mapping[str, Any] | None = None,
    access: Mapping[str, Any] | None = None,
    limits: Mapping[str, Any] | None = None,
    log_level: str = "INFO",
    http: Mapping[str, Any] | None = None,
    push: Mapping[str, Any] | None = None,
) -> str:
    """A config.toml for the component on *server*, with an [http] table if *http*;
    [access] and [limits] left out keep their defaults (users and creators of the
    parent domain, localhost)."""
    sections: dict[str, Mapping[str, Any]] = {
        "component": {
            "jid": jid,
            "secret": secret,
            "server_host": server.host,
            "server_port": server.component_port,
        },
        "database": {"url": database_url},
        "admins": {"jids": list(admins)},
        "queue": dict(queue or {}),
        "access": dict(access or {}),
        "limits": dict(limits or {}),
        "logging": {"level": log_level},
    }
    if http is not None:
        sections["http"] = http
    if push is not None:
        sections["push"] = push
    lines: list[str] = []
    for name, values in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {toml_value(value)}" for key, value in values.items()]
        lines.append("")
    return "\n".join(lines)


@dataclass
class ComponentProcess:
    """``xmpp-queue run -c FILE`` in a subprocess, its output in ``log_path``."""

    config_path: Path
    log_path: Path
    database_url: str
    server: XmppServer
    jid: str = COMPONENT_JID
    process: subprocess.Popen[bytes] | None = None
    _log_offset: int = field(default=0, repr=False)

    # sync core (usable from fixtures of any scope) ------------------------------------
    def migrate(self) -> None:
        result = xmpp_queue_cli("migrate", "-c", str(self.config_path))
        if result.returncode != 0:
            raise RuntimeError(f"migrate failed ({result.returncode}): {result.stderr.strip()}")

    def spawn(self) -> None:
        """Start ``run`` without waiting."""
        if self.running:
            raise RuntimeError("the component is already running")
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "xmpp_queue", "run", "-c", str(self.config_path)],
                env=subprocess_env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def http_base(self) -> str:
        """``http://HOST:PORT`` of the [http] listener, read from this run's log (the
        latest: a standby's listener gives way to the active one's)."""
        for line in reversed(self.run_log().splitlines()):
            if "event=http_listening" in line:
                address = line.split("address=", 1)[1].split()[0]
                host, _, port = address.rpartition(":")
                host = f"[{host}]" if ":" in host else host
                return f"http://{host}:{port}"
        raise RuntimeError(f"no http_listening line in the log:\n{self.run_log()}")

    def connected(self) -> bool:
        """Whether this run has logged its connection (the handshake was accepted)."""
        return f"event=connected jid={self.jid}" in self.run_log()

    def _check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(
                f"the component exited with {self.process.returncode} before connecting:\n"
                + self.run_log()
            )

    def start(self, timeout: float = START_TIMEOUT) -> ComponentProcess:
        self.spawn()
        deadline = time.monotonic() + timeout
        while not self.connected():
            self._check_alive()
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"no connection within {timeout:.0f} s:\n{self.run_log()}")
            time.sleep(0.05)
        return self

    def stop(self, grace: float = 15.0) -> int | None:
        """SIGTERM (the clean shutdown an operator's Ctrl-C or systemd does); SIGKILL late."""
        process, self.process = self.process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode

    def kill(self) -> None:
        """SIGKILL: a crash, no clean shutdown."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_text(self) -> str:
        """Everything the component wrote, across restarts."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def run_log(self) -> str:
        """What the current (or last) run wrote."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(self._log_offset)
                return log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    # async variants (do not block the test's loop, where clients live) ---------------
    async def astart(self, within: float = START_TIMEOUT) -> ComponentProcess:
        self.spawn()
        deadline = time.monotonic() + within
        while not self.connected():
            self._check_alive()
            if time.monotonic() > deadline:
                await self.astop()
                raise RuntimeError(f"no connection within {within:.0f} s:\n{self.run_log()}")
            await asyncio.sleep(0.05)
        return self

    async def astop(self, grace: float = 15.0) -> int | None:
        return await asyncio.to_thread(self.stop, grace)

    async def restart(self) -> ComponentProcess:
        """Stop cleanly and start again on the same config and database."""
        await self.astop()
        return await self.astart()


def make_component(
    server: XmppServer,
    database_url: str,
    workdir: Path,
    *,
    jid: str = COMPONENT_JID,
    secret: str | None = None,
    admins: Iterable[str] = (ADMIN_JID,),
    queue: Mapping[str, Any] | None = None,
    access: Mapping[str, Any] | None = None,
    limits: Mapping[str, Any] | None = None,
    log_level: str = "INFO",
    http: Mapping[str, Any] | None = None,
    push: Mapping[str, Any] | None = None,
) -> ComponentProcess:
    """Write the config file of a component (not started, not migrated)."""
    workdir.mkdir(parents=True, exist_ok=True)
    stem = f"component-{uuid.uuid4().hex[:6]}"
    config_path = workdir / f"{stem}.toml"
    config_path.write_text(
        config_toml(
            server,
            database_url,
            jid=jid,
            secret=COMPONENTS.get(jid, COMPONENT_SECRET) if secret is None else secret,
            admins=admins,
            queue=queue,
            access=access,
            limits=limits,
            log_level=log_level,
            http=http,
            push=push,
        )
    )
    return ComponentProcess(config_path, workdir / f"{stem}.log", database_url, server, jid)


ComponentFactory = Callable[..., Awaitable[ComponentProcess]]


ClientFactory = Callable[..., Awaitable[ClientXMPP]]


def new_client(
    user: str, password: str = PASSWORD, resource: str | None = None, domain: str = DOMAIN
) -> ClientXMPP:
    """A slixmpp client set up for a plain loopback stream (not yet connected)."""
    jid = f"{user}@{domain}/{resource or 'test-' + uuid.uuid4().hex[:6]}"
    client = ClientXMPP(
        jid,
        password,
        # No TLS on the private servers: allow SASL PLAIN on the plain stream.
        plugin_config={"feature_mechanisms": {"unencrypted_plain": True}},
    )
    client.enable_direct_tls = False
    client.enable_starttls = False
    client.enable_plaintext = True
    for plugin in CLIENT_PLUGINS:
        client.register_plugin(plugin)
    return client


async def login(
    client: ClientXMPP, server: XmppServer, within: float = LOGIN_TIMEOUT, presence: bool = True
) -> ClientXMPP:
    """Connect and wait for the session; raise with the reason when it fails."""
    outcome: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def fail(reason: str) -> Callable[[Any], None]:
        def handler(event: Any) -> None:
            if not outcome.done():
                outcome.set_exception(ConnectionError(f"{client.boundjid}: {reason} ({event})"))

        return handler

    def started(_: Any) -> None:
        if not outcome.done():
            outcome.set_result(None)

    client.add_event_handler("session_start", started, disposable=True)
    client.add_event_handler("failed_all_auth", fail("authentication failed"), disposable=True)
    client.add_event_handler("connection_failed", fail("connection failed"), disposable=True)
    client.add_event_handler("disconnected", fail("disconnected"), disposable=True)
    client.connect(server.host, server.c2s_port)
    try:
        await asyncio.wait_for(outcome, within)
    except BaseException:
        client.cancel_connection_attempt()  # no reconnection loop behind a failed test
        client.abort()
        raise
    if presence:
        # Available, so the server delivers messages sent to the bare JID.
        client.send_presence()
    return client


async def logout(client: ClientXMPP) -> None:
    client.cancel_connection_attempt()
    if client.transport is None:
        return
    try:
        await asyncio.wait_for(client.disconnect(wait=1.0), 5.0)
    except (TimeoutError, ConnectionError):
        client.abort()
