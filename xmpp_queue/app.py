"""The composition root: the one place that builds and wires the running service.

Clock, id factory, store, :class:`PubSubService`, the outbox, the deadline timer,
presence tracking, :class:`QueueComponent` and the admin commands are created
here, in :func:`run_service`, and nowhere else:
no module-level singletons, no engine at import time, so tests and the demo
can build as many independent services as they like.

Lifecycle of one term, in order: open the store, start the service (its
commit batcher), start the operations listener when ``[http]`` is configured
(metrics, health checks, dashboard: ``xmpp_queue/http``), connect the
component and serve until SIGINT/SIGTERM, the component ends, or the lease is
lost; then stop the component (no new stanzas), the listener, the service
(finish the operations in flight) and close the store. A wrong secret is one
log line (written by the component) and exit status 1: retrying cannot fix
it, and hammering the server helps nobody.

Who serves: on PostgreSQL any number of processes may run with one config;
each stands by until it holds the leader lease (``storage/lease.py``), serves
one term, and stands by again if it loses the lease. A standby answers
``/healthz`` (alive) but not ``/readyz`` (it serves nothing). On SQLite one
process serves, guarded by a lock on the database file; a second one exits
with status 2 and one line naming the holder.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import signal
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from xmpp_queue.core.model import SYSTEM
from xmpp_queue.core.observe import ObservedStore
from xmpp_queue.core.ports import Store
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.settings import Settings

if TYPE_CHECKING:
    from xmpp_queue.runtime.outbox import Outbox
    from xmpp_queue.storage.lease import PostgresLease
    from xmpp_queue.storage.write_health import WriteHealth

log = logging.getLogger("xmpp_queue.app")

STOP_TIMEOUT = 15.0
EXIT_IN_USE = 2  # the SQLite database is served by another process


class RunnableComponent(Protocol):
    """What the app needs of the XMPP glue's component."""

    async def run(self) -> Any: ...

    async def stop(self) -> Any: ...


def utc_now() -> datetime:
    """The service clock: timezone-aware UTC, so stored deadlines compare everywhere."""
    return datetime.now(UTC)


def new_id() -> str:
    """Ids for subscriptions and items the service names itself (128 random bits, hex)."""
    return uuid.uuid4().hex


def service_settings(settings: Settings) -> ServiceSettings:
    """What the core needs from the file: new-node defaults, the admins, the access
    policy and the limits per JID."""
    access = settings.access
    return ServiceSettings(
        default_config=dataclasses.replace(
            settings.queue.node_config(), access_model=access.node_access_model
        ),
        admins=settings.admins.jids,
        access=dataclasses.replace(
            access.policy(), own_domain=settings.component.jid.split("/")[0].split("@")[-1]
        ),
        limits=settings.limits.limits(),
        queue_access_model=access.queue_access_model,
        expose_publishers=access.expose_publishers,
        items_page_size=settings.component.items_page_size,
        page_bytes=settings.component.max_payload_ceiling,
        max_payload_ceiling=settings.component.max_payload_ceiling,
    )


def _redacted(url: str) -> str:
    from xmpp_queue.storage.engine import redacted_url

    return redacted_url(url)


async def run_service(settings: Settings) -> int:
    """Run the component until a signal or a fatal error. Returns the exit status."""
    from xmpp_queue.storage.engine import is_sqlite

    stop = asyncio.Event()
    with _signals_set(stop):
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
        status = await _serve_term(settings, stop, None)
        return 0 if status is None else status
    finally:
        lock.release()


async def _run_with_lease(settings: Settings, stop: asyncio.Event) -> int:
    """PostgreSQL: stand by until the lease is ours, serve, stand by again if lost."""
    from xmpp_queue.storage.lease import PostgresLease

    lease = PostgresLease(
        settings.database.url, settings.component.jid, ttl=settings.database.lease_seconds
    )
    try:
        while not stop.is_set():
            standby = await _standby_http(settings, lease.holder)
            try:
                acquired = await lease.acquire(stop)
            finally:
                if standby is not None:
                    await standby.stop()
            if acquired is None:
                break
            status = await _serve_term(settings, stop, lease)
            if status is not None:
                return status
            log.warning("event=stepped_down component=%s action=standby", settings.component.jid)
        return 0
    finally:
        await lease.release()
        await lease.close()


async def _standby_http(settings: Settings, holder: str) -> Any:
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


