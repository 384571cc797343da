"""Admin operations of the service: views of the queues and the levers to fix them.

They are operations like the others (run in their own savepoint, writes
through the same queue engine, ledger rows, effects, the touched nodes settled
at the end), so a forced unlock tells the holder and a redrive dispatches
exactly as the protocol paths do. Admin commands (``xmpp_queue/admin``) are
thin forms over these, reached through :class:`PubSubService`.

Redrive moves each dead letter back with one store operation (``items.move``),
oldest first, and stops at the first one its queue has no room for: it either
moves at least one item and says how many, or it is refused (``NodeFull``) and
changes nothing. An item whose id is back in its queue already (published
again since) stays in the dead-letter node, so nothing is overwritten.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from xmpp_queue.core.batcher import Work
from xmpp_queue.core.context import ServiceContext
from xmpp_queue.core.effects import Outcome, SubscriptionNotice, headline
from xmpp_queue.core.errors import (
    BadRequest,
    Forbidden,
    ItemLockedByOther,
    ItemNotFound,
    NodeFull,
)
from xmpp_queue.core.ledger import EventKind, record
from xmpp_queue.core.model import Actor, Item, Node, SubscriptionState
from xmpp_queue.core.node_types import NodeType
from xmpp_queue.core.queue.deadlines import dead_letter_node
from xmpp_queue.core.queue.single_active import single_active_subid
from xmpp_queue.core.reports import (
    QueueDetails,
    QueueSummary,
    ServiceStatus,
    SubscriberLoad,
)

if TYPE_CHECKING:
    from xmpp_queue.core.node_types import NodeTypes

HOUR = timedelta(hours=1)
DEAD_LETTER_HEADERS = ("origin-node", "origin-item", "deliveries", "reason", "dead-lettered-at")
log = logging.getLogger("xmpp_queue.service")


class AdminLevers:
    def __init__(self, ctx: ServiceContext, types: NodeTypes) -> None:
        self._ctx = ctx
        self._types = types
        self._read = ctx.read
        self._run = ctx.run

    def _require_admin(self, actor: Actor) -> None:
        if not self._ctx.is_admin(actor):
            raise Forbidden("administer the service")

    async def _queue_node(self, w: Work, node: str) -> Node:
        n = await self._ctx.node(w, node)
        self._types.queue_of(n)  # NotAQueue for an ordinary node
        return n

    def _is_queue(self, node: Node) -> bool:
        return self._types.type_of(node) is NodeType.QUEUE

    async def queue_overview(self, actor: Actor) -> list[QueueSummary]:
        self._require_admin(actor)

        async def op(w: Work) -> list[QueueSummary]:
            nodes = {n.node_id: n for n in await w.tx.nodes.all()}
            rows = []
            since = w.now - HOUR
            for n in nodes.values():
                if not self._is_queue(n):
                    continue
                stats = await w.tx.items.queue_stats(n.node_id)
                subs = await w.tx.subscriptions.for_node(n.node_id)
                dlq = dead_letter_node(n.node_id, n.config)
                dead = await w.tx.items.count(dlq) if dlq in nodes else 0
                redeliveries = sum(
                    [
                        await w.tx.ledger.count(n.node_id, EventKind.UNLOCKED, since),
                        await w.tx.ledger.count(n.node_id, EventKind.EXPIRED, since),
                    ]
                )
                oldest = stats.oldest_waiting
                rows.append(
                    QueueSummary(
                        node=n.node_id,
                        backlog=stats.backlog,
                        in_flight=stats.in_flight,
                        subscribers=len(subs),
                        oldest_waiting_seconds=(w.now - oldest).total_seconds() if oldest else None,
                        dead_letters=dead,
                        acks_last_hour=await w.tx.ledger.count(n.node_id, EventKind.ACKED, since),
                        redeliveries_last_hour=redeliveries,
                        delayed=stats.delayed,
                    )
                )
            return sorted(rows, key=lambda r: r.node)

        return await self._read(op)

    async def queue_details(self, actor: Actor, node: str) -> QueueDetails:
        self._require_admin(actor)

        async def op(w: Work) -> QueueDetails:
            n = await self._queue_node(w, node)
            loads = await w.tx.items.in_flight(node)
            subs = await w.tx.subscriptions.for_node(node)
            stats = await w.tx.items.queue_stats(node)
            return QueueDetails(
                node=node,
                config=n.config,
                subscribers=tuple(SubscriberLoad(s, loads.get(s.subid, 0)) for s in subs),
                locks=tuple(await w.tx.items.locked(node)),
                backlog=stats.backlog,
                delayed=stats.delayed,
                active=single_active_subid(n.config, subs, loads),
            )

        return await self._read(op)

    async def force_unlock(
        self, actor: Actor, node: str, item_id: str | None = None, holder: str | None = None
    ) -> Outcome[int]:
        """Unlock one item, or every item held by *holder* (a subscription JID)."""
        self._require_admin(actor)
        if (item_id is None) == (holder is None):
            raise BadRequest("name either one item or one holder")

        async def op(w: Work) -> int:
            n = await self._queue_node(w, node)
            if item_id is not None:
                item = await w.tx.items.get(node, item_id)
                if item is None:
                    raise ItemNotFound(node, item_id)
                items = [item] if item.locked_by else []
            else:
                items = [i for i in await w.tx.items.locked(node) if i.lock_jid == holder]
            queue = self._types.queue_of(n)
            released = 0
            for item in items:
                if await queue.force_unlock(w, n, item):
                    released += 1
            return released

        return await self._run(op)

    async def kick_subscriber(self, actor: Actor, node: str, jid: str) -> Outcome[int]:
        """Unsubscribe every subscription of *jid* on the node and unlock its items."""
        self._require_admin(actor)

        async def op(w: Work) -> int:
            n = await self._ctx.node(w, node)
            subs = await w.tx.subscriptions.for_jid(jid, node)
            if not subs:
                raise BadRequest(f"{jid} has no subscription to {node}")
            released = 0
            for sub in subs:
                await w.tx.subscriptions.remove(node, sub.subid)
                w.effects.append(
                    SubscriptionNotice(
                        sub.jid,
                        node,
                        sub.jid,
                        SubscriptionState.NONE,
                        sub.subid,
                        headline(n.config),
                    )
                )
                if self._is_queue(n):  # nothing is held on a leaf
                    released += await self._types.queue_of(n).release(w, n, sub, "kicked", True)
            return released

        return await self._run(op)

    async def redrive(
        self, actor: Actor, dead_letter_node: str, limit: int | None = None
    ) -> Outcome[int]:
        """Move items of a dead-letter node back to their origin queues (oldest first).

        Each goes back with a fresh delivery count, as SQS's DLQ redrive does.
        """
        self._require_admin(actor)
        if limit is not None and limit < 1:
            raise BadRequest("limit must be a positive number")

        async def op(w: Work) -> int:
            dlq = await self._ctx.node(w, dead_letter_node)
            wanted = limit if limit is not None else await w.tx.items.count(dlq.node_id)
            moved = 0
            for item_id in await w.tx.items.oldest_ids(dlq.node_id, wanted):
                item = await w.tx.items.get(dlq.node_id, item_id)
                origin = await w.tx.nodes.get(item.headers.get("origin-node", "")) if item else None
                if item is None or origin is None:
                    continue
                original_id = item.headers.get("origin-item", item.item_id)
                if await w.tx.items.get(origin.node_id, original_id) is not None:
                    log.info(
                        "event=redrive_skipped node=%s item=%s reason=id_in_use",
                        origin.node_id,
                        original_id,
                    )
                    continue
                policy = self._types.of(origin)
                try:
                    policy.check_room(origin, *await room_taken(w, origin.node_id, item))
                except NodeFull:
                    if moved == 0:
                        raise
                    break
                headers = {k: v for k, v in item.headers.items() if k not in DEAD_LETTER_HEADERS}
                back = await w.tx.items.move(
                    dlq.node_id, item_id, origin.node_id, original_id, headers, w.now
                )
                await self._types.arrived(w, origin, back)
                moved += 1
            return moved

        return await self._run(op)

    async def move_item(
        self, actor: Actor, node: str, item_id: str, target: str, target_item_id: str | None = None
    ) -> Outcome[str]:
        """Move one item to another node in one store step (as redrive does): it is
        in exactly one of the two afterwards, whatever fails. Refused, changing
        nothing: a locked item (unlock it first: its holder may be about to ack),
        an id the target holds already, a target queue with no room. Dead-letter
        headers stay behind and the item arrives with a fresh delivery count; a
        queue it leaves records it as retracted, a queue it enters as published."""
        self._require_admin(actor)

        async def op(w: Work) -> str:
            source = await self._ctx.node(w, node)
            into = await self._ctx.node(w, target)
            if source.node_id == into.node_id:
                raise BadRequest("the item is in that node already")
            item = await w.tx.items.get(node, item_id)
            if item is None:
                raise ItemNotFound(node, item_id)
            if item.locked_by is not None:
                raise ItemLockedByOther(node, item_id)
            new_id = target_item_id or item_id
            if await w.tx.items.get(into.node_id, new_id) is not None:
                raise BadRequest(f"{into.node_id} holds an item {new_id} already")
            self._types.of(into).check_room(into, *await room_taken(w, into.node_id, item))
            if self._is_queue(source):
                record(w.tx.ledger, w.now, EventKind.RETRACTED, item, "admin")
            headers = {k: v for k, v in item.headers.items() if k not in DEAD_LETTER_HEADERS}
            moved = await w.tx.items.move(node, item_id, into.node_id, new_id, headers, w.now)
            await self._types.arrived(w, into, moved)
            log.info("event=item_moved node=%s item=%s to=%s", node, item_id, into.node_id)
            return new_id

        return await self._run(op)

    async def status(self, actor: Actor) -> ServiceStatus:
        self._require_admin(actor)

        async def op(w: Work) -> ServiceStatus:
            nodes = await w.tx.nodes.all()
            return ServiceStatus(
                started_at=self._ctx.started_at,
                nodes=len(nodes),
                queues=sum(1 for n in nodes if self._is_queue(n)),
                items=await w.tx.items.count_all(),
                subscriptions=await w.tx.subscriptions.count(),
                locks=await w.tx.items.count_locked(),
            )

        return await self._read(op)


async def room_taken(w: Work, node_id: str, incoming: Item) -> tuple[int, int]:
    """What *node_id* holds (items) and would hold in payload bytes with *incoming*:
    a move into a queue answers to its ``max_items`` and ``max_bytes`` as a publish
    does (it only never drops anything to make room)."""
    items = w.tx.items
    return await items.count(node_id), await items.payload_bytes(node_id) + incoming.payload_size
