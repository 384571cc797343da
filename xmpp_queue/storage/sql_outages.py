"""Which database errors are an outage (the database or our connection is gone)
rather than a refused statement.

The store retries a write that surely did not commit during an outage
(``write_health``) but must never retry a bug, so both backends translate an
outage into :class:`StorageUnavailable` and leave every other error as it is.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import asyncpg
from sqlalchemy.exc import DBAPIError

from xmpp_queue.core.errors import StorageUnavailable

_SQLITE_BUGS = ("no such table", "no such column", "syntax error", "has no column")


def sqlite_outage(exc: BaseException) -> bool:
    """Whether *exc* means SQLite's file is out of reach (I/O, locked, full), not
    a statement our schema refuses."""
    if isinstance(exc, OSError):
        return True
    if isinstance(exc, sqlite3.OperationalError):
        return not any(bug in str(exc).lower() for bug in _SQLITE_BUGS)
    return False


def translate(exc: BaseException, outage: Callable[[BaseException], bool]) -> BaseException:
    """*exc* as the store sees it: an outage (by the backend's *outage* test) as
    :class:`StorageUnavailable` caused by it, anything else unchanged."""
    if isinstance(exc, StorageUnavailable):
        return exc
    if outage(exc):
        error = StorageUnavailable(f"database unavailable: {type(exc).__name__}")
        error.__cause__ = exc
        return error
    return exc


_POSTGRES_LOST = (
    OSError,
    TimeoutError,
    ConnectionError,
    asyncpg.exceptions.PostgresConnectionError,  # ConnectionDoesNotExistError ...
    asyncpg.exceptions.InterfaceError,  # "connection is closed"
    asyncpg.exceptions.InternalClientError,  # a protocol left mid-call by a killed peer
    asyncpg.exceptions.OperatorInterventionError,  # AdminShutdownError: pg_terminate_backend
)


def postgres_outage(exc: BaseException) -> bool:
    """Whether *exc* means the database or our connection to it is gone (rather
    than a refused statement). Looks through wrappers: SQLAlchemy's ``DBAPIError``
    (``.orig``, ``connection_invalidated``) and exception chains."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, _POSTGRES_LOST):
            return True
        if isinstance(e, DBAPIError) and e.connection_invalidated:
            return True
        orig = getattr(e, "orig", None)
        todo += [orig if isinstance(orig, BaseException) else None, e.__cause__, e.__context__]
    return False
