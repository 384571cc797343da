"""The test kit: every helper the suites share that is not a fixture.

Test modules import from here (``tests.kit`` and its modules); conftest modules
hold fixtures only, and nothing imports from them.

- here: :class:`FakeClock`, the core-level actors, :func:`build_service`;
- ``env``: the CI rule (:func:`~tests.kit.env.missing`);
- ``pg``: PostgreSQL databases a test run creates and drops;
- ``stores``: an empty, migrated database per storage test;
- ``stanzas``: the protocol suite's in-memory stream and stanza helpers;
- ``admin``: the admin-command transcript and form readers;
- ``http``: the HTTP suite's service operations;
- ``ledger``: the pipeline suite's ledger rows and Spark check;
- ``integration``: private servers, component processes and clients;
- ``server_fixtures``: the server and component fixtures two suites use, registered
  by ``tests/conftest.py`` (``pytest_plugins``), the kit's one module of fixtures.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from xmpp_queue.core.model import Actor, NodeConfig
from xmpp_queue.core.ports import Clock, Store
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess

ADMIN_JID = "admin@example.org"

OWNER = Actor("owner@example.org/desk")
PUB = Actor("pub@example.org/engine")
ALICE = Actor("alice@example.org/a")
BOB = Actor("bob@example.org/b")
CAROL = Actor("carol@example.org/c")
EVE = Actor("eve@example.org/x")
ADMIN = Actor("admin@example.org/console")


class FakeClock:
    """Time that moves only when a test says so."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def build_service(
    store: Store,
    clock: Clock,
    domain: str = "example.org",
    *,
    settings: ServiceSettings | None = None,
    admins: frozenset[str] | None = None,
) -> PubSubService:
    """A service over *store* with *clock*, counting subscription ids ``id1, id2...``
    (not started). Its settings: *settings* when given, else admins *admins*
    (default ``admin@<domain>``) and users of *domain*."""
    counter = itertools.count(1)
    if settings is None:
        settings = ServiceSettings(
            default_config=NodeConfig(),
            admins=frozenset({f"admin@{domain}"}) if admins is None else admins,
            access=ServiceAccess.for_domain(domain),
        )
    return PubSubService(store, clock, lambda: f"id{next(counter)}", settings)
