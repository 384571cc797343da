"""Driver errors to domain errors, in one place.

The core understands :class:`~xmpp_queue.core.errors.StorageUnavailable`
("try again later"), never a driver's exception. What counts as an outage:
connection failures and losses, and SQLite's operational errors (locked,
unable to open, disk I/O) other than the programming mistakes SQLite also
reports as OperationalError.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from xmpp_queue.core.errors import StorageUnavailable

# SQLite reports programming mistakes as OperationalError too; these are not outages.
_SQLITE_BUGS = ("no such table", "no such column", "syntax error", "has no column")


def is_unavailable(exc: BaseException) -> bool:
    """Whether *exc* means "the database cannot be reached or used right now"."""
    if isinstance(exc, OSError | TimeoutError | ConnectionError):
        return True
    if isinstance(exc, sqlite3.OperationalError):  # raw cursor (sqlite_fast)
        return not any(bug in str(exc).lower() for bug in _SQLITE_BUGS)
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated or isinstance(exc, InterfaceError):
            return True
        if isinstance(exc, OperationalError):
            return not any(bug in str(exc.orig).lower() for bug in _SQLITE_BUGS)
        return isinstance(exc.orig, OSError | TimeoutError | ConnectionError)
    return False


def unavailable(exc: BaseException) -> StorageUnavailable:
    return StorageUnavailable(f"database unavailable: {type(exc).__name__}")


@contextmanager
def translated_errors() -> Iterator[None]:
    """Turn an outage raised inside the block into StorageUnavailable."""
    try:
        yield
    except (DBAPIError, OSError, sqlite3.Error) as exc:
        if is_unavailable(exc):
            raise unavailable(exc) from exc
        raise
