"""The server and component fixtures more than one suite uses: registered once for
every test directory (``pytest_plugins`` in ``tests/conftest.py``), never imported.

- ``prosody`` / ``ejabberd``: one private server per test session (loopback,
  free ports, own config and data), running the component settings of the
  shipped examples (``examples/prosody.cfg.lua``, ``examples/ejabberd.yml``),
  with the component ``queue.localhost`` (and a spare ``spare.localhost``) and
  the users pub, w1..w5, admin, alice, bob (password "pass"). ``xmpp_server``
  is the same, parametrised over both, for tests that must hold on either server.
- ``component``: a factory that writes a config file, runs
  ``python -m xmpp_queue migrate -c FILE`` and then ``python -m xmpp_queue run
  -c FILE`` in a subprocess (exactly what an operator types), waits until the
  component logs ``event=connected``, and stops it at teardown. Its database
  is SQLite in the test's directory, or ``database_url`` when the test asks for
  that fixture (``tests/integration/conftest.py``: SQLite and PostgreSQL).

Why here and not in the integration suite's conftest: the pipeline's end-to-end
tests run the same servers and component, and no module may import a conftest.
A server fixture follows ``missing()``: skip on a machine without the package,
fail under CI.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.integration import (
    COMPONENTS,
    DOMAIN,
    EJABBERD_EXAMPLE,
    PASSWORD,
    PROSODY_EXAMPLE,
    USERS,
    ComponentFactory,
    ComponentProcess,
    XmppServer,
    _server_for,
    _start,
    make_component,
)
from xmpp_queue.servers import PrivateEjabberd, PrivateProsody
from xmpp_queue.servers.shipped import (
    read_ejabberd_listener,
    read_ejabberd_stanza_limit,
    read_prosody_example,
)


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
    """Its component listener takes the shipped example's options (global_routes) and
    its stanza limit: what the component sends must fit the limit operators copy."""
    server = PrivateEjabberd(
        COMPONENTS,
        dict.fromkeys(USERS, PASSWORD),
        domain=DOMAIN,
        service_options=read_ejabberd_listener(EJABBERD_EXAMPLE),
        component_stanza_limit=read_ejabberd_stanza_limit(EJABBERD_EXAMPLE),
    )
    _start(server, "ejabberd")
    yield server
    server.stop()


@pytest.fixture(scope="session", params=["prosody", "ejabberd"])
def xmpp_server(request: pytest.FixtureRequest) -> XmppServer:
    """Prosody, then ejabberd: a test using this runs once against each."""
    server: XmppServer = request.getfixturevalue(request.param)
    return server


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
