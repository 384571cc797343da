"""Integration fixtures: real XMPP servers, the component as users run it, real clients.

- ``prosody`` / ``ejabberd``: one private server per test session (loopback,
  free ports, own config and data), running the component settings of the
  shipped examples (``examples/prosody.cfg.lua``, ``examples/ejabberd.yml``),
  with the component ``queue.localhost``
  (and a spare ``spare.localhost``) and the users pub, w1..w5, admin, alice,
  bob (password "pass"). ``xmpp_server`` is the same, parametrised over both,
  for tests that must hold on either server.
- ``component``: a factory that writes a config file, runs
  ``python -m xmpp_queue migrate -c FILE`` and then ``python -m xmpp_queue run
  -c FILE`` in a subprocess (exactly what an operator types), waits until the
  component logs ``event=connected``, and stops it at teardown. Its database
  is SQLite in the test's directory, or ``database_url`` when the test asks for
  that fixture (parametrised over SQLite and PostgreSQL).
- ``shared_component``: one component per test module (SQLite), for suites
  whose tests can share a service (they use unique node names).
- ``client``: a factory of logged-in slixmpp clients on the test's event loop
  (no ``process()``), disconnected at teardown.

A server fixture follows ``missing()``: skip on a machine without the package,
fail under CI.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest
import pytest_asyncio
from slixmpp import ClientXMPP

import xmpp_queue
from tests.kit.env import missing
from xmpp_queue.servers import PrivateEjabberd, PrivateProsody, ServerError, ServerNotInstalled
from xmpp_queue.servers.shipped import read_ejabberd_listener, read_prosody_example

DOMAIN = "localhost"
COMPONENT_JID = "queue.localhost"
COMPONENT_SECRET = "queue-secret"
SPARE_JID = "spare.localhost"
SPARE_SECRET = "spare-secret"
COMPONENTS = {COMPONENT_JID: COMPONENT_SECRET, SPARE_JID: SPARE_SECRET}
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


@pytest.fixture(scope="session")
def accounts() -> Accounts:
    """Names, secrets and users of the session servers, for tests to refer to."""
    return Accounts()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything in this directory needs a real server: mark it ``integration``."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.integration)


# --- servers -------------------------------------------------------------------------


def _start(server: PrivateProsody | PrivateEjabberd, name: str) -> None:
    try:
        server.start()
    except ServerNotInstalled as exc:
        missing(str(exc))
    except ServerError as exc:
        if "needs root" in str(exc):
            missing(f"{name}: {exc}")
        raise


@pytest.fixture(scope="session")
def prosody() -> Iterator[PrivateProsody]:
    """Runs the shipped example's global and component settings (high availability
    depends on them: a broken example fails the take-over tests)."""
    server = PrivateProsody(
        COMPONENTS,
        dict.fromkeys(USERS, PASSWORD),
        domain=DOMAIN,
        example=read_prosody_example(PROSODY_EXAMPLE),
    )
    _start(server, "prosody")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def ejabberd() -> Iterator[PrivateEjabberd]:
    """Its component listener takes the shipped example's options (global_routes)."""
    server = PrivateEjabberd(
        COMPONENTS,
        dict.fromkeys(USERS, PASSWORD),
        domain=DOMAIN,
        service_options=read_ejabberd_listener(EJABBERD_EXAMPLE),
    )
    _start(server, "ejabberd")
    yield server
    server.stop()


@pytest.fixture(scope="session", params=["prosody", "ejabberd"])
def xmpp_server(request: pytest.FixtureRequest) -> XmppServer:
    """Prosody, then ejabberd: a test using this runs once against each."""
    server: XmppServer = request.getfixturevalue(request.param)
    return server


def _server_for(request: pytest.FixtureRequest) -> XmppServer:
    """The server a test runs against: ``xmpp_server`` when it asks for it, else Prosody."""
    name = "xmpp_server" if "xmpp_server" in request.fixturenames else "prosody"
    server: XmppServer = request.getfixturevalue(name)
    return server


# --- the component, as an operator runs it -------------------------------------------


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
        )
    )
    return ComponentProcess(config_path, workdir / f"{stem}.log", database_url, server, jid)