async def _serve_term(
    settings: Settings, stop: asyncio.Event, lease: PostgresLease | None
) -> int | None:
    """Serve until stopped (its exit status) or until the lease is lost (None)."""
    from xmpp_queue.admin.commands import register_admin_commands
    from xmpp_queue.push.policy import PushPolicy
    from xmpp_queue.push.registry import PushSubscriptions
    from xmpp_queue.runtime.outbox import Outbox
    from xmpp_queue.runtime.presence import PresenceTracker, SubscriberRelease
    from xmpp_queue.runtime.scheduler import DeadlineScheduler
    from xmpp_queue.storage.store import StateStore
    from xmpp_queue.xmpp.component import HandshakeRejected, QueueComponent
    from xmpp_queue.xmpp.requests import canonical_payload_text

    comp = settings.component
    server = f"{comp.server_host}:{comp.server_port}"
    # The component is the one writer of its database: state is served from memory
    # and each group commit writes only the net change (storage/store.py). With a
    # lease, every commit first checks that the lease is still ours (fencing).
    state_store = await StateStore.open(settings.database.url, lease.fence if lease else None)
    store: Store = state_store
    metrics = _metrics(settings)
    observed = None
    if metrics is not None:
        # Count what commits (ledger events, waits, commit times): core/observe.py.
        store = observed = ObservedStore(store, metrics)
    service = PubSubService(store, utc_now, new_id, service_settings(settings))
    if metrics is not None:
        service.on_batch_committed(metrics.batch_committed)  # batch sizes (observe.py)
        from xmpp_queue.xmpp.refusals import REFUSALS

        REFUSALS.on_refused = metrics.request_refused  # refusals by condition
    keeper = asyncio.ensure_future(lease.keep()) if lease is not None else None
    ops: Any = None
    # Every effect leaves through the outbox; the component is its (XMPP) sink.
    outbox = Outbox()
    deadlines = DeadlineScheduler(service, outbox, service.clock)
    # Push subscriptions are routes of the outbox to HTTP sinks (push/registry.py).
    domain = comp.jid.split("/")[0].split("@")[-1]
    pushes = PushSubscriptions(
        service, outbox, PushPolicy.from_settings(settings.push), domain, observer=metrics
    )
    try:
        await service.start()
        await pushes.start()
        component = QueueComponent(
            comp.jid,
            comp.secret,
            comp.server_host,
            comp.server_port,
            service,
            max_stanza_size=comp.max_stanza_size,
            outbox=outbox,
            workers=PresenceTracker(SubscriberRelease(service, outbox)),
        )
        outbox.set_default(component)
        # The timer starts (catching up on time spent down) once notices can be sent.
        component.add_event_handler("session_start", deadlines.connected)

        # Admin commands change state too (purge, unlock ...): their notifications
        # go out through the outbox, like every other outcome.
        register_admin_commands(
            component,
            service,
            settings.admins.jids,
            settings.database.url,
            send_effects=outbox.send,
            on_redrive=metrics.redrive_done if metrics is not None else None,
            read_payload=canonical_payload_text,
            push=pushes,
        )
        if observed is not None:
            try:
                ops = await _start_http(
                    settings,
                    service,
                    observed,
                    metrics,
                    component,
                    outbox,
                    state_store.health,
                    pushes,
                )
            except OSError as exc:
                assert settings.http is not None
                log.error(
                    'event=http_listen_failed address=%s:%d error="%s"',
                    settings.http.host,
                    settings.http.port,
                    exc.strerror or exc,
                )
                return 1
        _freeze_startup_heap()
        log.info(
            "event=starting component=%s server=%s database=%s admins=%d token=%s",
            comp.jid,
            server,
            _redacted(settings.database.url),
            len(settings.admins.jids),
            lease.token if lease is not None else "-",
        )
        return await _serve(component, stop, HandshakeRejected, comp.jid, server, keeper)
    finally:
        if keeper is not None:
            keeper.cancel()
        await deadlines.stop()
        await pushes.close()  # POSTs in flight end; their items return at their lock timeout
        if ops is not None:
            await ops.stop()
        try:
            await service.stop()
        except Exception:  # still close the store; the operator sees why in the log
            log.exception("event=service_stop_failed component=%s", comp.jid)
        await store.close()
        log.info("event=stopped component=%s", comp.jid)


def _metrics(settings: Settings) -> Any:
    """The metrics object when ``[http]`` is configured (None: nothing is observed)."""
    if settings.http is None:
        return None
    from xmpp_queue.http.metrics import QueueMetrics

    return QueueMetrics(settings.http.max_nodes)


