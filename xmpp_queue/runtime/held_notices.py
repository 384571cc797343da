"""Held items announced again whenever the component's stream comes up.

Commit first, then send: a process that dies (or loses its stream to the XMPP
server) between the commit of new locks and the sending of their notices leaves
items locked to workers that never heard of them. Those workers' windows look
full to the service and nothing tells them otherwise until the lock timeout
(300 s by default): a stall after every crash that lands in that gap.

So at every session start (first start, restart, take-over by a standby, a
reconnect after the server went away) the service announces each held item to
its holder again, with the same lock and ``delivery-attempt``, marked
``delivery-resent``. A holder that never got the notice starts the job; one that
has it (still running, or finished with its ack being re-sent) recognises the
mark and the attempt and ignores it. Nothing changes in the store: no ledger row,
no new deadline. A holder that is gone makes the notice bounce, which releases
its items as any bounce does.

Only subscribers of the default (XMPP) sink hear them: a push endpoint's
deliveries live in its pusher, which knows what it sent, and a held push
delivery comes back through its lock timeout.
"""

from __future__ import annotations

import logging
from typing import Any

from xmpp_queue.core.service import PubSubService
from xmpp_queue.runtime.outbox import Outbox

log = logging.getLogger("xmpp_queue.runtime.held_notices")


class HeldNotices:
    """Hooked to the component's ``session_start``: see the module docstring."""

    def __init__(self, service: PubSubService, outbox: Outbox) -> None:
        self._service = service
        self._outbox = outbox

    async def connected(self, _event: Any = None) -> None:
        try:
            outcome = await self._service.resend_held()
        except Exception as exc:  # the store is down: the lock timeout still covers it
            log.warning("event=held_resend_failed error=%s", type(exc).__name__)
            return
        effects = [e for e in outcome.effects if not self._outbox.has_route(e.to)]
        self._outbox.send(effects)
        if effects:
            log.info("event=held_resent notices=%d", len(effects))
