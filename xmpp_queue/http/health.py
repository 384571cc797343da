"""``/healthz`` and ``/readyz``: what a load balancer or systemd may act on.

Why two: *alive* (the process answers HTTP, its event loop turns) is what a
supervisor restarts on; *ready* (connected to the XMPP server, the database
answers, writes go through) is what a balancer or an alarm routes and pages
on. A component that lost its XMPP server is alive (it reconnects on its own)
but not ready: restarting it would not help.

Write health is the store's own record (``storage/write_health.py``): not
ready from the moment a write fails until a later write commits. A request
that only reads never reaches the database, and a ping is a read: neither
says the disk takes writes, so neither makes a failed write look healed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

log = logging.getLogger("xmpp_queue.http.health")

PROBE_TIMEOUT = 2.0


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    checks: dict[str, str]


class HealthChecks:
    """The readiness checks; each says "ok" or why not."""

    def __init__(
        self,
        connected: Callable[[], bool],
        ping_database: Callable[[], Awaitable[None]],
        write_failure: Callable[[], str | None],
        timeout: float = PROBE_TIMEOUT,
    ) -> None:
        self._connected = connected
        self._ping = ping_database
        self._write_failure = write_failure  # None while writes go through
        self._timeout = timeout

    async def readiness(self) -> Readiness:
        checks = {
            "xmpp": "ok" if self._connected() else "not connected to the XMPP server",
            "database": await self._database(),
        }
        return Readiness(all(v == "ok" for v in checks.values()), checks)

    async def _database(self) -> str:
        failure = self._write_failure()
        if failure is not None:
            return f"the last write failed and none has succeeded since ({failure[:200]})"
        try:
            await asyncio.wait_for(self._ping(), self._timeout)
        except TimeoutError:
            return f"no answer within {self._timeout:g} s"
        except Exception as exc:  # whatever the driver raises: report it, stay up
            log.warning("event=readiness_database_failed error=%r", str(exc)[:200])
            return f"unreachable: {type(exc).__name__}"
        return "ok"
