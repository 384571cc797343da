"""The service's publisher verbs (XEP-0060 §7): publish, batch publish, retract.

A part of :class:`~xmpp_queue.core.service.PubSubService` (see ``service_parts``):
the item's way in and, on a queue, the holder's ack (a retract).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from xmpp_queue.core.access import check_id, own_subscriptions_on
from xmpp_queue.core.batcher import Work
from xmpp_queue.core.capabilities import may_publish
from xmpp_queue.core.effects import Outcome
from xmpp_queue.core.errors import BadRequest, Forbidden, ItemRequired
from xmpp_queue.core.item_batches import check_batch, merge_retract_notices
from xmpp_queue.core.model import Actor, NewItem, SubscriptionState
from xmpp_queue.core.node_config import check_preconditions
from xmpp_queue.core.payload_ceiling import payload_limit
from xmpp_queue.core.service_parts import FormValues, ServiceParts
from xmpp_queue.core.subscribe_options import MAX_BATCH_ITEMS
from xmpp_queue.core.topics import check_item

log = logging.getLogger("xmpp_queue.service")


class PublisherOperations(ServiceParts):
    """§7: publish and retract, one item or a §13.11 batch."""

    async def publish(
        self,
        actor: Actor,
        node: str,
        item_id: str | None,
        payload: str | None,
        payload_size: int = 0,
        publish_options: FormValues | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> Outcome[str]:
        """§7.1: returns the item id (generated when None). On a queue node the item
        is locked to one subscriber in the same transaction (XEP-0254 §2.2)."""
        item = NewItem(item_id, payload, payload_size, attributes or {})
        out = await self.publish_items(actor, node, [item], publish_options)
        return Outcome(out.value[0], out.effects)

    async def publish_items(
        self,
        actor: Actor,
        node: str,
        items: Sequence[NewItem],
        publish_options: FormValues | None = None,
    ) -> Outcome[list[str]]:
        """§7.1 for each :class:`NewItem`; several are §13.11's batch: one
        operation, so all are stored or none (the first refusal is the answer) and
        the answer comes after the one commit that holds them all.

        Past the publisher's rate (``[limits] publish_rate``, counted in items) the
        publish is refused before anything is read; a token per item is spent once
        it is accepted. Admins and ``[limits] rate_exempt`` JIDs are not counted."""
        self._ctx.admit(actor)
        rate = self._ctx.publish_rate
        bound = not self._ctx.is_admin(actor) and not self._ctx.rate_exempt(actor)
        if not items:
            raise ItemRequired()
        if len(items) > MAX_BATCH_ITEMS:
            raise BadRequest(f"at most {MAX_BATCH_ITEMS} items per request")
        for item in items:
            if item.item_id is not None:
                check_id(item.item_id, "item id")

        async def op(w: Work) -> list[str]:
            if bound:
                rate.check(actor.bare, w.now, len(items))
            n = await self._ctx.node(w, node)
            aff = await self._ctx.affiliation(w, node, actor)
            subs = await own_subscriptions_on(w.tx, node, actor)
            subscribed = any(s.state is SubscriptionState.SUBSCRIBED for s in subs)
            if not may_publish(aff, n.config.publish_model, subscribed):
                raise Forbidden("publish")
            if publish_options:
                check_preconditions(n.config, publish_options)
            cfg, policy, ids = n.config, self._types.of(n), []
            most = payload_limit(cfg, self.settings.max_payload_ceiling)
            for item in items:
                check_item(cfg, item, most)
                new_id = item.item_id or self._ctx.new_id()
                await policy.publish(w, n, new_id, item, actor.jid)
                if not cfg.queue:  # a topic: copies into its bound queues (``topics``)
                    await self._topics.fan_out(w, n, new_id, item, actor.jid)
                ids.append(new_id)
            if bound:
                rate.take(actor.bare, w.now, len(ids))
            return ids

        return await self._ctx.run(op)

    async def retract(
        self, actor: Actor, node: str, item_id: str | Sequence[str], notify: bool | None = None
    ) -> Outcome[None]:
        """§7.2; on a queue node from the lock holder: the ack (XEP-0254 §2.3).

        Several ids are §13.11's batch: all are retracted or none, and the error is
        that of the first item that fails (the operation's savepoint undoes the
        ones before it). The retract notices of the batch go out merged, one per
        recipient."""
        self._ctx.admit(actor)
        item_ids = check_batch(item_id)

        async def op(w: Work) -> None:
            n = await self._ctx.node(w, node)
            aff = await self._ctx.affiliation(w, node, actor)
            policy, first = self._types.of(n), len(w.effects)
            for one in item_ids:
                item = await w.tx.items.get(node, one)
                await policy.retract(w, n, aff, item, one, actor, notify)
            merge_retract_notices(w.effects, first)

        return await self._ctx.run(op)
