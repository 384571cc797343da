"""Alembic environment: online migrations through the async engine.

The URL comes from ``config.attributes["url"]`` (set by
``xmpp_queue.storage.migrations``, which is what ``xmpp-queue migrate`` and the
app use), else ``XMPP_QUEUE_DATABASE_URL``, else ``sqlalchemy.url`` in
alembic.ini (for developers running ``alembic revision --autogenerate``).

Why the options:

- The engine is ``storage.engine.make_engine``, so migrations run with the same
  durability settings and SQLite transaction control (our own BEGIN) as the
  service: DDL is transactional on SQLite too, and a failed revision leaves
  nothing half-applied.
- SQLite foreign keys are off while migrating: batch mode rebuilds a table by
  copying it and dropping the original, and with foreign keys on that drop
  would cascade-delete the rows of every child table.
- ``render_as_batch`` on SQLite only: SQLite cannot ALTER most things in place,
  so alembic's batch mode recreates the table; PostgreSQL alters directly.
- ``transaction_per_migration``: each revision commits on its own, so an
  interrupted upgrade stops at a known revision instead of rolling back all.
- ``compare_type``: autogenerate (and the test that compares the revisions
  with ``schema.metadata``) notices column type changes.
"""

from __future__ import annotations

import asyncio
import os
from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection

from xmpp_queue.storage.engine import is_sqlite, make_engine, normalize_url
from xmpp_queue.storage.schema import metadata

config = context.config
target_metadata = metadata

if config.config_file_name is not None:  # the alembic CLI with alembic.ini
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def database_url() -> str:
    url = (
        config.attributes.get("url")
        or os.environ.get("XMPP_QUEUE_DATABASE_URL")
        or config.get_main_option("sqlalchemy.url")
    )
    if not url:
        raise RuntimeError("no database URL: set XMPP_QUEUE_DATABASE_URL or sqlalchemy.url")
    return normalize_url(url)


def run_migrations_offline() -> None:
    """Emit the SQL instead of running it (``alembic upgrade head --sql``)."""
    url = database_url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        render_as_batch=is_sqlite(url),
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def do_run_migrations(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        transaction_per_migration=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def run_async_migrations() -> None:
    engine = make_engine(database_url(), foreign_keys=False)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(do_run_migrations)
    finally:
        await engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    asyncio.run(run_async_migrations())
