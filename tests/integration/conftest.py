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
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from slixmpp import ClientXMPP

from tests.kit.integration import (
    COMPONENTS,
    DOMAIN,
    EJABBERD_EXAMPLE,
    PASSWORD,
    PROSODY_EXAMPLE,
    USERS,
    Accounts,
    ClientFactory,
    ComponentFactory,
    ComponentProcess,
    XmppServer,
    _server_for,
    _start,
    login,
    logout,
    make_component,
    new_client,
    xmpp_queue_cli,
)
from xmpp_queue.servers import PrivateEjabberd, PrivateProsody
from xmpp_queue.servers.shipped import read_ejabberd_listener, read_prosody_example


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
