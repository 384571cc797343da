"""Fixtures shared by every test directory: PostgreSQL databases of the test's own.

Helpers that are not fixtures (the CI rule, the database helpers, the fake
clock, the service factory) live in ``tests/kit``; test modules import from
there, never from a conftest module.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kit import pg

# Fixtures more than one directory uses (servers, the component process): defined in
# the kit, registered here once, so no test module imports them from a conftest.
pytest_plugins = ["tests.kit.server_fixtures", "tests.kit.shards"]


@pytest.fixture(scope="session")
def pg_url() -> str:
    """The PostgreSQL server of the tests (``XMPP_QUEUE_TEST_PG_URL``): only for
    building other URLs; no test writes to the database it names."""
    return pg.server_url()


@pytest.fixture
def pg_database() -> Iterator[str]:
    """A brand-new, empty PostgreSQL database for one test (dropped afterwards).

    A database of its own, not a shared one emptied between tests: the
    component under test runs in another process, and a test may leave it
    holding connections until it is killed.
    """
    with pg.scratch("it") as url:
        yield url
