"""The service's owner use cases (XEP-0060 §8): create, configure, delete, purge,
and the owner's management of a node's subscriptions and affiliations.

A part of :class:`~xmpp_queue.core.service.PubSubService` (see ``service_parts``):
the verbs that need an owner's (or the service's) rights on a node live together,
with the per-JID node quota they share.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from xmpp_queue.core.access import check_id, require
from xmpp_queue.core.audience import subscriber_jids
from xmpp_queue.core.batcher import Work
from xmpp_queue.core.capabilities import Action
from xmpp_queue.core.effects import ConfigNotice, Outcome, SubscriptionNotice, headline
from xmpp_queue.core.errors import Forbidden, NodeExists
from xmpp_queue.core.limits import NodeQuotaExceeded, check_queue_items
from xmpp_queue.core.model import (
    Actor,
    Affiliation,
    AffiliationEntry,
    Node,
    NodeConfig,
    Subscription,
    SubscriptionState,
    bare,
)
from xmpp_queue.core.node_config import apply_config
from xmpp_queue.core.ordering_config import check_ordering_change
from xmpp_queue.core.payload_ceiling import check_payload_ceiling
from xmpp_queue.core.queue.deadlines import dead_letter_node
from xmpp_queue.core.service_parts import FormValues, ServiceParts

log = logging.getLogger("xmpp_queue.service")


class OwnerOperations(ServiceParts):
    """§8: what a node's owner (or the service itself) may do to it."""

    async def create_node(
        self, actor: Actor, node: str | None, config: FormValues | None = None
    ) -> Outcome[str]:
        """§8.1: node None = instant node. Returns the node id.

        The form is applied to the defaults of the node's type (a queue starts
        whitelisted, with the service's ``max_queue_items``); the creator must be
        allowed to create nodes and under the per-JID node quota."""
        self.settings.access.check_create(actor, self.settings.admins)
        node_id = check_id(node, "node id") if node is not None else self._ctx.new_id()
        form = config or {}
        cfg = apply_config(self.settings.default_config, form)
        if cfg.queue:
            cfg = apply_config(self.settings.defaults_for(True), form)
        check_queue_items(cfg, None, self.settings.limits)
        check_payload_ceiling(cfg, None, self.settings.max_payload_ceiling)
        self._types.for_config(cfg).validate(node_id, cfg)

        async def op(w: Work) -> str:
            if await w.tx.nodes.get(node_id) is not None:
                raise NodeExists(node_id)
            await self._topics.check_binding(w, actor, node_id, cfg, None)
            if not actor.system:
                await self._check_node_quota(w, actor.bare, node_id, cfg)
            await w.tx.nodes.add(Node(node_id, cfg, w.now, actor.jid))
            if not actor.system:
                await w.tx.affiliations.set(node_id, actor.bare, Affiliation.OWNER)
            log.info(
                "event=node_created node=%s queue=%s by=%s",
                node_id,
                cfg.queue,
                actor.bare or "system",
            )
            return node_id

        return await self._ctx.run(op)

    async def _check_node_quota(
        self, w: Work, account: str, node_id: str, config: NodeConfig | None
    ) -> None:
        """``[limits] max_nodes_per_jid``, counting every node *account* causes (see
        ``core/limits.py``) once *node_id* is created or configured as *config*.

        A configure is refused only when it raises the count past the limit, so a
        JID over it (a lowered limit) may still change unrelated fields."""
        limit = self.settings.limits.max_nodes_per_jid
        if limit <= 0 or account in self.settings.admins or not account:
            return
        nodes = {n.node_id: n for n in await w.tx.nodes.all()}
        mine = {i: n.config for i, n in nodes.items() if n.creator and bare(n.creator) == account}

        def count(configs: dict[str, NodeConfig]) -> tuple[int, set[str]]:
            planned = {dead_letter_node(i, c) for i, c in configs.items() if c.queue}
            reserved = planned - nodes.keys() - configs.keys()
            return len(configs) + len(reserved), reserved

        before, reserved_before = count(mine)
        after, reserved = count({**mine, node_id: config} if config is not None else mine)
        if after > limit and after > before:
            new = sorted(reserved - reserved_before)
            raise NodeQuotaExceeded(account, limit, new[0] if new else None)

    async def get_config(self, actor: Actor, node: str) -> NodeConfig:
        self._ctx.admit(actor)

        async def op(w: Work) -> NodeConfig:
            n = await self._ctx.node(w, node)
            require(await self._ctx.affiliation(w, node, actor), Action.CONFIGURE)
            return n.config

        return await self._ctx.read(op)

    async def configure_node(
        self, actor: Actor, node: str, values: FormValues
    ) -> Outcome[NodeConfig]:
        """§8.2. A node that becomes a queue takes the queue defaults for the fields
        the form leaves out (access model, max_items), as a new queue would."""
        self._ctx.admit(actor)

        async def op(w: Work) -> NodeConfig:
            n = await self._ctx.node(w, node)
            require(await self._ctx.affiliation(w, node, actor), Action.CONFIGURE)
            cfg = apply_config(n.config, values)
            if cfg.queue and not n.config.queue:
                queue_defaults = self.settings.defaults_for(True)
                base = dataclasses.replace(
                    n.config,
                    access_model=queue_defaults.access_model,
                    max_items=queue_defaults.max_items,
                )
                cfg = apply_config(base, values)
            check_queue_items(cfg, n.config, self.settings.limits)
            check_payload_ceiling(cfg, n.config, self.settings.max_payload_ceiling)
            check_ordering_change(cfg, n.config, await w.tx.items.count(node))
            before, after = self._types.of(n), self._types.for_config(cfg)
            after.validate(node, cfg)
            await self._topics.check_binding(w, actor, node, cfg, n.config)
            await self._topics.check_topic_change(w, n, cfg)
            if after is not before:
                await before.may_leave(w, n, cfg)
            if not self._ctx.is_admin(actor):
                # A new dead-letter name is a node this queue will create: the
                # creator's quota must hold it (issue 27: renames made nodes past it).
                await self._check_node_quota(w, bare(n.creator), node, cfg)
            await w.tx.nodes.update_config(node, cfg)
            if cfg.notify_config:
                payload = cfg if cfg.deliver_payloads else None
                for jid in await subscriber_jids(w.tx, node):
                    w.effects.append(ConfigNotice(jid, node, payload, headline(cfg)))
            return cfg

        return await self._ctx.run(op)

    async def delete_node(
        self, actor: Actor, node: str, redirect: str | None = None
    ) -> Outcome[None]:
        self._ctx.admit(actor)

        async def op(w: Work) -> None:
            n = await self._ctx.node(w, node)
            require(await self._ctx.affiliation(w, node, actor), Action.DELETE)
            await self._delete(w, n, redirect)
            log.info("event=node_deleted node=%s by=%s", node, actor.bare or "system")

        return await self._ctx.run(op)

    async def purge_node(self, actor: Actor, node: str) -> Outcome[int]:
        """§8.5; returns how many items were removed."""
        self._ctx.admit(actor)

        async def op(w: Work) -> int:
            n = await self._ctx.node(w, node)
            require(await self._ctx.affiliation(w, node, actor), Action.PURGE)
            removed = await self._types.of(n).purge(w, n)
            log.info(
                "event=node_purged node=%s items=%d by=%s", node, removed, actor.bare or "system"
            )
            return removed

        return await self._ctx.run(op)

    async def get_node_subscriptions(self, actor: Actor, node: str) -> list[Subscription]:
        self._ctx.admit(actor)

        async def op(w: Work) -> list[Subscription]:
            await self._ctx.node(w, node)
            require(await self._ctx.affiliation(w, node, actor), Action.MANAGE)
            return await w.tx.subscriptions.for_node(node)

        return await self._ctx.read(op)

    async def set_node_subscriptions(
        self,
        actor: Actor,
        node: str,
        changes: Sequence[tuple[str, SubscriptionState, str | None]],
    ) -> Outcome[None]:
        """§8.8.2: (jid, new state, subid) per change; state NONE removes. All or none."""
        self._ctx.admit(actor)

        async def op(w: Work) -> None:
            n = await self._ctx.node(w, node)
            require(await self._ctx.affiliation(w, node, actor), Action.MANAGE)
            policy = self._types.of(n)
            for jid, state, subid in changes:
                existing = [
                    s
                    for s in await w.tx.subscriptions.for_jid(jid, node)
                    if subid is None or s.subid == subid
                ]
                if state is SubscriptionState.NONE:
                    for s in existing:
                        await w.tx.subscriptions.remove(node, s.subid)
                        if n.config.queue and n.config.queue_single_active:
                            await self._types.queue_of(n).release(w, n, s, "unsubscribed", True)
                elif existing:
                    for s in existing:
                        await w.tx.subscriptions.update(dataclasses.replace(s, state=state))
                else:
                    policy.check_owner_subscription(n, jid, state)
                    await w.tx.subscriptions.add(
                        Subscription(node, jid, subid or self._ctx.new_id(), state, w.now)
                    )
                current = existing[0].subid if existing else subid
                w.effects.append(
                    SubscriptionNotice(jid, node, jid, state, current, headline(n.config))
                )

        return await self._ctx.run(op)

    async def get_node_affiliations(self, actor: Actor, node: str) -> list[AffiliationEntry]:
        self._ctx.admit(actor)

        async def op(w: Work) -> list[AffiliationEntry]:
            await self._ctx.node(w, node)
            require(await self._ctx.affiliation(w, node, actor), Action.MANAGE)
            return await w.tx.affiliations.for_node(node)

        return await self._ctx.read(op)

    async def set_node_affiliations(
        self, actor: Actor, node: str, changes: Sequence[tuple[str, Affiliation]]
    ) -> Outcome[None]:
        self._ctx.admit(actor)

        async def op(w: Work) -> None:
            await self._ctx.node(w, node)
            require(await self._ctx.affiliation(w, node, actor), Action.MANAGE)
            current = {e.jid: e.affiliation for e in await w.tx.affiliations.for_node(node)}
            had_owner = any(a is Affiliation.OWNER for a in current.values())
            for jid, affiliation in changes:
                current[bare(jid)] = affiliation
            # Removing the last owner is refused (§8.9.2.4); a node created by the
            # service itself (admin command, dead letters) has none to keep.
            keeps_owner = any(a is Affiliation.OWNER for a in current.values())
            if had_owner and not keeps_owner and not actor.system:
                raise Forbidden("modify-affiliations", "a node must keep at least one owner")
            for jid, affiliation in changes:
                await w.tx.affiliations.set(node, bare(jid), affiliation)
                if affiliation is Affiliation.OUTCAST:
                    for s in await w.tx.subscriptions.for_node(node):
                        if bare(s.jid) == bare(jid):
                            await w.tx.subscriptions.remove(node, s.subid)

        return await self._ctx.run(op)