async def _start_http(
    settings: Settings,
    service: PubSubService,
    store: ObservedStore,
    metrics: Any,
    component: Any,
    outbox: Outbox,
    writes: WriteHealth,
    pushes: Any = None,
) -> Any:
    """Build and start the operations listener (metrics, probes, dashboard)."""
    from xmpp_queue.http.actions import DashboardActions
    from xmpp_queue.http.health import HealthChecks
    from xmpp_queue.http.server import OpsServer

    http = settings.http
    assert http is not None
    component.add_event_handler("session_start", metrics.session_started)
    component.add_event_handler("disconnected", metrics.disconnected)
    health = HealthChecks(
        connected=lambda: metrics.is_connected,
        ping_database=lambda: store.ping(utc_now()),
        write_failure=lambda: None if writes.ok else writes.error,
    )
    actions = DashboardActions(service, outbox.send, on_redrive=metrics.redrive_done)
    ops = OpsServer(
        http.host,
        http.port,
        service,
        metrics,
        health,
        actions,
        admin_token=http.admin_token,
        jid=settings.component.jid,
        allowed_hosts=http.allowed_hosts,
        push_views=None if pushes is None else _push_views(pushes),
    )
    await ops.start()
    return ops


def _push_views(pushes: Any) -> Callable[[str], Awaitable[list[dict[str, str]]]]:
    """The dashboard's view of a queue's push subscriptions: the registry's masked rows."""

    async def views(node: str) -> list[dict[str, str]]:
        return [p.view() for p in await pushes.list(SYSTEM, node)]

    return views


def _freeze_startup_heap() -> None:
    """Keep the start-up heap out of the cyclic garbage collector's full passes.

    After start-up the process holds ~90,000 long-lived objects (the imported
    libraries, the loaded state) that will never be cyclic garbage. CPython's
    full collection walks all of them: about 60 ms on the benchmark machine,
    stalling every stanza in flight, and it was the whole of the p99 tail at 500
    items/s (60-100 ms; 25 ms with the collector off). ``gc.freeze`` moves them
    to the permanent generation, so a full pass walks only what was made since.
    Frozen objects are still freed by reference counting when dropped.
    """
    gc.collect()
    gc.freeze()
    log.debug("event=heap_frozen objects=%d", gc.get_freeze_count())


async def _serve(
    component: RunnableComponent,
    stop: asyncio.Event,
    handshake_rejected: type[BaseException],
    jid: str,
    server: str,
    keeper: asyncio.Future[None] | None = None,
) -> int | None:
    """Run ``component.run()`` until it ends, *stop* is set or *keeper* (the lease)
    ends; map the ending to a status, or None when the lease was lost."""
    run = asyncio.ensure_future(component.run())
    stopping = asyncio.ensure_future(stop.wait())
    waits: set[asyncio.Future[Any]] = {run, stopping}
    if keeper is not None:
        waits.add(keeper)
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if keeper is not None and keeper.done() and not run.done() and not stop.is_set():
        reason = keeper.exception() if not keeper.cancelled() else None
        log.error('event=lease_lost component=%s reason="%s" action=disconnect', jid, reason)
        await component.stop()  # stop answering at once: nothing we do commits any more
        with contextlib.suppress(Exception):
            await asyncio.wait_for(run, STOP_TIMEOUT)
        return None
    if not run.done():
        await component.stop()
        try:
            await asyncio.wait_for(run, STOP_TIMEOUT)
        except TimeoutError:
            log.warning("event=stop_timeout component=%s seconds=%.0f", jid, STOP_TIMEOUT)
            return 1
        except Exception:  # a failure while stopping must not hide that we were asked to stop
            log.exception("event=stop_failed component=%s", jid)
            return 1
        return 0
    exc = run.exception()
    if exc is None:
        if stop.is_set():
            return 0
        log.error("event=component_ended component=%s server=%s", jid, server)
        return 1
    if isinstance(exc, handshake_rejected):
        # The component logged the one line an operator needs (condition and hint);
        # a second line here would say the same thing again.
        log.debug("event=exit reason=handshake_rejected component=%s", jid)
        return 1
    if isinstance(exc, OSError):
        log.error(
            'event=connect_failed component=%s server=%s error="%s"',
            jid,
            server,
            exc.strerror or exc,
        )
        return 1
    log.error("event=crashed component=%s", jid, exc_info=exc)
    return 1


@contextlib.contextmanager
def _signals_set(stop: asyncio.Event) -> Iterator[None]:
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
