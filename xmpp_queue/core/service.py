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

The verbs are written in one module per concern, each a base class of this one
(``service_parts`` says what they share): ``service_reads`` (discovery and reads),
``service_owner`` (§8), ``service_publisher`` (§7), ``service_subscriber`` (§6) and
``service_queue`` (XEP-0254's verbs and the timer's sweep). This module composes
them, with the lifecycle and the admin levers' delegation.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from xmpp_queue.core.context import ServiceContext, ServiceSettings
from xmpp_queue.core.effects import Outcome
from xmpp_queue.core.model import Actor
from xmpp_queue.core.node_types import NodeTypes
from xmpp_queue.core.ports import Clock, IdFactory, Store
from xmpp_queue.core.replay import Replay
from xmpp_queue.core.reports import QueueDetails, QueueSummary, ServiceStatus
from xmpp_queue.core.service_admin import AdminLevers
from xmpp_queue.core.service_owner import OwnerOperations
from xmpp_queue.core.service_publisher import PublisherOperations
from xmpp_queue.core.service_queue import QueueOperations
from xmpp_queue.core.service_reads import ServiceReads
from xmpp_queue.core.service_subscriber import SubscriberOperations
from xmpp_queue.core.topics import Topics
from xmpp_queue.core.unused_queues import settle_with_unused

__all__ = ["PubSubService", "ServiceSettings"]


class PubSubService(
    ServiceReads, OwnerOperations, PublisherOperations, SubscriberOperations, QueueOperations
):
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
