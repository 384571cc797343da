"""How a sub-command ends: its exit status, and the one line a refusal prints.

Exit statuses an operator (or systemd) can act on: 0 done; 1 a runtime
failure (the server refused the secret, the database is unreachable); 2 a
problem only the operator can fix by editing or migrating (a bad config key,
an un-migrated database, bad arguments). Kept apart so every sub-command
refuses the same way, and database failures are sorted into 1 and 2 in one place.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

Handler = Callable[[argparse.Namespace], int]


class CommandError(Exception):
    """A refusal: one line for standard error, and the exit status."""

    def __init__(self, message: str, status: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.status = status


def redacted(url: str) -> str:
    from xmpp_queue.storage.engine import redacted_url

    return str(redacted_url(url))


# Failures that only the operator can fix (the database is missing, the role or
# password is wrong): exit 2, so a supervisor does not restart for ever. A server
# that is down or busy stays 1: it may be back in a minute.
_FIX_THE_DATABASE = (
    "does not exist",
    "password authentication failed",
    "authentication failed",
    "no password supplied",
    "role ",
    "permission denied",
)


def database_failure(url: str, exc: BaseException) -> CommandError:
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if any(marker in detail for marker in _FIX_THE_DATABASE):
        hint = ""
        if "does not exist" in detail and "database" in detail:
            hint = "; create it (e.g. createdb) and run xmpp-queue migrate"
        return CommandError(f"database {redacted(url)}: {detail}{hint}", EXIT_USAGE)
    return CommandError(f"database {redacted(url)} unreachable: {detail}")
