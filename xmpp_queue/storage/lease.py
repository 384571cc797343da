"""The leader lease: one active process per component on PostgreSQL, standbys waiting.

Why: one ``xmpp-queue run`` is the queue; when it or its machine dies, work
must go on without a person. Any number of processes run with the same config;
exactly one holds the lease and serves, the others stand by without touching
the XMPP server. PostgreSQL decides, with the transactions and row locks it
already has (its own replication and failover stay PostgreSQL's job).

The lease is one row of ``leader_leases`` per component JID:

- **acquire** (a standby, every ``poll`` seconds): one conditional ``UPDATE``
  takes the row when its lease has run out (``expires_at``, by the database's
  clock) or when the holder's database session is gone (``backend_pid`` not in
  ``pg_stat_activity``: the process died or lost its connection, so a killed
  process is replaced in well under a second instead of a lease term). Taking
  it adds one to ``token``: the fencing token of the new term;
- **renew** (the holder, every ``ttl / 4``): moves ``expires_at`` on, only while
  the token is still its own. A renewal that finds another token, or that
  cannot be confirmed before ``ttl`` has passed on the holder's own monotonic
  clock, means the lease is lost: the holder stops serving at once;
- **fencing**: every commit of the holder updates the row where the token is
  its own, in the commit's own transaction (``PostgresBackend``); a process
  that lost its lease (paused, cut off) can therefore never commit again, and
  since answers and notifications are sent only after a commit, it never
  answers as if it had.

A commit holds the lease row until it ends; the holder's commit connection
sets ``idle_in_transaction_session_timeout`` to half a term, so a process
frozen in the middle of a commit cannot keep a standby waiting for the row.

A new holder loads the state after taking the lease, so it sees every commit
of the previous term and nothing of it can come after. Lock deadlines are
stored as absolute times: they keep running across a takeover.

``service_members`` lists every process with its role and a heartbeat, for
``xmpp-queue status``; the process that takes the lease deletes the rows not
written for a day (``MEMBER_KEPT_FOR``: a killed process never deletes its own).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from dataclasses import dataclass
from datetime import datetime

import asyncpg
from sqlalchemy.engine import make_url

log = logging.getLogger("xmpp_queue.storage.lease")

ACTIVE, STANDBY = "active", "standby"


def this_process() -> str:
    """How a process is named in the lease and in ``status``: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


# What a call on an asyncpg connection raises when the database or the connection
# fails (a connection killed mid-call leaves InterfaceError / InternalClientError).
DATABASE_ERRORS = (
    OSError,
    TimeoutError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
)


def asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class LeaseLost(Exception):
    """This process no longer holds the lease: it must stop serving now."""


@dataclass(frozen=True, slots=True)
class Fence:
    """What every commit checks: the lease row and the token of our term.

    ``idle_limit``: seconds a commit's transaction may sit idle before the server
    ends it (a process frozen mid-commit must not hold the lease row for long)."""

    name: str
    token: int
    idle_limit: float = 2.5


_ACQUIRE = """
UPDATE leader_leases
   SET holder = $2, backend_pid = pg_backend_pid(), token = token + 1,
       acquired_at = now(), expires_at = now() + make_interval(secs => $3)
 WHERE name = $1
   AND (expires_at IS NULL OR expires_at < now()
        OR backend_pid IS NULL
        OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = leader_leases.backend_pid))
RETURNING token
"""
_RENEW = """
UPDATE leader_leases
   SET expires_at = now() + make_interval(secs => $3), backend_pid = pg_backend_pid()
 WHERE name = $1 AND token = $2
RETURNING token
"""
_RELEASE = """
UPDATE leader_leases SET expires_at = now(), backend_pid = NULL
 WHERE name = $1 AND token = $2
"""
_ENSURE_ROW = """
INSERT INTO leader_leases (name, holder, token) VALUES ($1, '', 0)
ON CONFLICT (name) DO NOTHING
"""
_HEARTBEAT = """
INSERT INTO service_members (name, holder, role, since, seen_at)
VALUES ($1, $2, $3, now(), now())
ON CONFLICT (name, holder) DO UPDATE
   SET since = CASE WHEN service_members.role = EXCLUDED.role
                    THEN service_members.since ELSE now() END,
       role = EXCLUDED.role, seen_at = now()
"""
_LEAVE = "DELETE FROM service_members WHERE name = $1 AND holder = $2"
_PRUNE = """
DELETE FROM service_members
 WHERE name = $1 AND holder <> $2 AND seen_at < now() - make_interval(secs => $3)
"""
MEMBER_KEPT_FOR = 24 * 3600.0
"""How long a member's row outlives its last heartbeat (seconds). A killed process
never deletes its own row and every restart is a new holder (host:pid), so the
process that takes the lease clears the rows nobody has written for a day: long
enough to read a crash's traces in the table, short enough that years of
restarts do not pile up."""
# A commit's fencing statement (see PostgresBackend.write).
FENCE_CHECK = "UPDATE leader_leases SET last_commit_at = now() WHERE name = $1 AND token = $2"


