"""Node types by capability: what publish, retract, subscribe and purge mean on a node.

An ordinary (leaf) node and a queue node answer the same pubsub verbs
differently: a leaf broadcasts each item to every subscriber, a queue locks it
to one. Each type is one policy object (``leaf.LeafPolicy``,
``queue.policy.QueuePolicy``) holding that type's rules and no storage, in the
manner of ejabberd's node plugins and Idavoll's ``LeafNode``.

Two interfaces, by capability, so no type carries a verb it cannot serve:
:class:`NodePolicy` holds the verbs every node answers (publish, retract,
subscribe checks, purge, delete, settle...), :class:`QueueVerbs` those only a
queue answers (unlock, extend, dead-letter now, release, the lock timers). The
type is a :class:`NodeType`, read from the configuration (``pubsub#queue``) in
one place, :meth:`NodeTypes.type_of`; :meth:`NodeTypes.queue_of` gives the
queue verbs or refuses a leaf (``NotAQueue``). An ordered or priority queue
type would be one more policy answering both interfaces (or reusing the
queue's, with its options, as ordered and single-active queues do today).

Settling: at the end of every write, :meth:`NodeTypes.settle` gives each node
the operation touched to its policy once; a queue hands out what became
possible (dispatch), a leaf has nothing to do. So no operation places a
dispatch by hand, and none can forget one.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Protocol

from xmpp_queue.core.batcher import Work
from xmpp_queue.core.context import ServiceContext
from xmpp_queue.core.errors import NotAQueue
from xmpp_queue.core.leaf import LeafPolicy
from xmpp_queue.core.model import (
    Actor,
    Affiliation,
    Item,
    NewItem,
    Node,
    NodeConfig,
    Subscription,
)
from xmpp_queue.core.model import SubscriptionState as State
from xmpp_queue.core.queue.policy import LoadNode, QueuePolicy
from xmpp_queue.core.subscribe_options import SubscribeOptions


class NodeType(Enum):
    """What kind of node this is: the one reading of ``pubsub#queue``."""

    LEAF = "leaf"
    QUEUE = "queue"

    @classmethod
    def of_config(cls, config: NodeConfig) -> NodeType:
        return cls.QUEUE if config.queue else cls.LEAF


class NodePolicy(Protocol):
    """The pubsub verbs every node type answers (see the module docstring)."""

    def validate(self, node_id: str, config: NodeConfig) -> None:
        """Refuse a configuration this type cannot serve (InvalidNodeConfig)."""

    async def may_leave(self, work: Work, node: Node, config: NodeConfig) -> None:
        """Refuse reconfiguring the node to *config* (another type) while it cannot."""

    def check_options(self, node: Node, jid: str, options: SubscribeOptions) -> None:
        """Refuse subscription options this type needs and did not get."""

    def check_owner_subscription(self, node: Node, jid: str, state: State) -> None:
        """Refuse an owner creating a subscription this type cannot serve."""

    def check_room(self, node: Node, count: int, size: int) -> None:
        """Refuse one more item when the node holds *count* items and would hold *size*
        payload bytes with it (NodeFull)."""

    async def publish(
        self,
        work: Work,
        node: Node,
        item_id: str,
        item: NewItem,
        publisher: str,
        source: str | None = None,
    ) -> None:
        """Store (or, for a repeated id, replace or ignore) one checked new item;
        *source*: the topic it was copied from (its ``published`` row says so)."""

    async def arrived(self, work: Work, node: Node, item: Item) -> None:
        """An item was moved into the node (dead letter, redrive): record, tell."""

    async def retract(
        self,
        work: Work,
        node: Node,
        affiliation: Affiliation,
        item: Item | None,
        item_id: str,
        actor: Actor,
        notify: bool | None,
    ) -> None: ...

    async def subscribed(self, work: Work, node: Node, sub: Subscription) -> None:
        """A subscription became active (new or approved)."""

    async def purge(self, work: Work, node: Node) -> int: ...

    async def delete(self, work: Work, node: Node, redirect: str | None) -> None: ...

    async def settle(self, work: Work, node: Node) -> None: ...


class QueueVerbs(Protocol):
    """The verbs only a queue answers: its holders' nack, deadline and dead-letter,
    giving back what a subscriber holds, and the lock and expiry timers."""

    async def unlock(
        self, work: Work, node: Node, actor: Actor, item_id: str, delay: int = 0, reason: str = ""
    ) -> None: ...

    async def dead_letter(
        self, work: Work, node: Node, actor: Actor, item_id: str, reason: str
    ) -> None: ...

    async def extend(
        self, work: Work, node: Node, actor: Actor, item_id: str, seconds: int | None
    ) -> datetime: ...

    async def release(
        self, work: Work, node: Node, sub: Subscription, reason: str, notify: bool
    ) -> int:
        """A subscriber left or was removed: give back what it holds. Returns how many."""

    async def resend_held(self, work: Work, node: Node) -> int:
        """Announce every held item to its holder again (after a restart). Returns how many."""

    async def force_unlock(self, work: Work, node: Node, item: Item) -> bool:
        """An admin takes a lock back (the holder is told). False if it was not held."""

    async def expire_due(self, work: Work, load_node: LoadNode) -> int:
        """Locks past their deadline go back (XEP-0254 §4). Returns how many."""

    async def expire_waiting_due(self, work: Work, load_node: LoadNode) -> int:
        """Waiting items past their expiry go (dead-lettered or dropped)."""


class NodeTypes:
    """The node types of the service, and the choice between them."""

    def __init__(self, ctx: ServiceContext) -> None:
        self._ctx = ctx
        self.leaf = LeafPolicy(ctx)
        self.queue = QueuePolicy(ctx, self.arrived)

    @staticmethod
    def type_of(node: Node) -> NodeType:
        return NodeType.of_config(node.config)

    def of(self, node: Node) -> NodePolicy:
        return self.for_config(node.config)

    def for_config(self, config: NodeConfig) -> NodePolicy:
        return self.queue if NodeType.of_config(config) is NodeType.QUEUE else self.leaf

    def queue_of(self, node: Node) -> QueueVerbs:
        """The queue verbs of *node*, or NotAQueue for a leaf (unlock, extend...)."""
        if NodeType.of_config(node.config) is not NodeType.QUEUE:
            raise NotAQueue(node.node_id)
        return self.queue

    async def publish_into(
        self,
        work: Work,
        node: Node,
        item_id: str,
        item: NewItem,
        publisher: str,
        source: str | None = None,
    ) -> None:
        """A new item arrives in *node* by publish (a topic's copy into a bound
        queue): the node's type stores it with its own rules; it settles at the end."""
        work.touched[node.node_id] = None
        await self.of(node).publish(work, node, item_id, item, publisher, source)

    async def arrived(self, work: Work, node: Node, item: Item) -> None:
        work.touched[node.node_id] = None
        await self.of(node).arrived(work, node, item)

    async def settle(self, work: Work) -> None:
        """Settle every node the operation touched, once each, in order."""
        for node_id in list(work.touched):
            node = await work.tx.nodes.get(node_id)
            if node is not None:
                await self.of(node).settle(work, node)


def _conforms(types: NodeTypes) -> tuple[NodePolicy, NodePolicy, QueueVerbs]:
    """Let mypy check that the policies satisfy their interfaces."""
    return types.leaf, types.queue, types.queue
