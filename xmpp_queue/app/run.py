"""Who serves: one process alone on SQLite, the lease holder on PostgreSQL.

On PostgreSQL any number of processes may run with one config; each stands by
until it holds the leader lease (``storage/lease.py``), serves one term, and
stands by again if it loses the lease. A standby answers ``/healthz`` (alive)
but not ``/readyz`` (it serves nothing). On SQLite one process serves, guarded
by a lock on the database file; a second one exits with status 2 and one line
naming the holder. SIGINT and SIGTERM end the run cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from xmpp_queue.settings import Settings

if TYPE_CHECKING:
    pass
from xmpp_queue.app.term import serve_term, warm_up

log = logging.getLogger("xmpp_queue.app")


EXIT_IN_USE = 2  # the SQLite database is served by another process


async def run_service(settings: Settings) -> int:
    """Run the component until a signal or a fatal error. Returns the exit status."""
    from xmpp_queue.storage.engine import is_sqlite

    stop = asyncio.Event()
    with signals_set(stop):
        if is_sqlite(settings.database.url):
            return await _run_alone(settings, stop)
        return await _run_with_lease(settings, stop)


async def _run_alone(settings: Settings, stop: asyncio.Event) -> int:
    """SQLite: one process per database file, or exit 2 saying who holds it."""
    from xmpp_queue.storage.file_lock import DatabaseInUse, DatabaseLock

    lock = DatabaseLock(settings.database.url)
    try:
        lock.acquire()
    except DatabaseInUse as exc:
        log.error(
            'event=database_in_use database=%s holder="%s" hint="one process per SQLite '
            'database; use PostgreSQL for standbys"',
            exc.path,
            exc.holder,
        )
        return EXIT_IN_USE
    try:
        status = await serve_term(settings, stop, None)
        return 0 if status is None else status
    finally:
        lock.release()


async def _run_with_lease(settings: Settings, stop: asyncio.Event) -> int:
    """PostgreSQL: stand by until the lease is ours, serve, stand by again if lost."""
    from xmpp_queue.storage.lease import PostgresLease

    lease = PostgresLease(
        settings.database.url, settings.component.jid, ttl=settings.database.lease_seconds
    )
    warm_up()
    try:
        while not stop.is_set():
            standby = await standby_http(settings, lease.holder)
            try:
                acquired = await lease.acquire(stop)
            finally:
                if standby is not None:
                    await standby.stop()
            if acquired is None:
                break
            status = await serve_term(settings, stop, lease)
            if status is not None:
                return status
            log.warning("event=stepped_down component=%s action=standby", settings.component.jid)
        return 0
    finally:
        await lease.release()
        await lease.close()


async def standby_http(settings: Settings, holder: str) -> Any:
    """While standing by, answer /healthz (alive) and /readyz (503, standby)."""
    if settings.http is None:
        return None
    from xmpp_queue.http.standby import StandbyServer

    server = StandbyServer(settings.http.host, settings.http.port, settings.component.jid, holder)
    try:
        await server.start()
    except OSError as exc:
        log.warning(
            'event=http_listen_failed address=%s:%d role=standby error="%s"',
            settings.http.host,
            settings.http.port,
            exc.strerror or exc,
        )
        return None
    log.info(
        "event=http_listening address=%s:%d role=standby",
        settings.http.host,
        server.bound_port,
    )
    return server


@contextlib.contextmanager
def signals_set(stop: asyncio.Event) -> Iterator[None]:
    """Let SIGINT and SIGTERM set *stop* (a clean shutdown) while the service runs."""
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []

    def handler(sig: signal.Signals) -> Callable[[], None]:
        def on_signal() -> None:
            log.info("event=stopping signal=%s", sig.name)
            stop.set()

        return on_signal

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, handler(sig))
        except (NotImplementedError, RuntimeError):  # not the main thread, or no signals
            continue
        installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
