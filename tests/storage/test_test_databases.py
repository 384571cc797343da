"""The test kit's PostgreSQL databases: made by the run, dropped by it, nothing else touched.

Why: the suite once dropped the ``public`` schema of whatever database
``XMPP_QUEUE_TEST_PG_URL`` named; pointing it at a real database wiped it, and two
runs at once emptied each other's tables.
"""

from __future__ import annotations

import pytest

from tests.kit import pg


def _exists(name: str) -> bool:
    async def ask() -> bool:
        import asyncpg

        conn = await asyncpg.connect(pg.plain_dsn(pg.server_url()), timeout=10)
        try:
            return bool(await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name))
        finally:
            await conn.close()

    return pg.in_thread(ask())


def test_a_database_the_run_did_not_create_is_never_dropped() -> None:
    named = pg.with_database("postgresql://postgres@127.0.0.1:5432/test", "production")
    with pytest.raises(ValueError, match="not a database this test run created"):
        pg.drop(named)
    with pytest.raises(ValueError, match="not a database this test run created"):
        pg.create("copy", template=named)


@pytest.mark.postgres
def test_a_scratch_database_is_the_runs_own_and_gone_after_it(pg_url: str) -> None:
    with pg.scratch("kit") as url:
        name = pg.database_of(url)
        assert name.startswith(f"xq_t{pg.RUN_ID}_kit_")
        assert name != pg.database_of(pg_url)
        assert _exists(name)
    assert not _exists(name)


@pytest.mark.postgres
def test_the_storage_suite_works_in_a_database_of_its_own(pg_migrated: str, pg_url: str) -> None:
    assert pg.database_of(pg_migrated).startswith(f"xq_t{pg.RUN_ID}_store_")
    assert pg.database_of(pg_migrated) != pg.database_of(pg_url)
