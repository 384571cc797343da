"""The service's queue verbs (XEP-0254): the holder's unlock, dead-letter and extend,
a departed subscriber's release, and the timer's tick.

A part of :class:`~xmpp_queue.core.service.PubSubService` (see ``service_parts``):
what only a queue answers, asked of the node's queue type (``NodeTypes.queue_of``),
plus the sweep the deadline timer runs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime

from xmpp_queue.core.access import check_id
from xmpp_queue.core.batcher import Work
from xmpp_queue.core.effects import Outcome
from xmpp_queue.core.errors import BadRequest
from xmpp_queue.core.item_batches import check_batch
from xmpp_queue.core.model import Actor
from xmpp_queue.core.node_types import NodeType
from xmpp_queue.core.queue.failures import MAX_REASON
from xmpp_queue.core.replay import Replay
from xmpp_queue.core.reports import TickReport
from xmpp_queue.core.service_parts import ServiceParts
from xmpp_queue.core.unused_queues import expire_unused

TICK_BATCH = 500  # delayed nodes a tick takes; more come due: the next tick at once
MAX_DELAY = 7 * 86400  # seconds a delayed unlock may hold an item back, as long as an extend
log = logging.getLogger("xmpp_queue.service")


class QueueOperations(ServiceParts):
    """XEP-0254's verbs beyond pubsub, and the timer's sweep."""

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

    async def resend_held(self) -> Outcome[int]:
        """Every held item announced to its holder again, same lock and attempt, marked
        ``delivery-resent`` (the component calls this whenever its stream comes up:
        a notice committed just before a crash may never have left). Changes
        nothing stored. Returns how many notices."""

        async def op(w: Work) -> int:
            resent = 0
            for n in await w.tx.nodes.all():
                if self._types.type_of(n) is NodeType.QUEUE:
                    resent += await self._types.queue_of(n).resend_held(w, n)
            return resent

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
        it expired, its delayed items (retry back-off, a later start) came due, or
        the hold of a short batch for a subscriber ended;
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
            for node_id in await w.tx.items.due_held_nodes(w.now, TICK_BATCH):
                w.touched[node_id] = None
            if every_node:
                for n in await w.tx.nodes.all():
                    w.touched[n.node_id] = None
            w.deadlines_changed = True
            return TickReport(expired, tuple(w.touched))

        return await self._ctx.run(op)