@pytest.fixture(scope="session")
def cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``cli("check-config", "-c", path)`` runs ``python -m xmpp_queue`` to completion."""
    return xmpp_queue_cli


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database: SQLite in the test's directory, or a new PostgreSQL one."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'queue.sqlite'}"
    url: str = request.getfixturevalue("pg_database")
    return url


ComponentFactory = Callable[..., Awaitable[ComponentProcess]]


@pytest.fixture
async def component(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[ComponentFactory]:
    """``await component(**options)`` → a migrated, running, connected component.

    Options: ``database_url`` (default: the test's ``database_url`` fixture if
    it asks for one, else SQLite in tmp_path), ``server``, ``secret``,
    ``admins``, ``queue`` (the [queue] table), ``migrate`` (False to skip it),
    ``wait`` (False: spawn and return at once).
    """
    made: list[ComponentProcess] = []

    async def start(
        database_url: str | None = None,
        *,
        server: XmppServer | None = None,
        migrate: bool = True,
        wait: bool = True,
        **options: Any,
    ) -> ComponentProcess:
        if database_url is None:
            database_url = (
                request.getfixturevalue("database_url")
                if "database_url" in request.fixturenames
                else f"sqlite:///{tmp_path / f'queue-{len(made)}.sqlite'}"
            )
        proc = make_component(
            server or _server_for(request), database_url, tmp_path / "component", **options
        )
        made.append(proc)
        if migrate:
            await asyncio.to_thread(proc.migrate)
        if wait:
            await proc.astart()
        else:
            proc.spawn()
        return proc

    yield start
    await asyncio.gather(*(proc.astop() for proc in made))


@pytest.fixture(scope="module")
def shared_component(
    xmpp_server: XmppServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ComponentProcess]:
    """One component for a whole test module (SQLite), once per server."""
    workdir = tmp_path_factory.mktemp("shared-component")
    proc = make_component(xmpp_server, f"sqlite:///{workdir / 'queue.sqlite'}", workdir)
    proc.migrate()
    proc.start()
    yield proc
    proc.stop()


# --- clients -------------------------------------------------------------------------

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


@pytest.fixture
async def client(request: pytest.FixtureRequest) -> AsyncIterator[ClientFactory]:
    """``await client("alice")`` → a logged-in ClientXMPP with the disco, forms,
    pubsub and ad-hoc plugins; on ``xmpp_server`` when the test uses it, else Prosody.

    Options: ``resource``, ``password``, ``server``, ``presence`` (False: no
    initial presence).
    """
    made: list[ClientXMPP] = []

    async def make(
        user: str = "alice",
        *,
        resource: str | None = None,
        password: str = PASSWORD,
        server: XmppServer | None = None,
        presence: bool = True,
    ) -> ClientXMPP:
        target = server or _server_for(request)
        xmpp = new_client(user, password, resource, target.domain)
        made.append(xmpp)
        return await login(xmpp, target, presence=presence)

    yield make
    await asyncio.gather(*(logout(c) for c in made), return_exceptions=True)


# --- one component and its clients per test module, behind each server ----------------


@pytest.fixture(scope="module", params=["prosody", "ejabberd"])
def service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ComponentProcess]:
    """The module's component, behind Prosody and then behind ejabberd (issue 5).

    The protocol suites share it (unique node ids keep tests apart), with
    :func:`pool`'s logged-in clients on a module-scoped event loop.
    """
    from tests.integration.queue_helpers import module_component

    server = request.getfixturevalue(request.param)
    workdir = tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2])
    proc = module_component(make_component, server, workdir)
    yield proc
    proc.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool(service: ComponentProcess) -> AsyncIterator[Any]:
    """Logged-in clients of the module's component, kept for the whole module."""
    from tests.integration.queue_helpers import ClientPool

    clients = ClientPool(service.server, new_client, login, logout)
    yield clients
    await clients.close()


@pytest.fixture
def connect(pool: Any) -> Callable[..., Awaitable[ClientXMPP]]:
    """Logged-in clients of the module's component: ``await connect("alice")``."""
    return pool.get  # type: ignore[no-any-return]
