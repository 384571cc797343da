"""One term of service: build, wire, start, then stop everything in order.

Open the store, start the service (its commit batcher), start the operations
listener when ``[http]`` is configured (metrics, health checks, dashboard:
``xmpp_queue/http``), connect the component and serve until the run is asked
to stop, the component ends, or the lease is lost; then stop the component
(no new stanzas), the listener, the service (finish the operations in flight)
and close the store. Everything is created here and nowhere else: no
module-level singletons, no engine at import time.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from xmpp_queue.core.model import SYSTEM
from xmpp_queue.core.observe import ObservedStore
from xmpp_queue.core.ports import Store
from xmpp_queue.core.service import PubSubService
from xmpp_queue.settings import Settings

if TYPE_CHECKING:
    from xmpp_queue.runtime.outbox import Outbox
    from xmpp_queue.storage.lease import PostgresLease
    from xmpp_queue.storage.write_health import WriteHealth
from xmpp_queue.app.core_inputs import new_id, service_settings, utc_now
from xmpp_queue.app.ending import serve

log = logging.getLogger("xmpp_queue.app")


def _redacted(url: str) -> str:
    from xmpp_queue.storage.engine import redacted_url

    return redacted_url(url)


class ShardTerm(Protocol):
    """What a shard's term adds (``sharding.py``): its own store, its placement guard."""

    async def open_store(self, fence: Any, backlog_bytes: int | None = None) -> Any: ...

    def guard(self, store: Any, mover: Any) -> Any: ...

    def mover(self, store: Any, service: Any, send_effects: Any) -> Any: ...

    def deployment(self) -> Any: ...  # every shard's queues (core.deployment.DeploymentReader)


def warm_up() -> None:
    """Import what a term needs before its lease is won. A standby that takes over
    must serve at once; importing slixmpp, aiohttp, the admin commands and the
    store's PostgreSQL backend inside the takeover was 0.75 s of a 1.1 s takeover
    on a slow machine. A standby calls this before it waits for the lease."""
    import xmpp_queue.admin.commands
    import xmpp_queue.push.policy
    import xmpp_queue.push.registry
    import xmpp_queue.runtime.held_notices
    import xmpp_queue.runtime.outbox
    import xmpp_queue.runtime.presence
    import xmpp_queue.runtime.scheduler
    import xmpp_queue.storage.backend_sql
    import xmpp_queue.storage.store
    import xmpp_queue.xmpp.component
    import xmpp_queue.xmpp.payloads
    import xmpp_queue.xmpp.reconnect
    import xmpp_queue.xmpp.refusals  # noqa: F401


async def serve_term(
    settings: Settings,
    stop: asyncio.Event,
    lease: PostgresLease | None,
    shard: ShardTerm | None = None,
) -> int | None:
    """Serve until stopped (its exit status) or until the lease is lost (None).
    A *shard* term loads only its nodes and redirects requests for others'."""
    from xmpp_queue.admin.commands import register_admin_commands
    from xmpp_queue.push.policy import PushPolicy
    from xmpp_queue.push.registry import PushSubscriptions
    from xmpp_queue.runtime.held_notices import HeldNotices
    from xmpp_queue.runtime.outbox import Outbox
    from xmpp_queue.runtime.presence import PresenceTracker, SubscriberRelease
    from xmpp_queue.runtime.scheduler import DeadlineScheduler
    from xmpp_queue.storage.store import StateStore
    from xmpp_queue.xmpp.component import QueueComponent
    from xmpp_queue.xmpp.payloads import canonical_payload_text
    from xmpp_queue.xmpp.reconnect import HandshakeRejected
    from xmpp_queue.xmpp.refusals import REFUSALS

    comp = settings.component
    server = f"{comp.server_host}:{comp.server_port}"
    # The component is the one writer of its database: state is served from memory
    # and each group commit writes only the net change (storage/store.py). With a
    # lease, every commit first checks that the lease is still ours (fencing).
    fence = lease.fence if lease else None
    # Renew from the start: loading a large store may take longer than a term.
    keeper = asyncio.ensure_future(lease.keep()) if lease is not None else None
    try:
        backlog_bytes = settings.database.backlog_memory_mb * 1024 * 1024
        if shard is not None:
            state_store = await shard.open_store(fence, backlog_bytes)
        else:
            state_store = await StateStore.open(
                settings.database.url, fence, backlog_bytes=backlog_bytes
            )
    except BaseException:
        if keeper is not None:
            keeper.cancel()
        raise
    store: Store = state_store
    metrics = _metrics(settings)
    observed = None
    if metrics is not None:
        # Count what commits (ledger events, waits, commit times): core/observe.py.
        store = observed = ObservedStore(store, metrics)
    service = PubSubService(store, utc_now, new_id, service_settings(settings))
    if metrics is not None:
        service.on_batch_committed(metrics.batch_committed)  # batch sizes (observe.py)
        REFUSALS.on_refused = metrics.request_refused  # refusals by condition
        place = getattr(state_store.backend, "place", None)  # SQLite: where commits run
        if place is not None:
            metrics.watch_commit_places(place)
    ops: Any = None
    mover: Any = None  # a shard's moves (sharding_moves.py)
    watching: asyncio.Future[None] | None = None
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
        if shard is not None:
            mover = shard.mover(state_store, service, outbox.send)
            component.requests.guard = shard.guard(state_store, mover)
            watching = asyncio.ensure_future(mover.watch(stop))
        # The timer starts (catching up on time spent down) once notices can be sent.
        component.add_event_handler("session_start", deadlines.connected)
        # Whenever the stream comes up, held items are announced to their holders again
        # (a notice committed just before a crash may never have left).
        component.add_event_handler("session_start", HeldNotices(service, outbox).connected)

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
            shards=mover,
            refusals=REFUSALS.note,
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
                    None if shard is None else shard.deployment(),
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
        return await serve(component, stop, HandshakeRejected, comp.jid, server, keeper)
    finally:
        if keeper is not None:
            keeper.cancel()
        if watching is not None:
            watching.cancel()
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
    deployment: Any = None,
) -> Any:
    """Build and start the operations listener (metrics, probes, dashboard); a shard's
    also lists every shard's queues (*deployment*, ``http/deployment.py``)."""
    from xmpp_queue.http.actions import DashboardActions
    from xmpp_queue.http.deployment import DeploymentView
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
    actions = DashboardActions(service, outbox.send, on_redrive=metrics.redrive_done, pushes=pushes)
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
        deployment=(
            None
            if deployment is None
            else DeploymentView(deployment, settings.component.jid, utc_now)
        ),
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
