"""PubSubService: every pubsub and queue operation, as one async method each.

Every method takes the requesting :class:`Actor` first (``SYSTEM`` for admin
commands and timers), raises a :mod:`xmpp_queue.core.errors` class on a
client's fault, and returns either a plain value (reads) or an
:class:`Outcome` (writes: the value and the notifications to send, handed out
only after the change committed).

Each write is a coroutine over one :class:`Work`, run by the commit batcher in
its own savepoint: whatever it raises undoes exactly its changes. Bodies keep
one shape (guards, then writes and ledger rows, then effects) for readability,
but all-or-nothing does not depend on it. What a node's type changes
(ordinary or queue) is asked of its policy (``node_types``); the nodes an
operation touched are settled once at its end (a queue dispatches there).
Admin levers and views are a part of their own (``service_admin``), composed
in, like the policies.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from xmpp_queue.core.access import (
    check_access,
    check_id,
    own_subscriptions_on,
    require,
    visible,
)
from xmpp_queue.core.audience import options_of, subscriber_jids
from xmpp_queue.core.batcher import Work
from xmpp_queue.core.capabilities import Action, may_publish
from xmpp_queue.core.context import ServiceContext, ServiceSettings
from xmpp_queue.core.effects import (
    AuthorizationRequest,
    ConfigNotice,
    Outcome,
    SubscriptionNotice,
    headline,
)
from xmpp_queue.core.errors import (
    BadRequest,
    Forbidden,
    InvalidJid,
    InvalidOptions,
    InvalidSubId,
    ItemRequired,
    NodeExists,
    NodeNotFound,
    NotSubscribed,
    SubIdRequired,
)
from xmpp_queue.core.item_batches import check_batch, merge_retract_notices
from xmpp_queue.core.item_pages import read_items
from xmpp_queue.core.limits import NodeQuotaExceeded, check_queue_items
from xmpp_queue.core.model import (
    AccessModel,
    Actor,
    Affiliation,
    AffiliationEntry,
    ItemPage,
    NewItem,
    Node,
    NodeConfig,
    PageRequest,
    Subscription,
    SubscriptionState,
    bare,
)
from xmpp_queue.core.node_config import (
    MAX_BATCH_ITEMS,
    SubscribeOptions,
    apply_config,
    check_preconditions,
    parse_subscribe_options,
    service_options,
)
from xmpp_queue.core.node_types import NodeType, NodeTypes
from xmpp_queue.core.ordering_config import check_ordering_change
from xmpp_queue.core.payload_ceiling import check_payload_ceiling, payload_limit
from xmpp_queue.core.ports import Clock, IdFactory, Store
from xmpp_queue.core.queue.deadlines import dead_letter_node
from xmpp_queue.core.queue.failures import MAX_REASON
from xmpp_queue.core.replay import Replay
from xmpp_queue.core.reports import QueueDetails, QueueSummary, ServiceStatus, TickReport
from xmpp_queue.core.service_admin import AdminLevers
from xmpp_queue.core.topics import Topics, check_item
from xmpp_queue.core.unused_queues import expire_unused, settle_with_unused

__all__ = ["PubSubService", "ServiceSettings"]

FormValues = Mapping[str, Sequence[str]]
TICK_BATCH = 500  # delayed nodes a tick takes; more come due: the next tick at once
MAX_DELAY = 7 * 86400  # seconds a delayed unlock may hold an item back, as long as an extend
log = logging.getLogger("xmpp_queue.service")


class PubSubService:
    """The XEP-0060 + XEP-0254 service (see the module docstring)."""

    def __init__(
        self, store: Store, clock: Clock, new_id: IdFactory, settings: ServiceSettings
    ) -> None:
        self._ctx = ctx = ServiceContext(store, clock, new_id, settings)
        self._types = NodeTypes(ctx)
        ctx.settle = settle_with_unused(self._types.settle)
        self.admin = AdminLevers(ctx, self._types)
        self.replay = Replay(ctx)  # seek and snapshots: service.replay.seek_time(...)
        self._topics = Topics(ctx, self._types.publish_into)
        self.store = store
        self.clock = clock
        self.settings = settings
        self.started_at = ctx.started_at

    # --- lifecycle -----------------------------------------------------------------
    async def start(self) -> None:
        """Start the commit batcher. Call tick() after it to catch up on time spent down."""
        self._ctx.batcher.start()

    async def stop(self) -> None:
        """Finish the operations in flight, then stop."""
        await self._ctx.batcher.stop()

    def on_batch_committed(self, listener: Callable[[int], None]) -> None:
        """Tell *listener* the number of operations of each batch that committed
        (the metrics' batch-size histogram)."""
        self._ctx.batcher.on_commit = listener

    def on_deadline_change(self, listener: Callable[[datetime | None], None]) -> None:
        """Register the scheduler: called with the new earliest deadline after each
        batch that may have changed it."""
        self._ctx.on_deadline_change(listener)

    # --- discovery and reads ----------------------------------------------------------
    def admit(self, actor: Actor) -> None:
        """Refuse a requester outside the service's users (``[access] users``).

        Every operation below asks this first; the glue asks it for requests
        that reach no operation (service disco, worker presence)."""
        self._ctx.admit(actor)

    def default_config(self, actor: Actor, queue: bool = False) -> NodeConfig:
        """§8.3: what a new node of this type gets when the form leaves a field out."""
        self._ctx.admit(actor)
        return self.settings.defaults_for(queue)

    def default_subscribe_options(self, actor: Actor, queue: bool) -> SubscribeOptions:
        self._ctx.admit(actor)
        return SubscribeOptions(queue_requests=1 if queue else None, deliver=True, raw={})

    async def get_node(self, actor: Actor, node: str) -> Node:
        """The node, or NodeNotFound also when it is hidden from *actor*
        (``access.visible``: a whitelisted node for a non-affiliate)."""
        self._ctx.admit(actor)

        async def op(w: Work) -> Node:
            n = await self._ctx.node(w, node)
            if not visible(n, await self._ctx.affiliation(w, node, actor)):
                raise NodeNotFound(node)
            return n

        return await self._ctx.read(op)

    async def list_nodes(self, actor: Actor) -> list[Node]:
        """Every node *actor* may see (``access.visible``)."""
        self._ctx.admit(actor)

        async def op(w: Work) -> list[Node]:
            found = []
            for n in await w.tx.nodes.all():
                if visible(n, await self._ctx.affiliation(w, n.node_id, actor)):
                    found.append(n)
            return found

        return await self._ctx.read(op)

    async def get_items(
        self,
        actor: Actor,
        node: str,
        item_ids: Sequence[str] = (),
        max_items: int | None = None,
        page: PageRequest | None = None,
        subid: str | None = None,
    ) -> ItemPage:
        """§6.5: all items, the max_items newest, some by id, or an RSM page, never
        more than a page (``core/item_pages.py``); with the publisher of each when
        the node exposes publishers (§7.1.2)."""
        self._ctx.admit(actor)

        async def op(w: Work) -> ItemPage:
            n = await self._ctx.node(w, node)
            aff = await self._ctx.affiliation(w, node, actor)
            subs = await own_subscriptions_on(w.tx, node, actor)
            check_access(n, aff, Action.RETRIEVE, subs)
            if subid is not None and not any(s.subid == subid for s in subs):
                raise InvalidSubId()
            show = self._ctx.shown_publisher(n, "-") is not None
            s = self.settings
            found = await read_items(
                w.tx, node, item_ids, max_items, page, s.items_page_size, s.page_bytes
            )
            return dataclasses.replace(found, show_publisher=show)

        return await self._ctx.read(op)

    async def own_subscriptions(self, actor: Actor, node: str | None = None) -> list[Subscription]:
        self._ctx.admit(actor)

        async def op(w: Work) -> list[Subscription]:
            if node is not None:
                await self._ctx.node(w, node)
            subs = await w.tx.subscriptions.for_account(actor.bare)
            return [s for s in subs if node is None or s.node == node]

        return await self._ctx.read(op)

    async def own_affiliations(
        self, actor: Actor, node: str | None = None
    ) -> list[AffiliationEntry]:
        self._ctx.admit(actor)

        async def op(w: Work) -> list[AffiliationEntry]:
            if node is not None:
                await self._ctx.node(w, node)
            entries = await w.tx.affiliations.for_jid(actor.bare)
            return [e for e in entries if node is None or e.node == node]

        return await self._ctx.read(op)

    async def next_deadline(self) -> datetime | None:
        async def op(w: Work) -> datetime | None:
            return await w.tx.items.next_deadline(w.now)

        return await self._ctx.read(op)

    # --- owner use cases (§8) -----------------------------------------------------------
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

    async def _delete(self, w: Work, n: Node, redirect: str | None = None) -> None:
        """The one deletion path (an owner's delete, an unused queue's expiry):
        the bound queues told, then the node's type deletes and notifies."""
        await self._topics.topic_deleted(w, n)
        await self._types.of(n).delete(w, n, redirect)

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

    # --- publisher (§7) ----------------------------------------------------------------
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

    # --- subscriber (§6) ---------------------------------------------------------------
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

    # --- queue (XEP-0254) ----------------------------------------------------------------
    async def unlock(
        self,
        actor: Actor,
        node: str,
        item_id: str | Sequence[str],
        delay: int = 0,
        reason: str | Mapping[str, str] = "",
    ) -> Outcome[None]:
        """§2.4 nack: the holder gives the item back; it goes to the next subscriber,
        not before *delay* seconds when given (our ``<unlock delay>``). Several ids
        (our ``<unlock/>`` only): all or none, as a batch retract. *reason* (ours:
        why the handler failed; one for all, or per item id) is kept with the item
        (``core/queue/failures.py``); one past 200 characters is refused."""
        self._ctx.admit(actor)
        item_ids = check_batch(item_id)
        if not 0 <= delay <= MAX_DELAY:
            raise BadRequest(f"delay must be between 0 and {MAX_DELAY}")
        reasons = {i: reason for i in item_ids} if isinstance(reason, str) else dict(reason)
        if any(len(text) > MAX_REASON for text in reasons.values()):
            raise BadRequest(f"a reason is at most {MAX_REASON} characters")

        async def op(w: Work) -> None:
            n = await self._ctx.node(w, node)
            queue = self._types.queue_of(n)
            for one in item_ids:
                await queue.unlock(w, n, actor, one, delay, reasons.get(one, ""))

        return await self._ctx.run(op)

    async def dead_letter_now(
        self, actor: Actor, node: str, item_id: str, reason: str
    ) -> Outcome[None]:
        """The holder sends an item that can never succeed to the dead-letter node."""
        self._ctx.admit(actor)
        check_id(item_id, "item id")

        async def op(w: Work) -> None:
            n = await self._ctx.node(w, node)
            await self._types.queue_of(n).dead_letter(w, n, actor, item_id, reason)

        return await self._ctx.run(op)

    async def extend_lock(
        self, actor: Actor, node: str, item_id: str, seconds: int | None = None
    ) -> Outcome[datetime]:
        """Push the holder's deadline to now + seconds (default: the node's lock
        timeout). Same error flow as unlock. Returns the new deadline."""
        self._ctx.admit(actor)
        check_id(item_id, "item id")
        if seconds is not None and not 1 <= seconds <= 86400 * 7:
            raise BadRequest("seconds must be between 1 and 604800")

        async def op(w: Work) -> datetime:
            n = await self._ctx.node(w, node)
            return await self._types.queue_of(n).extend(w, n, actor, item_id, seconds)

        return await self._ctx.run(op)

    async def release_subscriber(self, jid: str, reason: str) -> Outcome[int]:
        """XEP-0254 §4: a subscriber went away (unavailable presence, bounce): unlock
        everything held by subscriptions of exactly this JID, redispatch, and
        unsubscribe them. Returns how many items were released."""

        async def op(w: Work) -> int:
            released = 0
            for sub in await w.tx.subscriptions.for_jid(jid):
                n = await w.tx.nodes.get(sub.node)
                if n is None:
                    continue
                w.touched[n.node_id] = None
                await w.tx.subscriptions.remove(sub.node, sub.subid)
                if self._types.type_of(n) is NodeType.QUEUE:  # nothing is held on a leaf
                    released += await self._types.queue_of(n).release(w, n, sub, reason, False)
                log.info(
                    "event=subscriber_released node=%s jid=%s reason=%s items=%d",
                    sub.node,
                    jid,
                    reason,
                    released,
                )
            return released

        return await self._ctx.run(op)

    async def tick(self) -> Outcome[int]:
        """Expire due locks (unlock notice, redispatch or dead-letter), expire
        waiting items past their time, and dispatch items whose delay has passed;
        end retentions and delete bound queues unused past their delay.
        Returns how many locks expired (``sweep`` says which nodes it settled)."""
        outcome = await self.sweep()
        return Outcome(outcome.value.expired_locks, outcome.effects)

    async def sweep(self, every_node: bool = False) -> Outcome[TickReport]:
        """The timer's tick: settle only the nodes where something came due.

        A node is touched when one of its lock deadlines passed, a waiting item of
        it expired, or its delayed items (retry back-off, a later start) came due;
        the store's time indexes name them, so an idle node costs nothing per tick.
        *every_node* settles every node as well: the catch-up after a tick that
        failed (its due nodes may have been taken from the indexes, then undone).
        """

        async def op(w: Work) -> TickReport:
            queues = self._types.queue
            expired = await queues.expire_due(w, w.tx.nodes.get)
            await queues.expire_waiting_due(w, w.tx.nodes.get)
            await Replay.end_retention(w)
            await expire_unused(w, self._delete)
            for node_id in await w.tx.items.due_delayed_nodes(w.now, TICK_BATCH):
                w.touched[node_id] = None
            if every_node:
                for n in await w.tx.nodes.all():
                    w.touched[n.node_id] = None
            w.deadlines_changed = True
            return TickReport(expired, tuple(w.touched))

        return await self._ctx.run(op)

    # --- admin (service_admin) -----------------------------------------------------------
    async def queue_overview(self, actor: Actor) -> list[QueueSummary]:
        return await self.admin.queue_overview(actor)

    async def queue_details(self, actor: Actor, node: str) -> QueueDetails:
        return await self.admin.queue_details(actor, node)

    async def force_unlock(
        self, actor: Actor, node: str, item_id: str | None = None, holder: str | None = None
    ) -> Outcome[int]:
        return await self.admin.force_unlock(actor, node, item_id, holder)

    async def kick_subscriber(self, actor: Actor, node: str, jid: str) -> Outcome[int]:
        return await self.admin.kick_subscriber(actor, node, jid)

    async def redrive(
        self, actor: Actor, dead_letter_node: str, limit: int | None = None
    ) -> Outcome[int]:
        return await self.admin.redrive(actor, dead_letter_node, limit)

    async def move_item(
        self, actor: Actor, node: str, item_id: str, target: str, target_item_id: str | None = None
    ) -> Outcome[str]:
        return await self.admin.move_item(actor, node, item_id, target, target_item_id)

    async def status(self, actor: Actor) -> ServiceStatus:
        return await self.admin.status(actor)


def _check_service_options(actor: Actor, values: Mapping[str, Sequence[str]]) -> None:
    """Only the service itself sets its own options (node_config.SERVICE_OPTION_PREFIX)."""
    if not actor.system:
        for var in service_options(values):
            raise InvalidOptions(var, "reserved for the service")
