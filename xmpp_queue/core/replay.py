"""Retention and replay: acked items kept for a while, seek and snapshots
(docs/queueing.md, "Retention, seek and snapshots"; Google Pub/Sub's seek).

A queue with ``pubsub#queue_retain_acked`` > 0 keeps an item at its ack
(``items.retain``): it leaves the queue (no dispatch, no backlog count) and
stays, acked, with its payload in the database, until its retention ends (the
timer's sweep drops it: ``retention_ended``).

A **seek** to a time brings back every retained item published at or after
it: waiting again, in its old place in publish order, with a fresh delivery
count (as Pub/Sub resets the ack state; a replay is a new round of work, so
the dead-letter limit counts from 0 again, as a redrive does). Retained items
published before stay acked. Unlike Pub/Sub, a seek never acks an unacked
item: whatever was waiting or locked stays exactly so, so a seek can never lose
work (the property test checks it).

A **snapshot** remembers a moment and the first seq not handed out then; a
seek to it brings back every retained item published after it or acked after
it (so unacked when it was taken). An item acked before the snapshot, replayed
by a later seek and acked again counts as acked after it, and comes back: at
least once, never lost.

Who: the queue's owners and the service's admins.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from xmpp_queue.core.batcher import Work
from xmpp_queue.core.context import ServiceContext
from xmpp_queue.core.effects import Outcome
from xmpp_queue.core.errors import BadRequest, Forbidden, NotAQueue, SnapshotNotFound
from xmpp_queue.core.ledger import EventKind, record
from xmpp_queue.core.model import Actor, Affiliation, Item, Node, Snapshot, new_item

log = logging.getLogger("xmpp_queue.replay")

RETENTION_BATCH = 500
"""Retained items one tick drops at most (more: the next deadline is already due)."""
MAX_SNAPSHOT_NAME = 256


@dataclass(frozen=True, slots=True)
class SeekReport:
    """What a seek did: how many retained items are waiting again, and how many
    stay retained (acked)."""

    replayed: int
    still_acked: int


class Replay:
    """Seek, snapshots and the end of retention (see the module docstring)."""

    def __init__(self, ctx: ServiceContext) -> None:
        self._ctx = ctx

    async def _owned_queue(self, w: Work, actor: Actor, node_id: str) -> Node:
        self._ctx.admit(actor)
        node = await self._ctx.node(w, node_id)
        if not self._ctx.is_admin(actor):
            if await self._ctx.affiliation(w, node_id, actor) is not Affiliation.OWNER:
                raise Forbidden("seek", f"only an owner of {node_id} may seek or snapshot")
        if not node.config.queue:
            raise NotAQueue(node_id)
        return node

    # --- at the ack -------------------------------------------------------------------

    @staticmethod
    async def ack(w: Work, node: Node, item_id: str) -> bool:
        """Remove an acked item, or keep it retained when the queue says so."""
        if node.config.queue_retain_acked > 0:
            return await w.tx.items.retain(node.node_id, item_id, w.now)
        return await w.tx.items.remove(node.node_id, item_id)

    # --- seek --------------------------------------------------------------------------

    async def seek_time(self, actor: Actor, node_id: str, to: datetime) -> Outcome[SeekReport]:
        async def op(w: Work) -> SeekReport:
            node = await self._owned_queue(w, actor, node_id)
            return await self._replay(
                w, node, lambda i: i.published_at >= to, f"seek:{to.isoformat()}"
            )

        return await self._ctx.run(op)

    async def seek_snapshot(self, actor: Actor, node_id: str, name: str) -> Outcome[SeekReport]:
        async def op(w: Work) -> SeekReport:
            node = await self._owned_queue(w, actor, node_id)
            found = {s.name: s for s in await w.tx.nodes.snapshots(node_id)}.get(name)
            if found is None:
                raise SnapshotNotFound(node_id, name)

            def after(i: Item) -> bool:
                assert i.acked_at is not None
                return i.seq >= found.mark_seq or i.acked_at >= found.created_at

            return await self._replay(w, node, after, f"snapshot:{name}")

        return await self._ctx.run(op)

    async def _replay(
        self, w: Work, node: Node, wanted: Callable[[Item], bool], reason: str
    ) -> SeekReport:
        replayed = kept = 0
        for item in await w.tx.items.retained(node.node_id):
            if not wanted(item):
                kept += 1
                continue
            back = await w.tx.items.restore(node.node_id, item.item_id, w.now)
            if back is None:
                kept += 1  # its id is in the queue again (published since)
                continue
            record(w.tx.ledger, w.now, EventKind.REPLAYED, back, reason=reason)
            replayed += 1
        if replayed:
            await self._arrived(w, node)
        log.info(
            "event=seek node=%s target=%s replayed=%d still_acked=%d",
            node.node_id,
            reason,
            replayed,
            kept,
        )
        return SeekReport(replayed, kept)

    @staticmethod
    async def _arrived(w: Work, node: Node) -> None:
        w.touched[node.node_id] = None  # settled at the operation's end: dispatch
        w.deadlines_changed = True

    # --- snapshots ---------------------------------------------------------------------

    async def take_snapshot(self, actor: Actor, node_id: str, name: str) -> Outcome[Snapshot]:
        name = name.strip()
        if not name or len(name) > MAX_SNAPSHOT_NAME:
            raise BadRequest(f"a snapshot needs a name of 1 to {MAX_SNAPSHOT_NAME} characters")

        async def op(w: Work) -> Snapshot:
            await self._owned_queue(w, actor, node_id)
            taken = await w.tx.nodes.take_snapshot(node_id, name, w.now)
            marker = new_item(node_id, name, actor.bare, None, 0, {}, w.now)
            record(w.tx.ledger, w.now, EventKind.SNAPSHOT, marker, reason="taken")
            return taken

        return await self._ctx.run(op)

    async def delete_snapshot(self, actor: Actor, node_id: str, name: str) -> Outcome[bool]:
        async def op(w: Work) -> bool:
            await self._owned_queue(w, actor, node_id)
            if not await w.tx.nodes.drop_snapshot(node_id, name):
                raise SnapshotNotFound(node_id, name)
            marker = new_item(node_id, name, actor.bare, None, 0, {}, w.now)
            record(w.tx.ledger, w.now, EventKind.SNAPSHOT, marker, reason="deleted")
            return True

        return await self._ctx.run(op)

    async def snapshots(self, actor: Actor, node_id: str) -> tuple[list[Snapshot], int]:
        """The queue's snapshots and how many items it retains."""

        async def op(w: Work) -> tuple[list[Snapshot], int]:
            await self._owned_queue(w, actor, node_id)
            return (
                await w.tx.nodes.snapshots(node_id),
                await w.tx.items.retained_count(node_id),
            )

        return await self._ctx.read(op)

    # --- the timer -----------------------------------------------------------------------

    @staticmethod
    async def end_retention(w: Work) -> int:
        """Drop the retained items whose retention ended (what is due, no scan)."""
        ended = 0
        for item in await w.tx.items.expired_retained(w.now, RETENTION_BATCH):
            if await w.tx.items.drop_retained(item.node, item.item_id):
                record(w.tx.ledger, w.now, EventKind.RETENTION_ENDED, item)
                ended += 1
        if ended:
            w.deadlines_changed = True
        return ended
