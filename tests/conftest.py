"""Fixtures shared by every test directory: where PostgreSQL is, and the CI rule.

The CI rule: a test that needs something this machine lacks (PostgreSQL,
Prosody, ejabberd) skips with a reason on a developer's machine, and FAILS when
the environment variable ``CI`` is set, because ``.ci/run`` installs and
starts all of them: there, a skip would hide a broken setup.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import NoReturn

import pytest

PG_ENV = "XMPP_QUEUE_TEST_PG_URL"
PG_EXAMPLE = "postgresql://postgres@127.0.0.1:5432/test"


def in_ci() -> bool:
    """Whether we run in CI (``CI`` set to anything but empty/0/false/no)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing(reason: str, *, module: bool = False) -> NoReturn:
    """Skip for want of *reason* (the whole module when called at its top, *module*),
    or fail under CI, where nothing may be missing."""
    if in_ci():
        pytest.fail(
            f"{reason} (CI is set: .ci/run provides it, so this is a broken setup)",
            pytrace=False,
        )
    pytest.skip(reason, allow_module_level=module)


@pytest.fixture(scope="session")
def pg_url() -> str:
    """The PostgreSQL URL of the test server (``XMPP_QUEUE_TEST_PG_URL``)."""
    url = os.environ.get(PG_ENV, "").strip()
    if not url:
        missing(f"PostgreSQL not configured: set {PG_ENV}={PG_EXAMPLE} (.ci/run does)")
    return url


def _plain_dsn(url: str) -> str:
    """``postgresql+asyncpg://...`` → ``postgresql://...`` (what asyncpg itself accepts)."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme.split('+', 1)[0]}{sep}{rest}"


def _with_database(url: str, name: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(database=name).render_as_string(hide_password=False)


def _admin_sql(url: str, statement: str) -> None:
    """Run one statement outside a transaction (CREATE/DROP DATABASE need that).

    In a worker thread with its own event loop: fixtures may be set up while
    a test's loop is already running, where ``asyncio.run`` is not allowed.
    """

    async def run() -> None:
        import asyncpg

        conn = await asyncpg.connect(_plain_dsn(url), timeout=10)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, run()).result()


@pytest.fixture
def pg_database(pg_url: str) -> Iterator[str]:
    """A brand-new, empty PostgreSQL database for one test (dropped afterwards).

    A database of its own, not a shared one emptied between tests: the
    component under test runs in another process, and a test may leave it
    holding connections until it is killed.
    """
    name = f"xq_test_{uuid.uuid4().hex[:12]}"
    _admin_sql(pg_url, f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(pg_url, name)
    finally:
        _admin_sql(pg_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