class PostgresLease:
    """One process's side of the lease (see the module docstring)."""

    def __init__(
        self,
        url: str,
        name: str,
        *,
        ttl: float = 5.0,
        poll: float = 0.25,
        holder: str | None = None,
    ) -> None:
        self._dsn = asyncpg_dsn(url)
        self.name = name
        self.holder = holder or this_process()
        self.ttl = ttl
        self.poll = poll
        self.token: int | None = None
        self._conn: asyncpg.Connection | None = None
        self._confirmed_at = 0.0  # monotonic time of the last confirmed renewal

    @property
    def fence(self) -> Fence:
        if self.token is None:
            raise LeaseLost("no lease held")
        return Fence(self.name, self.token, max(1.0, self.ttl / 2))

    async def _connection(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            self._conn = await asyncpg.connect(self._dsn, timeout=self.ttl)
            await self._conn.execute(_ENSURE_ROW, self.name)
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.terminate()
            self._conn = None

    async def try_acquire(self) -> int | None:
        """One attempt; the new token, or None while someone else holds it."""
        started = time.monotonic()
        conn = await self._connection()
        token = await conn.fetchval(_ACQUIRE, self.name, self.holder, float(self.ttl))
        role = STANDBY if token is None else ACTIVE
        await conn.execute(_HEARTBEAT, self.name, self.holder, role)
        if token is not None:
            self.token = int(token)
            self._confirmed_at = started
            await conn.execute(_PRUNE, self.name, self.holder, MEMBER_KEPT_FOR)
        return self.token if token is not None else None

    async def acquire(self, stop: asyncio.Event) -> int | None:
        """Stand by until the lease is ours (its token), or None once *stop* is set."""
        logged = False
        while not stop.is_set():
            try:
                token = await asyncio.wait_for(self.try_acquire(), self.ttl)
            except DATABASE_ERRORS as exc:
                log.warning("event=lease_unreachable name=%s error=%s", self.name, _short(exc))
                self._drop_connection()
                token = None
            if token is not None:
                log.info(
                    "event=lease_acquired name=%s holder=%s token=%d",
                    self.name,
                    self.holder,
                    token,
                )
                return token
            if not logged:
                log.info("event=standing_by name=%s holder=%s", self.name, self.holder)
                logged = True
            try:
                await asyncio.wait_for(stop.wait(), self.poll)
            except TimeoutError:
                pass
        return None

    async def renew(self) -> None:
        """Move the lease on; raise LeaseLost if it is not ours (any more)."""
        if self.token is None:
            raise LeaseLost("no lease held")
        started = time.monotonic()
        conn = await self._connection()
        still = await conn.fetchval(_RENEW, self.name, self.token, float(self.ttl))
        if still is None:
            self.token = None
            raise LeaseLost("another process took the lease")
        await conn.execute(_HEARTBEAT, self.name, self.holder, ACTIVE)
        self._confirmed_at = started

    async def keep(self) -> None:
        """Renew every ``ttl / 4`` until the lease is lost; then raise LeaseLost.

        A renewal that fails (the database is unreachable) is retried; once
        ``ttl`` has passed since the last confirmed one, the standbys may
        already have taken over, so we must consider the lease lost.
        """
        interval = self.ttl / 4
        while True:
            await asyncio.sleep(interval)
            try:
                await asyncio.wait_for(self.renew(), interval)
            except LeaseLost:
                raise
            except DATABASE_ERRORS as exc:
                self._drop_connection()
                log.warning("event=lease_renewal_failed name=%s error=%s", self.name, _short(exc))
            if time.monotonic() - self._confirmed_at >= self.ttl * 0.8:
                self.token = None
                raise LeaseLost("the lease could not be renewed in time")

    async def release(self) -> None:
        """Give the lease up at once (a clean stop), so a standby need not wait."""
        token, self.token = self.token, None
        if token is None:
            return
        try:  # on a new connection if the old one was killed: a standby need not wait
            conn = await self._connection()
            await conn.execute(_RELEASE, self.name, token)
        except DATABASE_ERRORS as exc:
            log.warning("event=lease_release_failed name=%s error=%s", self.name, _short(exc))

    async def close(self) -> None:
        """Leave the members list and close the lease's connection."""
        if self._conn is None:
            return
        try:
            await self._conn.execute(_LEAVE, self.name, self.holder)
            await self._conn.close(timeout=2)
        except DATABASE_ERRORS:
            self._conn.terminate()
        self._conn = None


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


@dataclass(frozen=True, slots=True)
class Member:
    holder: str
    role: str
    since: datetime
    seen_at: datetime


@dataclass(frozen=True, slots=True)
class LeaseStatus:
    """What ``xmpp-queue status`` shows: the holder of the lease and every member."""

    name: str
    holder: str | None
    token: int
    acquired_at: datetime | None
    expires_at: datetime | None
    now: datetime
    members: tuple[Member, ...]

    def standbys(self, ttl: float) -> list[Member]:
        """Members standing by now: role standby, seen within two lease terms of
        *ttl* seconds. A standby writes its row at every attempt (every ``poll``,
        0.25 s); one not seen for two terms died, hung or lost the database, and
        could not take over in time. (A killed process never removes its row.)"""
        return [
            m
            for m in self.members
            if m.role == STANDBY and (self.now - m.seen_at).total_seconds() < 2 * ttl
        ]


async def lease_status(url: str, name: str) -> LeaseStatus:
    conn = await asyncpg.connect(asyncpg_dsn(url), timeout=10)
    try:
        now = await conn.fetchval("SELECT now()")
        row = await conn.fetchrow(
            "SELECT holder, token, acquired_at, expires_at FROM leader_leases WHERE name = $1",
            name,
        )
        members = await conn.fetch(
            "SELECT holder, role, since, seen_at FROM service_members WHERE name = $1 "
            "ORDER BY role, since",
            name,
        )
    finally:
        await conn.close()
    holder = None
    if row is not None and row["holder"] and row["expires_at"] and row["expires_at"] > now:
        holder = row["holder"]
    return LeaseStatus(
        name=name,
        holder=holder,
        token=int(row["token"]) if row is not None else 0,
        acquired_at=row["acquired_at"] if row is not None else None,
        expires_at=row["expires_at"] if row is not None else None,
        now=now,
        members=tuple(Member(m["holder"], m["role"], m["since"], m["seen_at"]) for m in members),
    )
