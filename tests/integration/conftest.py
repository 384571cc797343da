"""Integration fixtures: real XMPP servers, the component as users run it, real clients.

- ``prosody`` / ``ejabberd`` / ``xmpp_server`` (real private servers) and
  ``component`` (the component as an operator runs it) are shared with the
  pipeline's end-to-end tests, so they live in ``tests/kit/server_fixtures.py``,
  registered for every directory by ``tests/conftest.py``.
- ``database_url``: a fresh database for ``component``, parametrised over
  SQLite and PostgreSQL.
- ``shared_component``: one component per test module (SQLite), for suites
  whose tests can share a service (they use unique node names).
- ``client``: a factory of logged-in slixmpp clients on the test's event loop
  (no ``process()``), disconnected at teardown.
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
    PASSWORD,
    Accounts,
    ClientFactory,
    ComponentProcess,
    XmppServer,
    _server_for,
    login,
    logout,
    make_component,
    new_client,
    xmpp_queue_cli,
)

LOG_TAIL = 8000  # characters of each component log shown with a failure


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test shows the end of what each of its component processes logged.

    A rare failure in CI (a timeout under load) can then be read from the run's
    output instead of only retried: the logs live in the test's temporary
    directory, which pytest removes a few runs later."""
    outcome: Any = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    for name, text in component_logs(getattr(item, "funcargs", {})):
        report.sections.append((f"component log {name}", text[-LOG_TAIL:]))


def component_logs(funcargs: dict[str, object]) -> list[tuple[str, str]]:
    """(log file name, its text) of every component process a test's fixtures hold:
    a ``ComponentProcess`` itself, or a cluster of them (its ``procs``)."""
    logs: list[tuple[str, str]] = []
    for value in funcargs.values():
        procs = getattr(value, "procs", None)
        found = procs if isinstance(procs, list) else [value]
        for proc in found:
            if isinstance(proc, ComponentProcess):
                logs.append((proc.log_path.name, proc.log_text()))
    return logs


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
