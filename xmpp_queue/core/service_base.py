"""ServiceBase: what every service operation shares.

The commit batcher that runs operation bodies (group commit), the deadline
listeners, the queue engine, and the affiliation lookup that treats the
service itself and configured admins as owners of every node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from xmpp_queue.core.access import affiliation_of
from xmpp_queue.core.batcher import CommitBatcher, Operation, Work
from xmpp_queue.core.effects import Outcome
from xmpp_queue.core.model import Actor, Affiliation, Node, NodeConfig
from xmpp_queue.core.ports import Clock, IdFactory, Store
from xmpp_queue.core.queue.engine import QueueEngine

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ServiceSettings:
    """Service-wide settings (from config.toml, built by app.py).

    ``default_config`` is what a new node gets before the creator's form is
    applied (the [queue] defaults live in its queue_* fields). ``admins`` are bare
    JIDs that act as owners of every node.
    """

    default_config: NodeConfig = field(default_factory=NodeConfig)
    admins: frozenset[str] = frozenset()
    max_batch: int = 128


class ServiceBase:
    def __init__(
        self, store: Store, clock: Clock, new_id: IdFactory, settings: ServiceSettings
    ) -> None:
        self.store = store
        self.clock = clock
        self.new_id = new_id
        self.settings = settings
        self.started_at = clock()
        self._listeners: list[Callable[[datetime | None], None]] = []
        self._batcher = CommitBatcher(
            store, clock, settings.max_batch, on_deadlines=self._deadlines_changed
        )
        self.queue = QueueEngine(self._publish_internal)

    # --- lifecycle -----------------------------------------------------------------
    async def start(self) -> None:
        """Start the commit batcher. Call tick() after it to catch up on time spent down."""
        self._batcher.start()

    async def stop(self) -> None:
        """Finish the operations in flight, then stop."""
        await self._batcher.stop()

    def on_deadline_change(self, listener: Callable[[datetime | None], None]) -> None:
        """Register the scheduler: called with the new earliest deadline after each
        batch that may have changed it."""
        self._listeners.append(listener)

    def _deadlines_changed(self, deadline: datetime | None) -> None:
        for listener in self._listeners:
            listener(deadline)

    async def _run(self, op: Operation[T]) -> Outcome[T]:
        value, effects = await self._batcher.run(op)
        return Outcome(value, effects)

    async def _read(self, op: Operation[T]) -> T:
        value, _ = await self._batcher.run(op)
        return value

    def _is_admin(self, actor: Actor) -> bool:
        return actor.system or actor.bare in self.settings.admins

    async def _affiliation(self, work: Work, node_id: str, actor: Actor) -> Affiliation:
        return await affiliation_of(work.tx, node_id, actor, self.settings.admins)

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
        raise NotImplementedError
