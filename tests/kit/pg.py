"""PostgreSQL for tests: databases the test run creates, and only those, dropped.

``XMPP_QUEUE_TEST_PG_URL`` names a server (and the database to connect to for
``CREATE DATABASE``); the tests never write to that database. Every database a
test uses is created here under a name that holds this run's id
(``xq_t<run>_<what>_<n>``) and dropped by the same run, so two runs at once
cannot meet, and pointing the variable at a real database harms nothing in it.

:func:`drop` refuses any database this process did not create: nothing in the
suite can drop what it did not make.

Speed: the storage and pipeline suites create one migrated database per
session and empty its rows between tests (rows of a database of their own);
the integration tests, whose component runs in another process and may hold
connections until killed, take a fresh database each (:func:`create`).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import uuid
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from tests.kit.env import PG_ENV, PG_EXAMPLE, missing

T = TypeVar("T")

RUN_ID = uuid.uuid4().hex[:10]
_PREFIX = f"xq_t{RUN_ID}_"
_counter = itertools.count(1)
_created: set[str] = set()


def server_url() -> str:
    """The test server's URL (``XMPP_QUEUE_TEST_PG_URL``); skips, or fails under CI,
    when it is not set."""
    url = os.environ.get(PG_ENV, "").strip()
    if not url:
        missing(f"PostgreSQL not configured: set {PG_ENV}={PG_EXAMPLE} (.ci/run does)")
    return url


def in_thread(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run *coroutine* on its own loop in a worker thread.

    Fixtures are often first requested from inside a test's running loop, where
    ``asyncio.run`` is not allowed.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def plain_dsn(url: str) -> str:
    """``postgresql+asyncpg://...`` → ``postgresql://...`` (what asyncpg itself accepts)."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme.split('+', 1)[0]}{sep}{rest}"


def with_database(url: str, name: str) -> str:
    """*url* with its database replaced by *name*."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(database=name).render_as_string(hide_password=False)


def database_of(url: str) -> str:
    from sqlalchemy.engine import make_url

    return str(make_url(url).database)


def _admin_sql(statement: str) -> None:
    """One statement on the server, outside a transaction (CREATE/DROP DATABASE)."""

    async def run() -> None:
        import asyncpg

        conn = await asyncpg.connect(plain_dsn(server_url()), timeout=10)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    in_thread(run())


def create(what: str = "db", *, template: str | None = None) -> str:
    """Create a new, empty database (a copy of *template*, a database this run
    created, when given) and return its URL."""
    name = f"{_PREFIX}{what}_{next(_counter)}"
    clause = ""
    if template is not None:
        source = database_of(template)
        if source not in _created:
            raise ValueError(f"{source}: not a database this test run created")
        clause = f' TEMPLATE "{source}"'
    _admin_sql(f'CREATE DATABASE "{name}"{clause}')
    _created.add(name)
    return with_database(server_url(), name)


def drop(url: str) -> None:
    """Drop a database :func:`create` made (its connections too); anything else
    is refused."""
    name = database_of(url)
    if name not in _created:
        raise ValueError(f"{name}: not a database this test run created; not dropping it")
    _admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _created.discard(name)


@contextmanager
def scratch(what: str = "db", *, template: str | None = None) -> Iterator[str]:
    """A database of its own for the duration of the block (see :func:`create`)."""
    url = create(what, template=template)
    try:
        yield url
    finally:
        drop(url)


@contextmanager
def migrated(what: str) -> Iterator[str]:
    """A new database migrated to head with the real alembic ``upgrade()``."""
    from xmpp_queue.storage.migrations import upgrade

    with scratch(what) as url:
        upgrade(url)
        yield url
