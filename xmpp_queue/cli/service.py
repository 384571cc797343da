"""The sub-commands that run or inspect the service: ``run``, ``migrate``, ``status``.

Why together: each opens the configured database and tells the operator what
to do when it is missing, not migrated, or served by another process.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shlex
from pathlib import Path
from typing import Any

from xmpp_queue.cli.outcome import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    database_failure,
    redacted,
)
from xmpp_queue.cli.startup import load_settings

log = logging.getLogger("xmpp_queue.cli")


def sqlite_file(url: str) -> Path | None:
    """The absolute path of a file SQLite URL (None for other databases or memory).

    ``sqlite:///queue.db`` is relative to the working directory of the process,
    which for a service is not where the config file is: say which file is meant."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).expanduser().resolve()


# --- commands --------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    """Refuse an un-migrated database, then hand over to the composition root."""
    settings = load_settings(args)
    from xmpp_queue.storage import migrations

    url = settings.database.url
    migrate = f"xmpp-queue migrate -c {shlex.quote(args.config)}"
    path = sqlite_file(url)
    where = f" (file {path})" if path is not None else ""
    if path is not None and not path.exists():
        # Opening it would create an empty file: refuse first, and say which file.
        raise CommandError(
            f"the database file {path} does not exist, so it is not at the current schema "
            f"({migrations.head_revision()}; {redacted(url)} is relative to the working "
            f"directory {Path.cwd()}); run: {migrate}",
            EXIT_USAGE,
        )
    try:
        current = migrations.is_up_to_date(url)
    except Exception as exc:
        raise database_failure(url, exc) from exc
    if not current:
        raise CommandError(
            f"the database {redacted(url)}{where} is not at the current schema "
            f"({migrations.head_revision()}); run: {migrate}",
            EXIT_USAGE,
        )
    if settings.shards is not None:
        from xmpp_queue.sharding import run_sharded

        return int(asyncio.run(run_sharded(settings)))
    from xmpp_queue.app.run import run_service

    return int(asyncio.run(run_service(settings)))


def cmd_migrate(args: argparse.Namespace) -> int:
    """Upgrade the database to the newest alembic revision (idempotent)."""
    settings = load_settings(args)
    from xmpp_queue.storage import migrations

    url = settings.database.url
    try:
        migrations.upgrade(url)
    except Exception as exc:
        raise database_failure(url, exc) from exc
    head = migrations.head_revision()
    log.info("event=migrated database=%s revision=%s", redacted(url), head)
    print(f"database {redacted(url)} is at revision {head} (current)")
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    """Which process serves the component, since when, and who stands by."""
    settings = load_settings(args)
    url = settings.database.url
    from xmpp_queue.storage.engine import is_sqlite

    if is_sqlite(url):
        from xmpp_queue.storage.file_lock import DatabaseInUse, DatabaseLock

        lock = DatabaseLock(url)
        try:
            lock.acquire()
        except DatabaseInUse as exc:
            print(
                f"{settings.component.jid}: active {exc.holder} (SQLite: one process, no standbys)"
            )
            return EXIT_OK
        lock.release()
        print(f"{settings.component.jid}: no process is serving {redacted(url)}")
        return EXIT_FAILURE
    if settings.shards is not None:
        from xmpp_queue.sharding import shards_status

        try:
            text, serving = asyncio.run(shards_status(settings))
        except Exception as exc:
            raise database_failure(url, exc) from exc
        print(text)
        return EXIT_OK if serving else EXIT_FAILURE
    from xmpp_queue.storage.lease import lease_status

    try:
        status = asyncio.run(lease_status(url, settings.component.jid))
    except Exception as exc:
        raise database_failure(url, exc) from exc
    print(status_text(status, settings.database.lease_seconds))
    return EXIT_OK if status.holder else EXIT_FAILURE


def status_text(status: Any, ttl: float) -> str:
    """The lease and its members as lines an operator reads (times in UTC); the
    standbys are those seen within two lease terms of *ttl* seconds."""

    def ago(when: Any) -> str:
        return f"{(status.now - when).total_seconds():.1f}s ago"

    lines = []
    if status.holder:
        left = (status.expires_at - status.now).total_seconds()
        lines.append(
            f"{status.name}: active {status.holder} since "
            f"{status.acquired_at:%Y-%m-%d %H:%M:%S}Z (term {status.token}, lease {left:.1f}s left)"
        )
    else:
        lines.append(f"{status.name}: no active process (last term {status.token})")
    standbys = status.standbys(ttl)
    lines.append(f"standbys: {len(standbys)}")
    for m in standbys:
        lines.append(
            f"  {m.holder} standing by since {m.since:%Y-%m-%d %H:%M:%S}Z, seen {ago(m.seen_at)}"
        )
    return "\n".join(lines)
