"""The composition root: the one place that builds and wires the running service.

Clock, id factory, store, :class:`PubSubService`, :class:`QueueComponent` and
the admin commands are created here, in :func:`run_service`, and nowhere else:
no module-level singletons, no engine at import time, so tests and the demo
can build as many independent services as they like.

Lifecycle, in order: open the store, start the service (its commit batcher),
connect the component and serve until SIGINT/SIGTERM or the component ends;
then stop the component (no new stanzas), stop the service (finish the
operations in flight) and close the store. A wrong secret is one log line
(written by the component) and exit status 1: retrying cannot fix it, and
hammering the server helps nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import signal
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, Protocol

from xmpp_queue.config import Settings
from xmpp_queue.core.service import PubSubService, ServiceSettings

log = logging.getLogger("xmpp_queue.app")

STOP_TIMEOUT = 15.0


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
        access=access.policy(),
        limits=settings.limits.limits(),
        queue_access_model=access.queue_access_model,
        expose_publishers=access.expose_publishers,
    )


def _redacted(url: str) -> str:
    from xmpp_queue.storage.engine import redacted_url

    return redacted_url(url)


async def run_service(settings: Settings) -> int:
    """Run the component until a signal or a fatal error. Returns the exit status."""
    from xmpp_queue.admin.commands import register_admin_commands
    from xmpp_queue.storage.store import StateStore
    from xmpp_queue.xmpp.component import HandshakeRejected, QueueComponent

    comp = settings.component
    server = f"{comp.server_host}:{comp.server_port}"
    # The component is the one writer of its database: state is served from memory
    # and each group commit writes only the net change (storage/store.py).
    store = await StateStore.open(settings.database.url)
    service = PubSubService(store, utc_now, new_id, service_settings(settings))
    try:
        await service.start()
        component = QueueComponent(
            comp.jid, comp.secret, comp.server_host, comp.server_port, service
        )
        # Admin commands change state too (purge, unlock ...): their notifications
        # go out through the component's ordered sender, like every other outcome.
        register_admin_commands(
            component,
            service,
            settings.admins.jids,
            settings.database.url,
            send_effects=lambda effects: component.send_outcome(None, effects),
        )
        _freeze_startup_heap()
        log.info(
            "event=starting component=%s server=%s database=%s admins=%d",
            comp.jid,
            server,
            _redacted(settings.database.url),
            len(settings.admins.jids),
        )
        stop = asyncio.Event()
        with _signals_set(stop):
            status = await _serve(component, stop, HandshakeRejected, comp.jid, server)
        return status
    finally:
        try:
            await service.stop()
        except Exception:  # still close the store; the operator sees why in the log
            log.exception("event=service_stop_failed component=%s", comp.jid)
        await store.close()
        log.info("event=stopped component=%s", comp.jid)


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
) -> int:
    """Run ``component.run()`` until it ends or *stop* is set; map the ending to a status."""
    run = asyncio.ensure_future(component.run())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({run, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
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
