"""ServiceContext: what every part of the service shares, passed to each by composition.

The commit batcher that runs operation bodies (group commit, one writer, one
savepoint per operation), the clock and id factory, the settings, and the
lookups every operation starts with: the node (recorded as touched, so it is
settled at the operation's end) and the actor's affiliation, where the service
itself and configured admins own every node.

The pubsub operations (``service``), the node-type policies (``leaf``,
``queue.policy``) and the admin levers (``service_admin``) each hold this
context; none inherits from another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from xmpp_queue.core.access import affiliation_of
from xmpp_queue.core.batcher import CommitBatcher, Operation, Work
from xmpp_queue.core.effects import Outcome
from xmpp_queue.core.errors import NodeNotFound
from xmpp_queue.core.limits import Limits, PublishRateLimiter
from xmpp_queue.core.model import (
    AccessModel,
    Actor,
    Affiliation,
    ItemReply,
    Node,
    NodeConfig,
    bare,
)
from xmpp_queue.core.ports import Clock, IdFactory, Store
from xmpp_queue.core.service_access import ServiceAccess

T = TypeVar("T")
Settle = Callable[[Work], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ServiceSettings:
    """Service-wide settings (from config.toml, built by app/core_inputs.py).

    ``default_config`` is what a new ordinary node gets before the creator's form
    is applied (the [queue] defaults live in its queue_* fields); a new queue
    node gets it with ``queue_access_model`` (whitelist: owner, publishers and
    members only). ``admins`` are bare JIDs that act as owners of every node.
    ``access`` says who may use the service and create nodes (built in code
    without one: admins only), ``limits`` what one JID may do, and
    ``expose_publishers`` puts the publisher on every item of every node, as
    ``pubsub#itemreply = publisher`` does for one node.

    What one answer may carry (the transport's stanza limit, core/sizes.py):
    ``items_page_size`` caps every items retrieval (XEP-0059 paging applied when
    the request asked for more or for everything); ``page_bytes`` stops a page
    before its payloads pass that many bytes; ``max_payload_ceiling`` is the
    largest ``pubsub#max_payload_size`` a node may have (None: no ceiling), so
    every stored item can be sent on its own.
    """

    default_config: NodeConfig = field(default_factory=NodeConfig)
    admins: frozenset[str] = frozenset()
    max_batch: int = 128
    access: ServiceAccess = field(default_factory=ServiceAccess)
    limits: Limits = field(default_factory=Limits)
    queue_access_model: AccessModel = AccessModel.WHITELIST
    expose_publishers: bool = False
    items_page_size: int = 100
    page_bytes: int | None = None
    max_payload_ceiling: int | None = None

    def defaults_for(self, queue: bool) -> NodeConfig:
        """The configuration a new node of this type starts from."""
        base = self.default_config
        if not queue:
            return base
        ceiling = self.limits.max_queue_items or None
        return dataclasses.replace(
            base, queue=True, access_model=self.queue_access_model, max_items=ceiling
        )


async def _settle_nothing(work: Work) -> None:
    return None


class ServiceContext:
    def __init__(
        self, store: Store, clock: Clock, new_id: IdFactory, settings: ServiceSettings
    ) -> None:
        self.store = store
        self.clock = clock
        self.new_id = new_id
        self.settings = settings
        self.started_at = clock()
        self.settle: Settle = _settle_nothing
        self._listeners: list[Callable[[datetime | None], None]] = []
        self.publish_rate = PublishRateLimiter(
            settings.limits.publish_rate, settings.limits.publish_burst
        )
        self.batcher = CommitBatcher(
            store, clock, settings.max_batch, on_deadlines=self._deadlines_changed
        )

    def on_deadline_change(self, listener: Callable[[datetime | None], None]) -> None:
        self._listeners.append(listener)

    def _deadlines_changed(self, deadline: datetime | None) -> None:
        for listener in self._listeners:
            listener(deadline)

    async def run(self, op: Operation[T]) -> Outcome[T]:
        """Run a write: the body, then the settling of every node it touched, all
        in the operation's savepoint; the outcome comes back after the commit."""
        settle = self.settle

        async def body(work: Work) -> T:
            value = await op(work)
            await settle(work)
            return value

        value, effects = await self.batcher.run(body)
        return Outcome(value, effects)

    async def read(self, op: Operation[T]) -> T:
        value, _ = await self.batcher.run(op)
        return value

    def is_admin(self, actor: Actor) -> bool:
        return actor.system or actor.bare in self.settings.admins

    def rate_exempt(self, actor: Actor) -> bool:
        """Not bound by ``[limits] publish_rate`` (a bulk loader; see core/limits.py)."""
        return actor.bare in self.settings.limits.rate_exempt

    def admit(self, actor: Actor) -> None:
        """The service access policy: refuse a requester outside ``[access] users``
        before the operation reads or writes anything (ServiceAccessDenied)."""
        self.settings.access.check(actor, self.settings.admins)

    def shown_publisher(self, node: Node, publisher: str) -> str | None:
        """The publisher attribute of *node*'s items: its bare JID when the node's
        ``pubsub#itemreply`` is ``publisher`` or the service exposes publishers."""
        if not publisher:
            return None
        if self.settings.expose_publishers or node.config.itemreply is ItemReply.PUBLISHER:
            return bare(publisher)
        return None

    async def affiliation(self, work: Work, node_id: str, actor: Actor) -> Affiliation:
        return await affiliation_of(work.tx, node_id, actor, self.settings.admins)

    async def node(self, work: Work, node_id: str) -> Node:
        """The node, or NodeNotFound; the operation will settle it at its end."""
        found = await work.tx.nodes.get(node_id)
        if found is None:
            raise NodeNotFound(node_id)
        work.touched[node_id] = None
        return found
