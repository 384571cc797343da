"""How the component's run ended, as the process's exit status.

A wrong secret is one log line (written by the component) and exit status 1:
retrying cannot fix it, and hammering the server helps nobody. A lost lease is
no ending (None): the process stands by again. A stop that takes longer than
``STOP_TIMEOUT`` is logged and exits 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    pass

log = logging.getLogger("xmpp_queue.app")


STOP_TIMEOUT = 15.0


class RunnableComponent(Protocol):
    """What the app needs of the XMPP glue's component."""

    async def run(self) -> Any: ...

    async def stop(self) -> Any: ...


async def serve(
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
