"""The service's subscriber verbs (XEP-0060 §6): subscribe, unsubscribe, options.

A part of :class:`~xmpp_queue.core.service.PubSubService` (see ``service_parts``):
a subscriber's own subscription, found by JID and subid with §6's error flows.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence

from xmpp_queue.core.access import check_access
from xmpp_queue.core.audience import options_of
from xmpp_queue.core.batcher import Work
from xmpp_queue.core.capabilities import Action
from xmpp_queue.core.effects import AuthorizationRequest, Outcome
from xmpp_queue.core.errors import (
    Forbidden,
    InvalidJid,
    InvalidOptions,
    InvalidSubId,
    NotSubscribed,
    SubIdRequired,
)
from xmpp_queue.core.model import (
    AccessModel,
    Actor,
    Affiliation,
    Subscription,
    SubscriptionState,
    bare,
)
from xmpp_queue.core.service_parts import FormValues, ServiceParts
from xmpp_queue.core.subscribe_options import (
    SubscribeOptions,
    parse_subscribe_options,
    service_options,
)

log = logging.getLogger("xmpp_queue.service")


class SubscriberOperations(ServiceParts):
    """§6: a subscriber's own subscriptions and their options."""

    async def subscribe(
        self, actor: Actor, node: str, jid: str, options: FormValues | None = None
    ) -> Outcome[Subscription]:
        self._ctx.admit(actor)

        async def op(w: Work) -> Subscription:
            n = await self._ctx.node(w, node)
            if bare(jid) != actor.bare and not self._ctx.is_admin(actor):
                raise InvalidJid()
            aff = await self._ctx.affiliation(w, node, actor)
            mine = await w.tx.subscriptions.for_jid(jid, node)
            check_access(n, aff, Action.SUBSCRIBE, mine)
            current = options_of(mine[0]) if mine else None
            _check_service_options(actor, options or {})
            opts = parse_subscribe_options(options or {}, current)
            policy = self._types.of(n)
            policy.check_options(n, jid, opts)
            if mine:
                sub = dataclasses.replace(
                    mine[0],
                    queue_requests=opts.queue_requests,
                    options=dict(opts.raw),
                    last_activity=w.now,
                )
                await w.tx.subscriptions.update(sub)
            else:
                pending = n.config.access_model is AccessModel.AUTHORIZE and aff is Affiliation.NONE
                state = SubscriptionState.PENDING if pending else SubscriptionState.SUBSCRIBED
                sub = Subscription(
                    node,
                    jid,
                    self._ctx.new_id(),
                    state,
                    w.now,
                    opts.queue_requests,
                    dict(opts.raw),
                    w.now,
                )
                await w.tx.subscriptions.add(sub)
                if pending:
                    for owner in await w.tx.affiliations.for_node(node):
                        if owner.affiliation is Affiliation.OWNER:
                            w.effects.append(AuthorizationRequest(owner.jid, node, jid, sub.subid))
            if sub.state is SubscriptionState.SUBSCRIBED:
                await policy.subscribed(w, n, sub)
            return sub

        return await self._ctx.run(op)

    async def _find_subscription(
        self, w: Work, node: str, jid: str, subid: str | None, actor: Actor, modify: bool
    ) -> Subscription:
        """§6.2.3 / §6.3.4 error flows: another's JID, not subscribed, subid."""
        if bare(jid) != actor.bare and not self._ctx.is_admin(actor):
            raise Forbidden("act for another JID")
        subs = await w.tx.subscriptions.for_jid(jid, node)
        if subid is not None:
            match = [s for s in subs if s.subid == subid]
            if not match:
                if not subs:
                    raise NotSubscribed(node, jid, modify)
                raise InvalidSubId()
            return match[0]
        if not subs:
            raise NotSubscribed(node, jid, modify)
        if len(subs) > 1:
            raise SubIdRequired()
        return subs[0]

    async def unsubscribe(
        self, actor: Actor, node: str, jid: str, subid: str | None = None
    ) -> Outcome[Subscription]:
        """§6.2: returns the ended subscription, state none (§6.2.2's answer)."""
        self._ctx.admit(actor)

        async def op(w: Work) -> Subscription:
            n = await self._ctx.node(w, node)
            sub = await self._find_subscription(w, node, jid, subid, actor, modify=False)
            # Locks outlive the subscription (XEP-0254 §4: unsubscribe, then release);
            # they end by ack, unlock or timeout. Others may now get more work. On a
            # single-active queue they are released: the next subscriber takes over.
            await w.tx.subscriptions.remove(node, sub.subid)
            if n.config.queue and n.config.queue_single_active:
                await self._types.queue_of(n).release(w, n, sub, "unsubscribed", True)
            return dataclasses.replace(sub, state=SubscriptionState.NONE)

        return await self._ctx.run(op)

    async def get_subscription_options(
        self, actor: Actor, node: str, jid: str, subid: str | None = None
    ) -> tuple[Subscription, SubscribeOptions]:
        self._ctx.admit(actor)

        async def op(w: Work) -> tuple[Subscription, SubscribeOptions]:
            await self._ctx.node(w, node)
            sub = await self._find_subscription(w, node, jid, subid, actor, modify=True)
            return sub, options_of(sub)

        return await self._ctx.read(op)

    async def set_subscription_options(
        self, actor: Actor, node: str, jid: str, subid: str | None, values: FormValues
    ) -> Outcome[Subscription]:
        """§6.3.5; a changed queue_requests takes effect at once (more may be dispatched)."""
        self._ctx.admit(actor)

        async def op(w: Work) -> Subscription:
            n = await self._ctx.node(w, node)
            sub = await self._find_subscription(w, node, jid, subid, actor, modify=True)
            _check_service_options(actor, values)
            opts = parse_subscribe_options(values, options_of(sub))
            self._types.of(n).check_options(n, jid, opts)
            updated = dataclasses.replace(
                sub, queue_requests=opts.queue_requests, options=dict(opts.raw), last_activity=w.now
            )
            await w.tx.subscriptions.update(updated)
            return updated

        return await self._ctx.run(op)


def _check_service_options(actor: Actor, values: Mapping[str, Sequence[str]]) -> None:
    """Only the service itself sets its own options (node_config.SERVICE_OPTION_PREFIX)."""
    if not actor.system:
        for var in service_options(values):
            raise InvalidOptions(var, "reserved for the service")
