"""The one write the pipeline makes to the service database: deleting exported rows.

Why SQLAlchemy and not Spark: Spark's JDBC source reads and appends but cannot
delete. The service's own URL and async drivers (aiosqlite, asyncpg) are used,
so no second set of credentials exists. Rows are deleted by id ranges that
``export.py`` computed from the Parquet it already wrote: every id in a range
was exported, so nothing else can be removed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sqlalchemy import column, delete, table
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from xmpp_queue.ledger_names import ID, TABLE

_ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}
_ledger = table(TABLE, column(ID))


def async_url(database_url: str) -> str:
    """The URL with the async driver the service uses (``sqlite:///`` -> aiosqlite,
    ``postgresql://`` -> asyncpg), as ``xmpp_queue.storage.engine`` does."""
    url = make_url(database_url)
    backend = {"postgres": "postgresql"}.get(url.get_backend_name(), url.get_backend_name())
    driver = _ASYNC_DRIVERS.get(backend)
    if driver is None:
        raise ValueError(f"no async driver known for {backend!r}")
    return url.set(drivername=driver).render_as_string(hide_password=False)


def delete_id_ranges(database_url: str, ranges: Sequence[tuple[int, int]]) -> int:
    """Delete ledger rows whose id lies in any of the inclusive *ranges*, in one
    transaction (all or nothing). Returns how many rows went."""
    return asyncio.run(_delete(database_url, ranges))


async def _delete(database_url: str, ranges: Sequence[tuple[int, int]]) -> int:
    engine = create_async_engine(async_url(database_url))
    try:
        deleted = 0
        async with engine.begin() as conn:
            for low, high in ranges:
                result = await conn.execute(delete(_ledger).where(_ledger.c[ID].between(low, high)))
                deleted += max(result.rowcount or 0, 0)
        return deleted
    finally:
        await engine.dispose()
