"""Schema migrations as function calls: upgrade, current/head revision, up-to-date check.

The alembic scripts live in ``migrations/`` at the repository root (one history
for SQLite and PostgreSQL). :func:`migrations_dir` finds them:

1. ``XMPP_QUEUE_MIGRATIONS`` if set (a packager's escape hatch);
2. next to the source tree (a checkout or an editable install):
   ``<repo>/migrations`` relative to this file;
3. the installed data files of a regular install:
   ``<prefix>/share/xmpp-queue/migrations`` for ``sys.prefix`` and the user base
   (setup.cfg ships them with ``[options.data_files]``).

Data files rather than a top-level ``migrations`` package: a package of that
generic name in site-packages would collide with other projects' directories.

Alembic's async env.py runs its own event loop (``asyncio.run``), which cannot
start inside a running loop, so every entry point here runs alembic in a
worker thread when called from a coroutine. The sync functions block their
caller until done (fine at start-up); the ``*_async`` twins do not block the loop.
"""

from __future__ import annotations

import asyncio
import os
import site
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from xmpp_queue.storage.engine import make_engine, normalize_url

T = TypeVar("T")

_DATA_DIR = Path("share", "xmpp-queue", "migrations")


def migrations_dir() -> Path:
    """The directory holding env.py and versions/ (see the module docstring)."""
    candidates: list[Path] = []
    if override := os.environ.get("XMPP_QUEUE_MIGRATIONS"):
        candidates.append(Path(override))
    candidates.append(Path(__file__).resolve().parents[2] / "migrations")
    candidates.append(Path(sys.prefix) / _DATA_DIR)
    if site.USER_BASE:
        candidates.append(Path(site.USER_BASE) / _DATA_DIR)
    for path in candidates:
        if (path / "env.py").is_file() and (path / "versions").is_dir():
            return path
    tried = ", ".join(str(p) for p in candidates)
    raise FileNotFoundError(f"alembic migrations not found (tried {tried})")


def alembic_config(url: str | None = None) -> Config:
    """An alembic Config for *url* without an ini file.

    The URL travels in ``config.attributes``, not ``sqlalchemy.url``: the ini
    option goes through configparser interpolation, which a ``%`` in a
    password would break.
    """
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    if url is not None:
        config.attributes["url"] = normalize_url(url)
    return config


def _off_loop(fn: Callable[[], T]) -> T:
    """Run *fn* here, or in a worker thread when an event loop is running here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="xmpp-queue-migrate") as pool:
        return pool.submit(fn).result()


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at *url* up to *revision* (creating the tables if empty)."""
    _off_loop(lambda: command.upgrade(alembic_config(url), revision))


def downgrade(url: str, revision: str) -> None:
    """Migrate down to *revision* (``"base"`` drops every table): for tests and rollbacks."""
    _off_loop(lambda: command.downgrade(alembic_config(url), revision))


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError("the migrations directory has no revisions")
    return head


def _read_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def current_revision_async(url: str) -> str | None:
    """The revision the database at *url* is at; None when it was never migrated."""
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(_read_revision)
    finally:
        await engine.dispose()


def current_revision(url: str) -> str | None:
    return _off_loop(lambda: asyncio.run(current_revision_async(url)))


def is_up_to_date(url: str) -> bool:
    return current_revision(url) == head_revision()


async def upgrade_async(url: str, revision: str = "head") -> None:
    await asyncio.to_thread(command.upgrade, alembic_config(url), revision)


async def is_up_to_date_async(url: str) -> bool:
    return await current_revision_async(url) == head_revision()
