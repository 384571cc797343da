"""What every admin command shares: its context, its identity, and the node pickers.

A command is a class with a disco ``node`` and a human ``name``; its ``start``
step and the steps it names are short coroutines that read a form, make one
service call as :data:`~xmpp_queue.core.model.SYSTEM`, and say what happened.
The access check is not here: the guard in ``commands.py`` runs it before any
step, for every request of a session. Admins may run every command; a command
with :attr:`AdminCommand.owners_may` may also be run by anyone the service admits,
and then its steps act as the requester (:meth:`AdminCommand.actor`), not as
SYSTEM, so the core's own owner checks decide, and its node picker offers only
the requester's own queues.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from xmpp_queue.admin.flow import CommandSession, Step
from xmpp_queue.admin.forms import Submitted, add_node_choice, new_form
from xmpp_queue.core.model import SYSTEM, Actor, Affiliation, Node
from xmpp_queue.core.node_config import NODE_CONFIG_FIELDS
from xmpp_queue.core.queue.deadlines import dead_letter_node
from xmpp_queue.core.service import PubSubService

NODE_PREFIX = "xmpp-queue#"
"""Command nodes share the component's JID with pubsub nodes; the prefix keeps
them apart (a pubsub node id is unlikely to start with it)."""

QUEUE_FIELDS = tuple(f for f in NODE_CONFIG_FIELDS if f.queue_only)
"""The queue rows of the node configuration table (lock timeout, max deliveries ...)."""


RedriveObserver = Callable[[str, int], None]
"""Told (queue node, items moved) after a redrive: the metrics' redriven counter."""

PayloadReader = Callable[[str], tuple[str, int]]
"""XML text -> (the payload as the service stores it, its size), or a domain error:
the XMPP glue's reader, handed in by the composition root (the admin commands
may not import the glue)."""


@dataclass(frozen=True, slots=True)
class AdminContext:
    service: PubSubService
    database_url: str | None = None
    on_redrive: RedriveObserver | None = None
    read_payload: PayloadReader | None = None
    push: Any = None  # push/registry.py's PushSubscriptions (admin/push_levers.py)
    admins: frozenset[str] = frozenset()  # bare JIDs: they act as SYSTEM
    shards: Any = None  # a shard's mover (sharding_moves.py): admin/shard_levers.py

    def is_admin(self, s: CommandSession) -> bool:
        return s.requester.bare in self.admins

    def now(self) -> datetime:
        return self.service.clock()


class AdminCommand(abc.ABC):
    node: ClassVar[str]
    name: ClassVar[str]
    owners_may: ClassVar[bool] = False
    """Also for a node's owners, on their own nodes (the push commands): the steps
    then act as the requester and the core refuses what is not theirs."""

    def __init__(self, ctx: AdminContext) -> None:
        self.ctx = ctx
        self.service = ctx.service

    @abc.abstractmethod
    async def start(self, s: CommandSession, form: Submitted) -> None:
        """First step. Also where ``prev`` leads back to, with the earlier choice kept."""

    def actor(self, s: CommandSession) -> Actor:
        """Who a step acts as: SYSTEM for an admin, else the requester (owners_may)."""
        return SYSTEM if self.ctx.is_admin(s) else Actor(s.requester.full)

    async def own_queue_nodes(self, s: CommandSession) -> list[Node]:
        """Every queue for an admin; for anyone else, the queues they own."""
        queues = await self.queue_nodes()
        if self.ctx.is_admin(s):
            return queues
        owned = {
            e.node
            for e in await self.service.own_affiliations(self.actor(s))
            if e.affiliation is Affiliation.OWNER
        }
        return [n for n in queues if n.node_id in owned]

    # --- picking a node ---------------------------------------------------------------
    async def all_nodes(self) -> list[Node]:
        return sorted(await self.service.list_nodes(SYSTEM), key=lambda n: n.node_id)

    async def queue_nodes(self) -> list[Node]:
        return [n for n in await self.all_nodes() if n.config.queue]

    async def dead_letter_nodes(self) -> list[tuple[Node, Node]]:
        """(dead-letter node, its queue) for every queue whose dead-letter node exists."""
        nodes = {n.node_id: n for n in await self.all_nodes()}
        pairs = []
        for queue in nodes.values():
            if queue.config.queue:
                target = nodes.get(dead_letter_node(queue.node_id, queue.config))
                if target is not None:
                    pairs.append((target, queue))
        return pairs

    def ask_node(
        self,
        s: CommandSession,
        nodes: Sequence[Node],
        then: Step,
        *,
        instructions: str,
        desc: str,
        empty: str,
        final: bool = False,
    ) -> None:
        """Step one of most commands: choose a node (or finish at once if there is none)."""
        if not nodes:
            s.finish(empty, level="warn")
            return
        form = new_form(self.name, instructions)
        add_node_choice(form, nodes, label="Node", desc=desc, value=s.memory.get("node"))
        s.ask(form, then, final=final)

    def chosen_node(self, s: CommandSession, form: Submitted) -> str:
        node = form.choice("node", "Node")
        s.memory["node"] = node
        return node
