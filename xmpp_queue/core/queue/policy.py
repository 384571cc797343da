"""QueuePolicy: a XEP-0254 queue node, where each item goes to one subscriber at a time.

Publish stores the item and records it in the ledger; the hand-out happens when
the operation settles (:meth:`QueuePolicy.settle` dispatches), so every
operation that frees a slot or adds work gets its dispatch without asking.
Retract from the lock holder is the ack; from a publisher or owner it removes
the item and tells its holder (the error order of docs/queueing.md lives in ``locks``).
Unlock is the nack (optionally "not before N seconds", this project's
``<unlock delay>``), extend moves a deadline, dead-letter sends an item that can
never succeed to the dead-letter node at once (``<dead-letter reason>``), so a
poison item does not burn its remaining deliveries; all only for the holder.
Subscribing needs ``pubsub#queue_requests`` (§2.1). ``pubsub#max_items`` is a
hard limit here: a publish past it is refused (nothing is ever dropped).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from xmpp_queue.core.access import own_subscriptions_on
from xmpp_queue.core.attributes import republished, schedule, scheduled_item
from xmpp_queue.core.audience import delete_and_tell, subscriber_jids
from xmpp_queue.core.batcher import Work
from xmpp_queue.core.capabilities import Action, may
from xmpp_queue.core.context import ServiceContext
from xmpp_queue.core.effects import PurgeNotice, RetractNotice, UnlockNotice, headline
from xmpp_queue.core.errors import (
    BadRequest,
    InvalidNodeConfig,
    ItemNotFound,
    NodeFull,
    QueueConfigurationRequired,
)
from xmpp_queue.core.ledger import EventKind, record
from xmpp_queue.core.model import (
    Actor,
    Affiliation,
    Item,
    NewItem,
    Node,
    NodeConfig,
    Subscription,
    SubscriptionState,
    bare,
    new_item,
)
from xmpp_queue.core.queue.deadlines import dead_letter_node, lock_deadline
from xmpp_queue.core.queue.engine import QueueEngine
from xmpp_queue.core.queue.failures import MAX_REASON
from xmpp_queue.core.queue.locks import Release, check_release
from xmpp_queue.core.queue.overflow import make_room
from xmpp_queue.core.replay import Replay
from xmpp_queue.core.subscribe_options import QUEUE_REQUESTS, SubscribeOptions

Arrived = Callable[[Work, Node, Item], Awaitable[None]]
LoadNode = Callable[[str], Awaitable[Node | None]]  # the timers load each due node


class QueuePolicy:
    def __init__(self, ctx: ServiceContext, arrived: Arrived) -> None:
        self._ctx = ctx
        self._engine = QueueEngine(ctx, arrived)

    # --- guards ------------------------------------------------------------------------

    def validate(self, node_id: str, config: NodeConfig) -> None:
        if not config.persist_items:
            raise InvalidNodeConfig("pubsub#persist_items", "a queue node must persist items")
        if dead_letter_node(node_id, config) == node_id:
            raise InvalidNodeConfig("pubsub#queue_dead_letter", "must name another node")

    async def may_leave(self, work: Work, node: Node, config: NodeConfig) -> None:
        if await work.tx.items.in_flight(node.node_id):
            raise InvalidNodeConfig("pubsub#queue", "items are locked; purge or wait")

    def check_options(self, node: Node, jid: str, options: SubscribeOptions) -> None:
        if options.queue_requests is None:
            raise QueueConfigurationRequired(node.node_id, jid, (QUEUE_REQUESTS,))

    def check_owner_subscription(self, node: Node, jid: str, state: SubscriptionState) -> None:
        if state is SubscriptionState.SUBSCRIBED:
            raise BadRequest(
                f"{jid}: queue subscriptions need queue_requests; the worker subscribes itself"
            )

    def check_room(self, node: Node, count: int, size: int) -> None:
        if node.config.max_items is not None and count >= node.config.max_items:
            raise NodeFull(f"queue {node.node_id} holds pubsub#max_items items")
        if node.config.max_bytes is not None and size > node.config.max_bytes:
            raise NodeFull(f"queue {node.node_id} would pass pubsub#max_bytes")

    # --- items -------------------------------------------------------------------------

    async def publish(
        self,
        work: Work,
        node: Node,
        item_id: str,
        item: NewItem,
        publisher: str,
        source: str | None = None,
    ) -> None:
        """Store the item with its schedule (priority, start, expiry), or, for an id
        inside the dedup window, store nothing and say so in the ledger. A copy from
        a topic (*source*) names it as its ``published`` row's reason."""
        cfg, items = node.config, work.tx.items
        plan = schedule(item.attributes, cfg, work.now)
        existing = await items.get(node.node_id, item_id)
        if cfg.queue_dedup_window > 0 and (
            existing is not None
            or await items.finished_since(
                node.node_id, item_id, work.now - timedelta(seconds=cfg.queue_dedup_window)
            )
        ):
            # The item id is the idempotency key: a repeat inside the window (a
            # publisher's retry after a lost answer) is a success that adds nothing.
            duplicate = existing or new_item(
                node.node_id, item_id, publisher, None, item.size, {}, work.now
            )
            record(work.tx.ledger, work.now, EventKind.DEDUPLICATED, duplicate)
            return
        if existing is not None:
            # Re-publishing an id replaces the payload; a queued item keeps its
            # place and its lock, so re-running a bulk load never doubles work.
            # A larger payload must still fit max_bytes (nothing is dropped for it).
            if cfg.max_bytes is not None and item.size > existing.payload_size:
                held = await items.payload_bytes(node.node_id)
                if held - existing.payload_size + item.size > cfg.max_bytes:
                    raise NodeFull(f"queue {node.node_id} would pass pubsub#max_bytes")
            await items.replace_payload(
                node.node_id,
                item_id,
                item.payload,
                item.size,
                publisher,
                work.now,
                republished(existing, item.attributes),
                plan.priority,
                plan.expires_at,
            )
            return
        await make_room(work, node, item.size)
        stored = await items.put(
            scheduled_item(node.node_id, item_id, publisher, item, plan, work.now)
        )
        record(work.tx.ledger, work.now, EventKind.PUBLISHED, stored, reason=source)
        if plan.available_at is not None:
            work.deadlines_changed = True

    async def arrived(self, work: Work, node: Node, item: Item) -> None:
        record(work.tx.ledger, work.now, EventKind.PUBLISHED, item)

    async def retract(
        self,
        work: Work,
        node: Node,
        affiliation: Affiliation,
        item: Item | None,
        item_id: str,
        actor: Actor,
        notify: bool | None,
    ) -> None:
        subs = await own_subscriptions_on(work.tx, node.node_id, actor)
        # XEP-0060 §4.1: publishers and owners retract any item, a publish-only
        # entity its own (withdrawing a job it sent; a holder is told).
        own = item is not None and bare(item.publisher) == actor.bare
        privileged = may(affiliation, Action.RETRACT_ANY) or (
            own and may(affiliation, Action.RETRACT_OWN)
        )
        how = check_release(
            node.node_id, item_id, item, actor.jid, bool(subs), privileged, "retract"
        )
        assert item is not None
        holder = item.lock_jid if item.locked_by else None
        if how is Release.HOLDER:  # the ack: kept when the queue retains acked items
            gone = await Replay.ack(work, node, item_id)
        else:
            gone = await work.tx.items.remove(node.node_id, item_id)
        if not gone:
            raise ItemNotFound(node.node_id, item_id)
        kind = EventKind.ACKED if how is Release.HOLDER else EventKind.RETRACTED
        record(work.tx.ledger, work.now, kind, item, holder)
        if holder:
            # XEP-0254 §2.3: only the holder hears of it (also when a publisher
            # removed an item someone was working on).
            subids = (item.locked_by,) if item.locked_by else ()
            work.effects.append(
                RetractNotice(
                    holder, node.node_id, (item_id,), subids, headline=headline(node.config)
                )
            )
            work.deadlines_changed = True

    async def _tell_holders(self, work: Work, node: Node, reason: str) -> None:
        """Purge/delete: every lock holder hears that its item is gone."""
        for item in await work.tx.items.locked(node.node_id):
            if item.lock_jid:
                work.effects.append(
                    UnlockNotice(
                        item.lock_jid, node.node_id, item.item_id, reason, headline(node.config)
                    )
                )

    async def purge(self, work: Work, node: Node) -> int:
        await self._tell_holders(work, node, "purged")
        removed = await work.tx.items.remove_all(node.node_id)
        for item in removed:
            record(work.tx.ledger, work.now, EventKind.PURGED, item)
        work.effects.extend(
            PurgeNotice(j, node.node_id, headline=headline(node.config))
            for j in await subscriber_jids(work.tx, node.node_id)
        )
        work.deadlines_changed = True
        return len(removed)

    async def delete(self, work: Work, node: Node, redirect: str | None) -> None:
        await self._tell_holders(work, node, "deleted")
        for item in await work.tx.items.remove_all(node.node_id):
            record(work.tx.ledger, work.now, EventKind.PURGED, item)
        await delete_and_tell(work, node, redirect)
        self._engine.forget_node(node.node_id)

    # --- subscribers -------------------------------------------------------------------

    async def subscribed(self, work: Work, node: Node, sub: Subscription) -> None:
        return None  # the settle at the operation's end hands it work

    async def _held(self, work: Work, node: Node, actor: Actor, item_id: str, action: str) -> Item:
        """The item the actor holds, or the error of the documented order."""
        aff = await self._ctx.affiliation(work, node.node_id, actor)
        subs = await own_subscriptions_on(work.tx, node.node_id, actor)
        item = await work.tx.items.get(node.node_id, item_id)
        check_release(
            node.node_id,
            item_id,
            item,
            actor.jid,
            bool(subs),
            may(aff, Action.RETRACT_ANY),
            action,
        )
        assert item is not None
        return item

    async def unlock(
        self, work: Work, node: Node, actor: Actor, item_id: str, delay: int = 0, reason: str = ""
    ) -> None:
        """§2.4 nack: the holder gives the item back; it goes to the next subscriber
        (not before *delay* seconds, when the holder asks for a delay). A *reason*
        (why the handler failed) is kept with the item (``last-error``)."""
        item = await self._held(work, node, actor, item_id, "unlock")
        not_before = work.now + timedelta(seconds=delay) if delay > 0 else None
        await self._engine.requeue(
            work,
            node,
            item,
            EventKind.UNLOCKED,
            "unlocked",
            not_before=not_before,
            error=reason or None,
        )

    async def dead_letter(
        self, work: Work, node: Node, actor: Actor, item_id: str, reason: str
    ) -> None:
        """The holder says the item can never succeed: to the dead-letter node now
        (no unlock notice: the holder asked for it)."""
        item = await self._held(work, node, actor, item_id, "unlock")
        await self._engine.dead_letter(work, node, item, reason[:MAX_REASON] or "rejected")
        work.deadlines_changed = True

    async def extend(
        self, work: Work, node: Node, actor: Actor, item_id: str, seconds: int | None
    ) -> datetime:
        item = await self._held(work, node, actor, item_id, "extend")
        deadline = lock_deadline(node.config, work.now, seconds)
        if not await work.tx.items.extend(node.node_id, item_id, item.locked_by or "", deadline):
            raise ItemNotFound(node.node_id, item_id)
        record(work.tx.ledger, work.now, EventKind.EXTENDED, item, item.lock_jid)
        work.deadlines_changed = True
        return deadline

    async def release(
        self, work: Work, node: Node, sub: Subscription, reason: str, notify: bool
    ) -> int:
        return await self._engine.release_subscription(work, node, sub, reason, notify)

    async def resend_held(self, work: Work, node: Node) -> int:
        return await self._engine.resend_held(work, node)

    async def force_unlock(self, work: Work, node: Node, item: Item) -> bool:
        """An admin takes the lock back: the holder is told, the item goes on."""
        return await self._engine.requeue(work, node, item, EventKind.UNLOCKED, "admin")

    # --- timers ------------------------------------------------------------------------

    async def expire_due(self, work: Work, load_node: LoadNode) -> int:
        """XEP-0254 §4: locks past their deadline go back (unlock notice to the holder)."""
        return await self._engine.expire_due(work, load_node)

    async def expire_waiting_due(self, work: Work, load_node: LoadNode) -> int:
        """Waiting items past their expiry: dead-lettered or dropped as their node says
        (an ordinary node's expired items are dropped here too: one expiry index)."""
        return await self._engine.expire_waiting_due(work, load_node)

    async def settle(self, work: Work, node: Node) -> None:
        await self._engine.dispatch(work, node)
