"""What every admin command shares: its context, its identity, and the node pickers.

A command is a class with a disco ``node`` and a human ``name``; its ``start``
step and the steps it names are short coroutines that read a form, make one
service call as :data:`~xmpp_queue.core.model.SYSTEM`, and say what happened.
The access check is not here: the guard in ``commands.py`` runs it before any
step, for every request of a session (admins only, unless a command is
``open_to_owners``: then the core checks ownership with the requester as actor).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from xmpp_queue.admin.flow import CommandSession, Step
from xmpp_queue.admin.forms import Submitted, add_node_choice, new_form
from xmpp_queue.core.model import SYSTEM, Node
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
    admins: frozenset[str] = frozenset()
    """Bare JIDs of the commands' admins (a command open to owners acts as SYSTEM for them)."""

    def now(self) -> datetime:
        return self.service.clock()


class AdminCommand(abc.ABC):
    node: ClassVar[str]
    name: ClassVar[str]
    open_to_owners: ClassVar[bool] = False
    """Also listed for and run by non-admins; the core refuses those not owning the queue."""

    def __init__(self, ctx: AdminContext) -> None:
        self.ctx = ctx
        self.service = ctx.service

    @abc.abstractmethod
    async def start(self, s: CommandSession, form: Submitted) -> None:
        """First step. Also where ``prev`` leads back to, with the earlier choice kept."""

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
