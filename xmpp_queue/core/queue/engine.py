"""QueueEngine: the XEP-0254 state changes, inside one service operation.

The queue policy calls these with the operation's :class:`Work` (its
transaction, its clock reading, its effects list). Decisions come from the pure
rules (``dispatch``, ``locks``, ``deadlines``); this module loads the snapshot
through the ports, writes with conditional updates, appends ledger rows in the
same transaction, and records the notifications to send after commit. An item
past its delivery limit moves to the dead-letter node in one store operation
(``items.move``), so it is always in exactly one place.

In-memory state here is only a hint that may be lost on restart: the previous
holder of a returned item (the round-robin order lives in the store's RoomIndex,
as a hint too).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING

from xmpp_queue.core.batcher import Work
from xmpp_queue.core.effects import ItemNotice, NoticeItem, UnlockNotice, headline
from xmpp_queue.core.ledger import REASON_EXPIRED, EventKind, LedgerEvent, record
from xmpp_queue.core.model import Affiliation, Item, Node, Subscription, copy_item
from xmpp_queue.core.queue.batch_wait import batch_after_wait
from xmpp_queue.core.queue.deadlines import (
    dead_letter_node,
    lock_deadline,
    must_dead_letter,
    retry_available_at,
)
from xmpp_queue.core.queue.failures import HOLDER_GONE, LAST_ERROR, LOCK_TIMEOUT, with_failure
from xmpp_queue.core.queue.notices import NoticeBatches
from xmpp_queue.core.queue.single_active import active_subscription, takes_work
from xmpp_queue.core.subscribe_options import batch_wait_of

if TYPE_CHECKING:
    from xmpp_queue.core.context import ServiceContext

log = logging.getLogger("xmpp_queue.queue")

# An item moved into a node: the node's type records and announces it.
Arrived = Callable[[Work, Node, Item], Awaitable[None]]

EXPIRY_BATCH = 500
DELIVERY_RESENT = "delivery-resent"
"""Marks an item notice sent again for a lock already announced (see ``resend_held``)."""


def key_of(item: Item) -> tuple[str, str]:
    return item.node, item.item_id


class QueueEngine:
    def __init__(self, ctx: ServiceContext, arrived: Arrived) -> None:
        self._ctx = ctx
        self._arrived = arrived
        self._previous_holder: dict[tuple[str, str], str] = {}

    def forget_node(self, node_id: str) -> None:
        for key in [k for k in self._previous_holder if k[0] == node_id]:
            del self._previous_holder[key]

    async def dispatch(self, work: Work, node: Node) -> int:
        """Hand ready items to subscribers with room, FIFO. Returns how many went out.

        Each item is chosen for its subscriber on its own (the store's RoomIndex:
        fewest in flight, round robin, not the previous holder while another has
        room), then a subscriber's items of this dispatch go out together, up to
        its ``pubsub#queue_max_batch`` per notification (default 1: one item per
        message, as XEP-0254 shows). Every item is locked, counted and ledgered on
        its own; only the message is shared. Costs O(log n) per item handed out,
        and O(1) when nobody has room or nothing is ready: this runs at the end of
        every operation on a queue.
        """
        tx, node_id = work.tx, node.node_id
        first = await tx.subscriptions.next_with_room(node_id)
        if first is None:
            return 0
        only, room = await self._single_active(work, node)
        if only is False:
            return 0
        next_in_turn = only if isinstance(only, Subscription) else first
        fill, waited = 0, None  # items that go to next_in_turn together, its wait over
        if wait_ms := batch_wait_of(next_in_turn.options):
            waited = await batch_after_wait(
                work, node, next_in_turn, wait_ms, room if only is not None else None
            )
            if waited is None:
                return 0  # a batch worker's short batch waits a little (queue_batch_wait)
            fill = len(waited)
        batches = NoticeBatches(node_id, headline(node.config))
        sent, chunk = 0, 8
        while True:
            if waited:  # the batch waited for is the first chunk: read once, not twice
                ready, chunk, waited = waited, len(waited), None
            else:
                ready = await tx.items.next_ready(node_id, work.now, chunk)
            locked = 0
            behind_key = False
            for item in ready:
                if item.expires_at is not None and item.expires_at <= work.now:
                    await self.expire_waiting(work, node, item)  # never handed out late
                    locked += 1  # progress: it left the ready items
                    if item.ordering_key is not None and node.config.queue_ordered:
                        # Its key's next member is ready now, and may come before the
                        # rest of this list: read the ready items again.
                        behind_key = True
                        break
                    continue
                key = (node_id, item.item_id)
                avoid = self._previous_holder.get(key)
                sub: Subscription | None
                if fill > 0 and avoid != next_in_turn.subid:
                    sub = next_in_turn  # the batch it waited for, not spread over others
                elif isinstance(only, Subscription):
                    sub = only if room > 0 else None
                else:
                    sub = await tx.subscriptions.next_with_room(node_id, avoid)
                if sub is None:
                    batches.flush(work.effects)
                    return sent
                expires = lock_deadline(node.config, work.now)
                if not await tx.items.lock(
                    node_id, item.item_id, sub.subid, sub.jid, work.now, expires
                ):
                    continue
                locked += 1
                room -= 1
                if sub is next_in_turn:
                    fill -= 1
                self._previous_holder.pop(key, None)
                self._delivered(work, node, item, sub, batches)
                sent += 1
            if behind_key:
                continue
            if len(ready) < chunk or not locked:
                break
            chunk = min(chunk * 4, 512)
        batches.flush(work.effects)
        return sent

    async def _single_active(
        self, work: Work, node: Node
    ) -> tuple[Subscription | bool | None, int]:
        """On a single-active queue: (the active subscription, its room), or (False, 0)
        when it has none; elsewhere (None, 0) and dispatch asks the room index.
        Lists the node's subscriptions: a failover queue has a few standbys."""
        if not node.config.queue_single_active:
            return None, 0
        subs = await work.tx.subscriptions.for_node(node.node_id)
        loads = await work.tx.items.in_flight(node.node_id)
        active = active_subscription(subs, loads)
        if active is None or not takes_work(active):
            return False, 0
        room = (active.queue_requests or 0) - loads.get(active.subid, 0)
        return (active, room) if room > 0 else (False, 0)

    def _delivered(
        self, work: Work, node: Node, item: Item, sub: Subscription, batches: NoticeBatches
    ) -> None:
        """Ledger row and notice of one item just locked to *sub*."""
        deliveries = item.deliveries + 1
        work.tx.ledger.append(
            LedgerEvent(
                work.now,
                EventKind.DELIVERED,
                node.node_id,
                item.item_id,
                sub.jid,
                deliveries,
                item.payload_size,
            )
        )
        notice_item = NoticeItem(
            item.item_id,
            item.payload,
            self._ctx.shown_publisher(node, item.publisher),
            {**item.headers, "delivery-attempt": str(deliveries)},
            item.published_at,
        )
        batches.add(work.effects, sub, notice_item)
        work.deadlines_changed = True

    async def resend_held(self, work: Work, node: Node) -> int:
        """Each item locked on *node* is announced to its holder again: same lock, same
        attempt, marked ``delivery-resent``. Why: the notice of a lock committed just
        before a crash (or before the stream to the server dropped) may never have
        left, and its holder would wait for the lock timeout with a window it thinks
        has room. A holder that already has the item knows it by the mark and the
        attempt. Changes nothing: no ledger row, no new deadline."""
        resent = 0
        for item in await work.tx.items.locked(node.node_id):
            if item.lock_jid is None or item.locked_by is None:
                continue
            headers = {
                **item.headers,
                "delivery-attempt": str(item.deliveries),
                DELIVERY_RESENT: "1",
            }
            shown = self._ctx.shown_publisher(node, item.publisher)
            work.effects.append(
                ItemNotice(
                    item.lock_jid,
                    node.node_id,
                    (NoticeItem(item.item_id, item.payload, shown, headers),),
                    (item.locked_by,),
                    headline(node.config),
                )
            )
            resent += 1
        return resent

    async def expire_waiting(self, work: Work, node: Node, item: Item) -> None:
        """A waiting item past its expiry: to the dead-letter node with reason
        ``expired`` (the default), or dropped with a ledger row when the node's
        ``pubsub#queue_expire_action`` says ``drop``. Never delivered."""
        if node.config.queue_expire_action == "drop":
            if await work.tx.items.remove(node.node_id, item.item_id):
                record(work.tx.ledger, work.now, EventKind.DROPPED, item, reason=REASON_EXPIRED)
                self._previous_holder.pop((node.node_id, item.item_id), None)
                log.info("event=item_expired node=%s item=%s action=drop", *key_of(item))
            return
        await self.dead_letter(work, node, item, reason=REASON_EXPIRED)

    async def requeue(
        self,
        work: Work,
        node: Node,
        item: Item,
        kind: EventKind,
        reason: str,
        notify_holder: bool = True,
        not_before: datetime | None = None,
        at_once: bool = False,
        error: str | None = None,
    ) -> bool:
        """A lock ended without an ack: offer the item again, or dead-letter it.

        *item* is the snapshot taken while it was still locked. The unlock is
        conditional on the same holder, so a concurrent ack wins cleanly. The item
        is offered again after the node's retry back-off, or at *not_before* if that
        is later (a worker's delayed unlock); *at_once* skips the back-off (a
        single-active queue's hand-over keeps the items in their order). *error*
        (why the delivery failed: the holder's nack reason, a lock timeout) is kept
        in the item's headers (:mod:`.failures`) and its ledger row.
        """
        holder_sub, holder_jid = item.locked_by, item.lock_jid
        if holder_sub is None:
            return False
        dead = must_dead_letter(node.config, item.deliveries)
        available_at = (
            None if dead or at_once else retry_available_at(node.config, item.deliveries, work.now)
        )
        if not dead and not_before is not None and not_before > work.now:
            available_at = max(available_at, not_before) if available_at else not_before
        headers = None
        if error:
            headers = with_failure(item.headers, error, item.deliveries, holder_jid, work.now)
        if not await work.tx.items.unlock(
            node.node_id, item.item_id, holder_sub, available_at, headers
        ):
            return False
        failure = None
        if headers is not None:
            item = copy_item(item, headers=headers)
            failure = headers[LAST_ERROR]  # the reason as kept: cleaned and bounded
        record(work.tx.ledger, work.now, kind, item, holder_jid, reason=failure)
        if notify_holder and holder_jid:
            work.effects.append(
                UnlockNotice(holder_jid, node.node_id, item.item_id, reason, headline(node.config))
            )
        self._previous_holder[(node.node_id, item.item_id)] = holder_sub
        work.deadlines_changed = True
        if dead:
            await self.dead_letter(work, node, item)
        return True

    async def dead_letter(
        self, work: Work, node: Node, item: Item, reason: str = "max-deliveries"
    ) -> None:
        """Move an item to the dead-letter node (past its delivery limit, or because
        its holder said it can never succeed): never drop it."""
        target = await self._dead_letter_target(work, node)
        record(
            work.tx.ledger, work.now, EventKind.DEAD_LETTERED, item, item.lock_jid, reason=reason
        )
        self._previous_holder.pop((node.node_id, item.item_id), None)
        headers = dict(item.headers)
        headers.update(
            {
                "origin-node": node.node_id,
                "origin-item": item.item_id,
                "deliveries": str(item.deliveries),
                "reason": reason,
                "dead-lettered-at": work.now.isoformat(),
            }
        )
        moved = await work.tx.items.move(
            node.node_id, item.item_id, target.node_id, item.item_id, headers, work.now
        )
        log.info(
            "event=dead_lettered node=%s item=%s deliveries=%d target=%s reason=%r last_error=%r",
            node.node_id,
            item.item_id,
            item.deliveries,
            target.node_id,
            reason,
            item.headers.get(LAST_ERROR, ""),
        )
        await self._arrived(work, target, moved)

    async def _dead_letter_target(self, work: Work, origin: Node) -> Node:
        """The origin's dead-letter node, created on first use with the origin's owners."""
        node_id = dead_letter_node(origin.node_id, origin.config)
        target = await work.tx.nodes.get(node_id)
        if target is not None:
            return target
        # The dead letters are the queue's work: as private as the queue itself.
        config = dataclasses.replace(
            self._ctx.settings.default_config,
            queue=False,
            max_items=None,
            title=f"Dead letters of {origin.node_id}",
            access_model=origin.config.access_model,
            itemreply=origin.config.itemreply,
        )
        # Made for the queue's creator: it counts in their max_nodes_per_jid (reserved
        # when the queue was created or renamed its dead-letter node, so never refused).
        target = Node(node_id, config, work.now, origin.creator)
        await work.tx.nodes.add(target)
        for entry in await work.tx.affiliations.for_node(origin.node_id):
            if entry.affiliation is Affiliation.OWNER:
                await work.tx.affiliations.set(node_id, entry.jid, Affiliation.OWNER)
        log.info("event=node_created node=%s reason=dead_letter origin=%s", node_id, origin.node_id)
        return target

    async def release_subscription(
        self, work: Work, node: Node, sub: Subscription, reason: str, notify: bool
    ) -> int:
        """Unlock everything a subscription holds (departure, kick, admin). On a
        single-active queue the items are ready again at once, for the next
        subscriber to take over in order."""
        released = 0
        at_once = node.config.queue_single_active
        for item in await work.tx.items.locked_by(node.node_id, sub.subid):
            error = f"{HOLDER_GONE} ({reason})"
            if await self.requeue(
                work, node, item, EventKind.UNLOCKED, reason, notify, at_once=at_once, error=error
            ):
                released += 1
        return released

    async def expire_waiting_due(
        self, work: Work, load_node: Callable[[str], Awaitable[Node | None]]
    ) -> int:
        """Waiting items whose expiry came (from the store's expiry index, never a
        scan): each is dead-lettered or dropped as its node says."""
        count = 0
        for item in await work.tx.items.expired_waiting(work.now, EXPIRY_BATCH):
            node = await load_node(item.node)
            if node is None:
                continue
            if not node.config.queue:
                # XEP-0060 pubsub#item_expire on a broadcast node: the item is purged.
                await work.tx.items.remove(node.node_id, item.item_id)
                count += 1
                continue
            await self.expire_waiting(work, node, item)
            work.touched[node.node_id] = None
            count += 1
        return count

    async def expire_due(
        self, work: Work, load_node: Callable[[str], Awaitable[Node | None]]
    ) -> int:
        """XEP-0254 §4: a lock past its deadline goes back (unlock notice to the holder)."""
        touched: dict[str, Node] = {}
        expired = 0
        for item in await work.tx.items.expired_locks(work.now, EXPIRY_BATCH):
            node = touched.get(item.node) or await load_node(item.node)
            if node is None:
                continue
            if await self.requeue(
                work, node, item, EventKind.EXPIRED, "timeout", error=LOCK_TIMEOUT
            ):
                expired += 1
                log.info(
                    "event=lock_expired node=%s item=%s holder=%s deliveries=%d",
                    node.node_id,
                    item.item_id,
                    item.lock_jid,
                    item.deliveries,
                )
            touched[node.node_id] = node
            work.touched[node.node_id] = None  # settled (dispatched) at the end
        return expired
