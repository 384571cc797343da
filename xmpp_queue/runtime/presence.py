"""Worker liveness from directed presence and bounced notifications.

Workers send directed presence to the component; the server then tells us when
they go away (RFC 6121 §4.6.3 sends unavailable presence to every entity that
received directed presence). docs/queueing.md: unavailable presence from a subscriber
unlocks its items and ends its subscriptions, so work held by a dead worker is
handed on at once instead of waiting for the lock timeout. A notification that
bounces with a ``cancel`` error (XEP-0060 §13.4: the recipient does not exist or
is gone) means the same. Other bounce types (``wait``, ``auth``) are transient
and only logged: the lock timeout covers them.

Subscriptions may be held by a full JID (one worker process) or by a bare JID
(any resource of the account). A full JID going away releases what that
resource holds; the bare JID's subscriptions are released only when no other
resource of that account is still known to be available. This is a memory of
presence since the component started: after a restart a resource that has not
sent presence again is unknown, so its account's bare subscriptions are released
when another resource leaves.

No roster is needed: the component answers a directed presence with its own
(so a worker sees the service is up), once per resource.

Outside the XMPP package: the component reports what it saw (``available``,
``gone``); the rule and the release (:class:`SubscriberRelease`: a service call,
its notices through the outbox) know no stanza.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from xmpp_queue.core.model import bare
from xmpp_queue.core.service import PubSubService
from xmpp_queue.runtime.outbox import Outbox

log = logging.getLogger("xmpp_queue.runtime.presence")

ReleaseSubscriber = Callable[[str, str], Awaitable[None]]
"""Release everything a JID holds: (jid, reason) -> sends the resulting notices."""


class SubscriberRelease:
    """XEP-0254 §4 for a JID that went away: the service releases what it holds,
    the notices (items handed on to others) leave through the outbox."""

    def __init__(self, service: PubSubService, outbox: Outbox) -> None:
        self._service = service
        self._outbox = outbox

    async def __call__(self, jid: str, reason: str) -> None:
        try:
            outcome = await self._service.release_subscriber(jid, reason)
        except Exception:
            log.exception("event=release_failed jid=%s reason=%s", jid, reason)
            return
        self._outbox.send(outcome.effects)


class PresenceTracker:
    """The available resources per bare JID, and the release rule above."""

    def __init__(self, release: ReleaseSubscriber) -> None:
        self._release = release
        self._available: dict[str, set[str]] = {}

    def available(self, jid: str) -> bool:
        """Record an available resource; True if it was not known (answer it)."""
        resources = self._available.setdefault(bare(jid), set())
        if jid in resources:
            return False
        resources.add(jid)
        return True

    def is_available(self, jid: str) -> bool:
        return jid in self._available.get(bare(jid), set())

    async def gone(self, jid: str, reason: str) -> None:
        """*jid* (full or bare) went away: release it, and its account when no
        other resource of it remains."""
        account = bare(jid)
        if jid == account:
            self._available.pop(account, None)
            log.info("event=subscriber_gone jid=%s reason=%s", jid, reason)
            await self._release(account, reason)
            return
        resources = self._available.get(account, set())
        resources.discard(jid)
        log.info(
            "event=subscriber_gone jid=%s reason=%s others_available=%d",
            jid,
            reason,
            len(resources),
        )
        await self._release(jid, reason)
        if not resources:
            self._available.pop(account, None)
            await self._release(account, reason)
