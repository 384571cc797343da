"""PubSubService: every pubsub and queue operation, as one async method each.

Every method takes the requesting :class:`Actor` first (``SYSTEM`` for admin
commands and timers), raises a :mod:`xmpp_queue.core.errors` class on a
client's fault, and returns either a plain value (reads) or an
:class:`Outcome` (writes: the value and the notifications to send, handed out
only after the change committed).

Each operation body is a coroutine over one :class:`Work` run by the
:class:`CommitBatcher` (group commit, one writer). Bodies follow one shape:
guards (may raise, never write), then writes and ledger rows, then effects.
Queue mechanics live in :class:`QueueEngine`; admin views in ``service_admin``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TypeVar

from xmpp_queue.core.access import (
    check_access,
    check_id,
    load_node,
    own_subscriptions,
    require,
)
from xmpp_queue.core.batcher import Work
from xmpp_queue.core.capabilities import Action, may, may_publish
from xmpp_queue.core.effects import (
    AuthorizationRequest,
    ConfigNotice,
    DeleteNotice,
    ItemNotice,
    NoticeItem,
    Outcome,
    PurgeNotice,
    RetractNotice,
    SubscriptionNotice,
    UnlockNotice,
)
from xmpp_queue.core.errors import (
    BadRequest,
    Forbidden,
    InvalidJid,
    InvalidNodeConfig,
    InvalidSubId,
    ItemForbidden,
    ItemNotFound,
    NodeExists,
    NodeFull,
    NotAQueue,
    NotSubscribed,
    PayloadRequired,
    PayloadTooBig,
    QueueConfigurationRequired,
    SubIdRequired,
)
from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import (
    AccessModel,
    Actor,
    Affiliation,
    AffiliationEntry,
    Item,
    ItemPage,
    Node,
    NodeConfig,
    PageRequest,
    SendLastPublished,
    Subscription,
    SubscriptionState,
    bare,
)
from xmpp_queue.core.node_config import (
    QUEUE_REQUESTS,
    SubscribeOptions,
    apply_config,
    check_preconditions,
    parse_subscribe_options,
)
from xmpp_queue.core.queue import verdicts
from xmpp_queue.core.queue.deadlines import dead_letter_node, lock_deadline
from xmpp_queue.core.queue.locks import Release, check_release
from xmpp_queue.core.service_admin import AdminViews
from xmpp_queue.core.service_base import ServiceSettings

__all__ = ["PubSubService", "ServiceSettings"]

T = TypeVar("T")
FormValues = Mapping[str, Sequence[str]]
log = logging.getLogger("xmpp_queue.service")


def _options_of(sub: Subscription) -> SubscribeOptions:
    deliver = sub.options.get("pubsub#deliver", ("1",))[0] not in ("0", "false")
    return SubscribeOptions(sub.queue_requests, deliver, dict(sub.options))


class PubSubService(AdminViews):
    """The XEP-0060 + XEP-0254 service (see the module docstring)."""

    # --- discovery and reads ----------------------------------------------------------
    def default_config(self) -> NodeConfig:
        return self.settings.default_config

    async def get_node(self, actor: Actor, node: str) -> Node:
        return await self._read(lambda w: load_node(w.tx, node))

    async def list_nodes(self, actor: Actor) -> list[Node]:
        async def op(w: Work) -> list[Node]:
            return await w.tx.nodes.all()

        return await self._read(op)

    async def get_items(
        self,
        actor: Actor,
        node: str,
        item_ids: Sequence[str] = (),
        max_items: int | None = None,
        page: PageRequest | None = None,
        subid: str | None = None,
    ) -> ItemPage:
        """§6.5: all items, the max_items newest, some by id, or an RSM page."""

        async def op(w: Work) -> ItemPage:
            n = await load_node(w.tx, node)
            aff = await self._affiliation(w, node, actor)
            subs = own_subscriptions(await w.tx.subscriptions.for_node(node), actor)
            check_access(n, aff, Action.RETRIEVE, subs)
            if subid is not None and not any(s.subid == subid for s in subs):
                raise InvalidSubId()
            if item_ids:
                found = [await w.tx.items.get(node, i) for i in item_ids]
                items = tuple(i for i in found if i is not None)
                return ItemPage(items=items, count=len(items))
            if max_items is not None:
                if max_items < 0:
                    raise BadRequest("max_items must not be negative")
                latest = await w.tx.items.latest(node, max_items)
                return ItemPage(items=tuple(latest), count=len(latest))
            return await w.tx.items.page(node, page or PageRequest())

        return await self._read(op)

    async def own_subscriptions(self, actor: Actor, node: str | None = None) -> list[Subscription]:
        async def op(w: Work) -> list[Subscription]:
            if node is not None:
                await load_node(w.tx, node)
            subs = await w.tx.subscriptions.for_account(actor.bare)
            return [s for s in subs if node is None or s.node == node]

        return await self._read(op)

    async def own_affiliations(
        self, actor: Actor, node: str | None = None
    ) -> list[AffiliationEntry]:
        async def op(w: Work) -> list[AffiliationEntry]:
            if node is not None:
                await load_node(w.tx, node)
            entries = await w.tx.affiliations.for_jid(actor.bare)
            return [e for e in entries if node is None or e.node == node]

        return await self._read(op)

    # --- owner use cases (§8) -----------------------------------------------------------
    async def create_node(
        self, actor: Actor, node: str | None, config: FormValues | None = None
    ) -> Outcome[str]:
        """§8.1: node None = instant node. Returns the node id."""
        node_id = check_id(node, "node id") if node is not None else self.new_id()
        cfg = apply_config(self.settings.default_config, config or {})
        self._validate_node_config(node_id, cfg)

        async def op(w: Work) -> str:
            if await w.tx.nodes.get(node_id) is not None:
                raise NodeExists(node_id)
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

        return await self._run(op)

    def _validate_node_config(self, node_id: str, cfg: NodeConfig) -> None:
        if not cfg.queue:
            return
        if not cfg.persist_items:
            raise InvalidNodeConfig("pubsub#persist_items", "a queue node must persist items")
        if dead_letter_node(node_id, cfg) == node_id:
            raise InvalidNodeConfig("pubsub#queue_dead_letter", "must name another node")

    async def get_config(self, actor: Actor, node: str) -> NodeConfig:
        async def op(w: Work) -> NodeConfig:
            n = await load_node(w.tx, node)
            require(await self._affiliation(w, node, actor), Action.CONFIGURE)
            return n.config

        return await self._read(op)

    async def configure_node(
        self, actor: Actor, node: str, values: FormValues
    ) -> Outcome[NodeConfig]:
        async def op(w: Work) -> NodeConfig:
            n = await load_node(w.tx, node)
            require(await self._affiliation(w, node, actor), Action.CONFIGURE)
            cfg = apply_config(n.config, values)
            self._validate_node_config(node, cfg)
            if n.config.queue and not cfg.queue and (await w.tx.items.in_flight(node)):
                raise InvalidNodeConfig("pubsub#queue", "items are locked; purge or wait")
            await w.tx.nodes.update_config(node, cfg)
            updated = dataclasses.replace(n, config=cfg)
            if cfg.notify_config:
                payload = cfg if cfg.deliver_payloads else None
                for jid in await self._subscriber_jids(w, node):
                    w.effects.append(ConfigNotice(jid, node, payload))
            if cfg.queue:
                await self.queue.dispatch(w, updated)
            return cfg

        return await self._run(op)

    async def _subscriber_jids(self, w: Work, node: str) -> list[str]:
        subs = await w.tx.subscriptions.for_node(node)
        return list(dict.fromkeys(s.jid for s in subs if s.state is SubscriptionState.SUBSCRIBED))

    async def delete_node(
        self, actor: Actor, node: str, redirect: str | None = None
    ) -> Outcome[None]:
        async def op(w: Work) -> None:
            n = await load_node(w.tx, node)
            require(await self._affiliation(w, node, actor), Action.DELETE)
            jids = await self._subscriber_jids(w, node)
            await self._tell_holders(w, n, "deleted")
            if n.config.queue:
                for item in await w.tx.items.remove_all(node):
                    self._ledger(w, EventKind.PURGED, item)
            await w.tx.nodes.remove(node)
            self.queue.forget_node(node)
            if n.config.notify_delete:
                w.effects.extend(DeleteNotice(j, node, redirect, n.config.queue) for j in jids)
            w.deadlines_changed = True
            log.info("event=node_deleted node=%s by=%s", node, actor.bare or "system")

        return await self._run(op)

    async def _tell_holders(self, w: Work, n: Node, reason: str) -> None:
        """Purge/delete of a queue node: every lock holder hears its item is gone."""
        if not n.config.queue:
            return
        for item in await w.tx.items.locked(n.node_id):
            if item.lock_jid:
                w.effects.append(UnlockNotice(item.lock_jid, n.node_id, item.item_id, reason))

    async def purge_node(self, actor: Actor, node: str) -> Outcome[int]:
        """§8.5; returns how many items were removed."""

        async def op(w: Work) -> int:
            n = await load_node(w.tx, node)
            require(await self._affiliation(w, node, actor), Action.PURGE)
            await self._tell_holders(w, n, "purged")
            removed = await w.tx.items.remove_all(node)
            if n.config.queue:
                for item in removed:
                    self._ledger(w, EventKind.PURGED, item)
            if n.config.notify_retract or n.config.queue:
                w.effects.extend(
                    PurgeNotice(j, node, n.config.queue)
                    for j in await self._subscriber_jids(w, node)
                )
            w.deadlines_changed = True
            log.info(
                "event=node_purged node=%s items=%d by=%s",
                node,
                len(removed),
                actor.bare or "system",
            )
            return len(removed)

        return await self._run(op)

    async def get_node_subscriptions(self, actor: Actor, node: str) -> list[Subscription]:
        async def op(w: Work) -> list[Subscription]:
            await load_node(w.tx, node)
            require(await self._affiliation(w, node, actor), Action.MANAGE)
            return await w.tx.subscriptions.for_node(node)

        return await self._read(op)

    async def set_node_subscriptions(
        self,
        actor: Actor,
        node: str,
        changes: Sequence[tuple[str, SubscriptionState, str | None]],
    ) -> Outcome[None]:
        """§8.8.2: (jid, new state, subid) per change; state NONE removes."""

        async def op(w: Work) -> None:
            n = await load_node(w.tx, node)
            require(await self._affiliation(w, node, actor), Action.MANAGE)
            for jid, state, subid in changes:
                existing = [
                    s
                    for s in await w.tx.subscriptions.for_jid(jid, node)
                    if subid is None or s.subid == subid
                ]
                if state is SubscriptionState.NONE:
                    for s in existing:
                        await w.tx.subscriptions.remove(node, s.subid)
                elif existing:
                    for s in existing:
                        await w.tx.subscriptions.update(dataclasses.replace(s, state=state))
                else:
                    if n.config.queue and state is SubscriptionState.SUBSCRIBED:
                        raise BadRequest(
                            f"{jid}: queue subscriptions need queue_requests; "
                            "the worker subscribes itself"
                        )
                    await w.tx.subscriptions.add(
                        Subscription(node, jid, subid or self.new_id(), state, w.now)
                    )
                current = existing[0].subid if existing else subid
                w.effects.append(SubscriptionNotice(jid, node, jid, state, current))
            if n.config.queue:
                await self.queue.dispatch(w, n)

        return await self._run(op)

    async def get_node_affiliations(self, actor: Actor, node: str) -> list[AffiliationEntry]:
        async def op(w: Work) -> list[AffiliationEntry]:
            await load_node(w.tx, node)
            require(await self._affiliation(w, node, actor), Action.MANAGE)
            return await w.tx.affiliations.for_node(node)

        return await self._read(op)

    async def set_node_affiliations(
        self, actor: Actor, node: str, changes: Sequence[tuple[str, Affiliation]]
    ) -> Outcome[None]:
        async def op(w: Work) -> None:
            await load_node(w.tx, node)
            require(await self._affiliation(w, node, actor), Action.MANAGE)
            current = {e.jid: e.affiliation for e in await w.tx.affiliations.for_node(node)}
            for jid, affiliation in changes:
                current[bare(jid)] = affiliation
            if not actor.system and not any(a is Affiliation.OWNER for a in current.values()):
                raise Forbidden("modify-affiliations", "a node must keep at least one owner")
            for jid, affiliation in changes:
                await w.tx.affiliations.set(node, bare(jid), affiliation)
                if affiliation is Affiliation.OUTCAST:
                    for s in await w.tx.subscriptions.for_node(node):
                        if bare(s.jid) == bare(jid):
                            await w.tx.subscriptions.remove(node, s.subid)

        return await self._run(op)

    # --- publisher (§7) ----------------------------------------------------------------
    async def publish(
        self,
        actor: Actor,
        node: str,
        item_id: str | None,
        payload: str | None,
        payload_size: int = 0,
        publish_options: FormValues | None = None,
    ) -> Outcome[str]:
        """§7.1: returns the item id (generated when None). On a queue node the item
        is locked to one subscriber in the same transaction (XEP-0254 §2.2)."""
        if item_id is not None:
            check_id(item_id, "item id")

        async def op(w: Work) -> str:
            n = await load_node(w.tx, node)
            aff = await self._affiliation(w, node, actor)
            subs = own_subscriptions(await w.tx.subscriptions.for_node(node), actor)
            subscribed = any(s.state is SubscriptionState.SUBSCRIBED for s in subs)
            if not may_publish(aff, n.config.publish_model, subscribed):
                raise Forbidden("publish")
            if publish_options:
                check_preconditions(n.config, publish_options)
            cfg = n.config
            if payload is None and cfg.deliver_payloads and cfg.persist_items:
                raise PayloadRequired()
            if payload is not None and not cfg.deliver_payloads and not cfg.persist_items:
                raise ItemForbidden()
            if payload_size > cfg.max_payload_size:
                raise PayloadTooBig(payload_size, cfg.max_payload_size)
            new_id = item_id or self.new_id()
            await self._store_item(w, n, new_id, payload, payload_size, actor.jid, {})
            return new_id

        return await self._run(op)

    async def _publish_internal(
        self,
        w: Work,
        node_id: str,
        item_id: str,
        payload: str | None,
        size: int,
        publisher: str,
        headers: Mapping[str, str],
        origin: Node,
    ) -> None:
        """Publish as the service itself (dead letters, redrive); creates a missing
        dead-letter node with the origin's owners."""
        target = await w.tx.nodes.get(node_id)
        if target is None:
            cfg = dataclasses.replace(
                self.settings.default_config,
                queue=False,
                max_items=None,
                title=f"Dead letters of {origin.node_id}",
            )
            target = Node(node_id, cfg, w.now, "")
            await w.tx.nodes.add(target)
            for entry in await w.tx.affiliations.for_node(origin.node_id):
                if entry.affiliation is Affiliation.OWNER:
                    await w.tx.affiliations.set(node_id, entry.jid, Affiliation.OWNER)
            log.info(
                "event=node_created node=%s reason=dead_letter origin=%s", node_id, origin.node_id
            )
        await self._store_item(w, target, item_id, payload, size, publisher, headers)

    async def _store_item(
        self,
        w: Work,
        n: Node,
        item_id: str,
        payload: str | None,
        size: int,
        publisher: str,
        headers: Mapping[str, str],
    ) -> None:
        """Store (or replace) an item, then notify (ordinary node) or dispatch (queue)."""
        cfg = n.config
        if cfg.persist_items or cfg.queue:
            existing = await w.tx.items.get(n.node_id, item_id)
            if existing is not None:
                # Re-publishing an id replaces the payload; a queued item keeps its
                # place and its lock, so re-running a bulk load never doubles work.
                await w.tx.items.replace_payload(
                    n.node_id, item_id, payload, size, publisher, w.now
                )
            else:
                if cfg.queue and cfg.max_items is not None:
                    if await w.tx.items.count(n.node_id) >= cfg.max_items:
                        raise NodeFull(f"queue {n.node_id} holds pubsub#max_items items")
                stored = await w.tx.items.put(
                    Item(
                        node=n.node_id,
                        item_id=item_id,
                        seq=0,
                        publisher=publisher,
                        payload=payload,
                        published_at=w.now,
                        updated_at=w.now,
                        payload_size=size,
                        headers=dict(headers),
                    )
                )
                if cfg.queue:
                    self._ledger(w, EventKind.PUBLISHED, stored)
                elif cfg.max_items is not None:
                    overflow = await w.tx.items.count(n.node_id) - cfg.max_items
                    if overflow > 0:
                        for old in await w.tx.items.oldest_ids(n.node_id, overflow):
                            await w.tx.items.remove(n.node_id, old)
        if cfg.queue:
            await self.queue.dispatch(w, n)
            return
        notice_item = NoticeItem(
            item_id, payload if cfg.deliver_payloads else None, publisher, dict(headers)
        )
        for jid, subids in (await self._delivery_targets(w, n.node_id)).items():
            w.effects.append(ItemNotice(jid, n.node_id, (notice_item,), subids))

    async def _delivery_targets(self, w: Work, node_id: str) -> dict[str, tuple[str, ...]]:
        """Subscribed, delivering subscriptions grouped by JID (one message per JID)."""
        targets: dict[str, list[str]] = {}
        for s in await w.tx.subscriptions.for_node(node_id):
            if s.state is SubscriptionState.SUBSCRIBED and _options_of(s).deliver:
                targets.setdefault(s.jid, []).append(s.subid)
        return {jid: tuple(subids) for jid, subids in targets.items()}

    def _ledger(self, w: Work, kind: EventKind, item: Item, subscriber: str | None = None) -> None:
        w.tx.ledger.append(
            LedgerEvent(
                w.now, kind, item.node, item.item_id, subscriber, item.deliveries, item.payload_size
            )
        )

    async def retract(
        self, actor: Actor, node: str, item_id: str, notify: bool | None = None
    ) -> Outcome[None]:
        """§7.2; on a queue node from the lock holder: the ack (XEP-0254 §2.3)."""
        check_id(item_id, "item id")

        async def op(w: Work) -> None:
            n = await load_node(w.tx, node)
            aff = await self._affiliation(w, node, actor)
            item = await w.tx.items.get(node, item_id)
            if n.config.queue:
                await self._queue_retract(w, n, aff, item, item_id, actor)
                return
            if aff is Affiliation.OUTCAST:
                require(aff, Action.RETRACT_ANY)
            own = item is not None and bare(item.publisher) == actor.bare
            if not (may(aff, Action.RETRACT_ANY) or (own and may(aff, Action.RETRACT_OWN))):
                raise Forbidden("retract")
            if item is None or not await w.tx.items.remove(node, item_id):
                raise ItemNotFound(node, item_id)
            if notify if notify is not None else n.config.notify_retract:
                for jid, subids in (await self._delivery_targets(w, node)).items():
                    w.effects.append(RetractNotice(jid, node, (item_id,), subids))

        return await self._run(op)

    async def _queue_retract(
        self, w: Work, n: Node, aff: Affiliation, item: Item | None, item_id: str, actor: Actor
    ) -> None:
        subs = own_subscriptions(await w.tx.subscriptions.for_node(n.node_id), actor)
        privileged = may(aff, Action.RETRACT_ANY)
        how = check_release(n.node_id, item_id, item, actor.jid, bool(subs), privileged, "retract")
        assert item is not None
        holder = item.lock_jid if item.locked_by else None
        if not await w.tx.items.remove(n.node_id, item_id):
            raise ItemNotFound(n.node_id, item_id)
        kind = EventKind.ACKED if how is Release.HOLDER else EventKind.RETRACTED
        self._ledger(w, kind, item, holder)
        if holder:
            # XEP-0254 §2.3: only the holder hears of it (also when a publisher
            # removed an item someone was working on).
            subids = (item.locked_by,) if item.locked_by else ()
            w.effects.append(RetractNotice(holder, n.node_id, (item_id,), subids, queue=True))
        w.deadlines_changed = w.deadlines_changed or holder is not None
        await self.queue.dispatch(w, n)

    # --- subscriber (§6) ---------------------------------------------------------------
    async def subscribe(
        self, actor: Actor, node: str, jid: str, options: FormValues | None = None
    ) -> Outcome[Subscription]:
        async def op(w: Work) -> Subscription:
            n = await load_node(w.tx, node)
            if bare(jid) != actor.bare and not self._is_admin(actor):
                raise InvalidJid()
            aff = await self._affiliation(w, node, actor)
            mine = await w.tx.subscriptions.for_jid(jid, node)
            check_access(n, aff, Action.SUBSCRIBE, mine)
            current = _options_of(mine[0]) if mine else None
            opts = parse_subscribe_options(options or {}, current)
            if n.config.queue and opts.queue_requests is None:
                raise QueueConfigurationRequired(node, jid, (QUEUE_REQUESTS,))
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
                    self.new_id(),
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
                if n.config.queue:
                    await self.queue.dispatch(w, n)
                elif n.config.send_last_published_item is not SendLastPublished.NEVER:
                    last = await w.tx.items.latest(node, 1)
                    if last:
                        payload = last[0].payload if n.config.deliver_payloads else None
                        w.effects.append(
                            ItemNotice(
                                jid,
                                node,
                                (NoticeItem(last[0].item_id, payload, last[0].publisher),),
                                (sub.subid,),
                            )
                        )
            return sub

        return await self._run(op)

    async def _find_subscription(
        self, w: Work, node: str, jid: str, subid: str | None, actor: Actor, modify: bool
    ) -> Subscription:
        """§6.2.3 / §6.3.4 error flows: another's JID, not subscribed, subid."""
        if bare(jid) != actor.bare and not self._is_admin(actor):
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
    ) -> Outcome[None]:
        async def op(w: Work) -> None:
            n = await load_node(w.tx, node)
            sub = await self._find_subscription(w, node, jid, subid, actor, modify=False)
            await w.tx.subscriptions.remove(node, sub.subid)
            # Locks outlive the subscription (XEP-0254 §4: unsubscribe, then release);
            # they end by ack, unlock or timeout. Others may now get more work.
            if n.config.queue:
                await self.queue.dispatch(w, n)

        return await self._run(op)

    async def get_subscription_options(
        self, actor: Actor, node: str, jid: str, subid: str | None = None
    ) -> tuple[Subscription, SubscribeOptions]:
        async def op(w: Work) -> tuple[Subscription, SubscribeOptions]:
            await load_node(w.tx, node)
            sub = await self._find_subscription(w, node, jid, subid, actor, modify=True)
            return sub, _options_of(sub)

        return await self._read(op)

    async def set_subscription_options(
        self, actor: Actor, node: str, jid: str, subid: str | None, values: FormValues
    ) -> Outcome[Subscription]:
        """§6.3.5; a changed queue_requests takes effect at once (more may be dispatched)."""

        async def op(w: Work) -> Subscription:
            n = await load_node(w.tx, node)
            sub = await self._find_subscription(w, node, jid, subid, actor, modify=True)
            opts = parse_subscribe_options(values, _options_of(sub))
            if n.config.queue and opts.queue_requests is None:
                raise QueueConfigurationRequired(node, jid, (QUEUE_REQUESTS,))
            updated = dataclasses.replace(
                sub, queue_requests=opts.queue_requests, options=dict(opts.raw), last_activity=w.now
            )
            await w.tx.subscriptions.update(updated)
            if n.config.queue:
                await self.queue.dispatch(w, n)
            return updated

        return await self._run(op)

    def default_subscribe_options(self, queue: bool) -> SubscribeOptions:
        return SubscribeOptions(queue_requests=1 if queue else None, deliver=True, raw={})

    # --- queue (XEP-0254) ----------------------------------------------------------------
    async def _holder_item(
        self, w: Work, actor: Actor, node: str, item_id: str, action: str
    ) -> tuple[Node, Item]:
        n = await load_node(w.tx, node)
        if not n.config.queue:
            raise NotAQueue(node)
        aff = await self._affiliation(w, node, actor)
        subs = own_subscriptions(await w.tx.subscriptions.for_node(node), actor)
        item = await w.tx.items.get(node, item_id)
        check_release(
            node, item_id, item, actor.jid, bool(subs), may(aff, Action.RETRACT_ANY), action
        )
        assert item is not None
        return n, item

    async def unlock(self, actor: Actor, node: str, item_id: str) -> Outcome[None]:
        """§2.4 nack: the holder gives the item back; it goes to the next subscriber."""
        check_id(item_id, "item id")

        async def op(w: Work) -> None:
            n, item = await self._holder_item(w, actor, node, item_id, "unlock")
            await self.queue.requeue(w, n, item, EventKind.UNLOCKED, "unlocked")
            await self.queue.dispatch(w, n)

        return await self._run(op)

    async def extend_lock(
        self, actor: Actor, node: str, item_id: str, seconds: int | None = None
    ) -> Outcome[datetime]:
        """Push the holder's deadline to now + seconds (default: the node's lock
        timeout). Same error flow as unlock. Returns the new deadline."""
        check_id(item_id, "item id")
        if seconds is not None and not 1 <= seconds <= 86400 * 7:
            raise BadRequest("seconds must be between 1 and 604800")

        async def op(w: Work) -> datetime:
            n, item = await self._holder_item(w, actor, node, item_id, "extend")
            deadline = lock_deadline(n.config, w.now, seconds)
            if not await w.tx.items.extend(node, item_id, item.locked_by or "", deadline):
                raise ItemNotFound(node, item_id)
            self._ledger(w, EventKind.EXTENDED, item, item.lock_jid)
            w.deadlines_changed = True
            return deadline

        return await self._run(op)

    async def unlock_later(
        self, actor: Actor, node: str, item_id: str, delay: int
    ) -> Outcome[None]:
        """Our delayed nack (``core/queue/verdicts.py``); unlock's error flow."""
        check_id(item_id, "item id")
        if not 0 <= delay <= verdicts.MAX_DELAY:
            raise BadRequest(f"delay must be between 0 and {verdicts.MAX_DELAY}")

        async def op(w: Work) -> None:
            n, item = await self._holder_item(w, actor, node, item_id, "unlock")
            if not await verdicts.unlock_later(w, n, item, delay, self._publish_internal):
                raise ItemNotFound(node, item_id)
            await self.queue.dispatch(w, n)

        return await self._run(op)

    async def dead_letter_now(
        self, actor: Actor, node: str, item_id: str, reason: str
    ) -> Outcome[None]:
        """Our dead-letter-now from the holder (``core/queue/verdicts.py``)."""
        check_id(item_id, "item id")

        async def op(w: Work) -> None:
            n, item = await self._holder_item(w, actor, node, item_id, "unlock")
            if not await verdicts.dead_letter_now(w, n, item, reason, self._publish_internal):
                raise ItemNotFound(node, item_id)
            await self.queue.dispatch(w, n)

        return await self._run(op)

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
                await w.tx.subscriptions.remove(sub.node, sub.subid)
                if n.config.queue:
                    released += await self.queue.release_subscription(w, n, sub, reason, False)
                    await self.queue.dispatch(w, n)
                log.info(
                    "event=subscriber_released node=%s jid=%s reason=%s items=%d",
                    sub.node,
                    jid,
                    reason,
                    released,
                )
            return released

        return await self._run(op)

    async def tick(self) -> Outcome[int]:
        """Expire due locks (unlock notice, redispatch or dead-letter) and dispatch
        items whose retry delay has passed. Returns how many locks expired."""

        async def op(w: Work) -> int:
            expired = await self.queue.expire_due(w, w.tx.nodes.get)
            for n in await w.tx.nodes.all():
                if n.config.queue:
                    await self.queue.dispatch(w, n)
            w.deadlines_changed = True
            return expired

        return await self._run(op)

    async def next_deadline(self) -> datetime | None:
        async def op(w: Work) -> datetime | None:
            return await w.tx.items.next_deadline(w.now)

        return await self._read(op)
