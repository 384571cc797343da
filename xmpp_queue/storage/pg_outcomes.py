"""Did it commit? The answers PostgreSQL can give after a commit's answer was lost.

Why a module of its own: a lost answer (the connection died while the commit was
on its way) is the one case where the component does not know what the database
holds, and "a dropped connection costs latency, not an error" rests on asking
correctly. The store writes a batch again only when the database surely did not
commit it, and reloads when nobody can tell (``backend_postgres``).

- A commit run between BEGIN and COMMIT is asked about by its transaction id
  (``txid_status``), known before COMMIT was sent.
- A steady commit is one statement committed on its own (``pg_steady``): its
  transaction id comes back with the answer that was lost, so it is asked about by
  its commit mark. The old session is ended first and waited for, since until it
  has gone it may still commit.

Each question is asked for up to 2 s (a killed session takes a moment to roll
back and leave); after that the answer is None: cannot tell.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

NO_SERIAL = -1
"""The serial of a commit mark made when a connection opens and found no row: no
commit of ours is known to have set it (a lookup that finds it cannot tell)."""

_TRIES, _PAUSE = 40, 0.05


def refused(exc: BaseException) -> bool:
    """*exc* is the server's answer refusing a statement (an ``ERROR``, which ends
    the statement's transaction without committing it), not a lost answer: a
    ``FATAL`` error ends the session, maybe after the commit."""
    return isinstance(exc, asyncpg.PostgresError) and getattr(exc, "severity", None) == "ERROR"


async def transaction_outcome(conn: Any, xid: int) -> str | None:
    """ "committed" / "aborted" for transaction *xid*, or None. A killed session's
    transaction is "in progress" until the server has rolled it back."""
    for _ in range(_TRIES):
        status = await conn.fetchval("SELECT txid_status($1)", xid)
        if status != "in progress":
            return str(status) if status else None
        await asyncio.sleep(_PAUSE)
    return None


async def mark_outcome(conn: Any, pid: int, writer: str, serial: int) -> str | None:
    """ "committed" / "aborted" for the steady commit *serial* of *writer*, sent on
    the session of server process *pid* (ended here if it is still there), or
    None."""
    await conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1", pid)
    for _ in range(_TRIES):
        if not await conn.fetchval(
            "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1)", pid
        ):
            marked = await conn.fetchval(
                "SELECT serial FROM commit_marks WHERE writer = $1", writer
            )
            if marked is None or marked == NO_SERIAL:  # the row was made again
                return None
            return "committed" if marked == serial else "aborted"
        await asyncio.sleep(_PAUSE)
    return None
