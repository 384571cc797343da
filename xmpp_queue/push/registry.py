"""Stored push subscriptions: added, removed and listed by a queue's owner or an admin.

Storage choice: a push subscription *is* a queue subscription, so it is stored as
one, with nothing new in the schema. Its JID is ``push+<id>@<component domain>``
(no XMPP client can hold an address on the component's own domain, so the form is
reserved by construction), its ``pubsub#queue_requests`` is the most in flight, and
the endpoint lives in the subscription's options under the service's own prefix
(``xmpp-queue#push_url``, ``_bearer``, ``_secret``; core/node_config.py: only the
system actor may set them and no subscriber form shows them). Adding one is one
commit (the subscription and its endpoint together), it survives restarts with the
rest of the state, and removing it is an unsubscribe. At start :meth:`start` reads
every queue's subscriptions and routes each push JID to a :class:`PushSink`.

Secrets are stored in the database as given (like the component secret in the
config file: protect the database). They never leave through this module's
views: :meth:`PushSubscription.view` masks them, and the URL's query string (which
may carry a key) is masked too.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from xmpp_queue.core.errors import BadRequest, PubSubError
from xmpp_queue.core.model import SYSTEM, Actor, Subscription
from xmpp_queue.core.service import PubSubService
from xmpp_queue.push.policy import PushPolicy, client_session
from xmpp_queue.push.sink import PushEndpoint, PushObserver, PushSink
from xmpp_queue.runtime.outbox import Outbox

log = logging.getLogger("xmpp_queue.push")

URL = "xmpp-queue#push_url"
BEARER = "xmpp-queue#push_bearer"
SECRET = "xmpp-queue#push_secret"
QUEUE_REQUESTS = "pubsub#queue_requests"
MAX_IN_FLIGHT = 1000
MASK = "****"


class PushNotFound(PubSubError):
    """No push subscription with that id on that queue."""


@dataclass(frozen=True, slots=True)
class PushSubscription:
    node: str
    push_id: str
    jid: str
    url: str
    max_in_flight: int
    bearer: str | None = field(default=None, repr=False)
    secret: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"PushSubscription({self.view()})"

    def view(self) -> dict[str, str]:
        """What admin output, the dashboard and the CLI show: secrets masked."""
        auth = [name for name, value in (("bearer", self.bearer), ("hmac", self.secret)) if value]
        return {
            "id": self.push_id,
            "node": self.node,
            "url": masked_url(self.url),
            "auth": ", ".join(f"{name} {MASK}" for name in auth) or "none",
            "max_in_flight": str(self.max_in_flight),
        }


def masked_url(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query=MASK if parts.query else ""))


def push_jid(push_id: str, domain: str) -> str:
    return f"push+{push_id}@{domain}"


def from_subscription(sub: Subscription, domain: str) -> PushSubscription | None:
    """The push subscription stored as *sub*, or None for any other subscription."""
    local, _, host = sub.jid.partition("@")
    if host != domain or not local.startswith("push+") or URL not in sub.options:
        return None

    def one(var: str) -> str | None:
        values = sub.options.get(var)
        return values[0] if values and values[0] else None

    return PushSubscription(
        node=sub.node,
        push_id=local[len("push+") :],
        jid=sub.jid,
        url=one(URL) or "",
        max_in_flight=sub.queue_requests or 1,
        bearer=one(BEARER),
        secret=one(SECRET),
    )


class PushSubscriptions:
    """The push subscriptions of one service term and their sinks in the outbox."""

    def __init__(
        self,
        service: PubSubService,
        outbox: Outbox,
        policy: PushPolicy,
        domain: str,
        *,
        session: Any = None,
        observer: PushObserver | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._service = service
        self._outbox = outbox
        self.policy = policy
        self.domain = domain
        self._session = session
        self._own_session = session is None
        self._observer = observer
        self._wall_clock = wall_clock
        self.sinks: dict[str, PushSink] = {}

    async def start(self) -> int:
        """Route every stored push subscription to its sink. Returns how many."""
        if self._session is None:
            self._session = client_session(self.policy)
        for node in await self._service.list_nodes(SYSTEM):
            if not node.config.queue:
                continue
            for sub in await self._service.get_node_subscriptions(SYSTEM, node.node_id):
                push = from_subscription(sub, self.domain)
                if push is not None:
                    self._route(push)
        log.info("event=push_started subscriptions=%d", len(self.sinks))
        return len(self.sinks)

    async def close(self) -> None:
        for jid, sink in list(self.sinks.items()):
            self._outbox.unroute(jid)
            await sink.close()
        self.sinks.clear()
        if self._own_session and self._session is not None:
            await self._session.close()
            self._session = None

    async def add(
        self,
        actor: Actor,
        node: str,
        url: str,
        *,
        bearer: str | None = None,
        secret: str | None = None,
        max_in_flight: int = 8,
    ) -> PushSubscription:
        """Add a push subscription to queue *node* (its owner or an admin)."""
        await self._check_owner(actor, node)
        if not 1 <= max_in_flight <= MAX_IN_FLIGHT:
            raise BadRequest(f"max in flight must be 1..{MAX_IN_FLIGHT}")
        await self.policy.check_endpoint(url)
        push_id = secrets.token_hex(6)
        jid = push_jid(push_id, self.domain)
        options = {QUEUE_REQUESTS: [str(max_in_flight)], URL: [url]}
        if bearer:
            options[BEARER] = [bearer]
        if secret:
            options[SECRET] = [secret]
        push = PushSubscription(node, push_id, jid, url, max_in_flight, bearer, secret)
        self._route(push)  # before the subscribe's own notices are sent
        try:
            outcome = await self._service.subscribe(SYSTEM, node, jid, options)
        except BaseException:
            await self._unroute(jid)
            raise
        self._outbox.send(outcome.effects)
        log.info("event=push_added node=%s id=%s host=%s", node, push_id, urlsplit(url).hostname)
        return push

    async def remove(self, actor: Actor, node: str, push_id: str) -> PushSubscription:
        """End a push subscription; the items it holds go back to the queue at once."""
        await self._check_owner(actor, node)
        push = next((p for p in await self.list(actor, node) if p.push_id == push_id), None)
        if push is None:
            raise PushNotFound(f"no push subscription {push_id!r} on {node!r}")
        # One operation unlocks what it holds and ends its subscription. Unsubscribing
        # first would not do: locks outlive a subscription, and a release finds the
        # held items through the JID's subscriptions, so an item handed out again after
        # a failed POST would have stayed locked until its lock timeout.
        released = await self._service.release_subscriber(push.jid, "push subscription removed")
        self._outbox.send(released.effects)  # its unlock notices cancel POSTs in flight
        await self._unroute(push.jid)
        log.info("event=push_removed node=%s id=%s", node, push_id)
        return push

    async def list(self, actor: Actor, node: str) -> list[PushSubscription]:
        await self._check_owner(actor, node)
        subs = await self._service.get_node_subscriptions(SYSTEM, node)
        found = (from_subscription(s, self.domain) for s in subs)
        return sorted((p for p in found if p is not None), key=lambda p: p.push_id)

    async def _check_owner(self, actor: Actor, node: str) -> None:
        """Owners and admins only (the owner-only affiliations read checks it), queues only."""
        await self._service.get_node_affiliations(actor, node)
        if not (await self._service.get_node(SYSTEM, node)).config.queue:
            raise BadRequest(f"{node!r} is not a queue: push subscriptions are for queues")

    def _route(self, push: PushSubscription) -> None:
        endpoint = PushEndpoint(
            push.jid,
            push.url,
            bearer=push.bearer,
            secret=push.secret.encode() if push.secret else None,
            timeout=self.policy.request_timeout,
            max_in_flight=push.max_in_flight,
        )
        sink = PushSink(
            self._service,
            self._outbox,
            endpoint,
            self._session,
            self._wall_clock,
            policy=self.policy,
            observer=self._observer,
        )
        self.sinks[push.jid] = sink
        self._outbox.route(push.jid, sink)

    async def _unroute(self, jid: str) -> None:
        self._outbox.unroute(jid)
        sink = self.sinks.pop(jid, None)
        if sink is not None:
            await sink.close()
