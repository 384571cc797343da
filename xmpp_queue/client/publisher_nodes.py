"""A publisher's node verbs: create queues and nodes, read items, seek and snapshots.

Why apart from the publishing window: these are occasional requests, one at a
time, each to the node's own service: on a sharded service (docs/scaling.md)
the node's shard, found through :mod:`placement` (a create is sent to the public
name, whose redirect names the shard; the other verbs ask once per node).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TypeVar

from xmpp_queue.client.adhoc import PREFIX, CommandResult, ReplayCommands, run_command
from xmpp_queue.client.link import PubSubLink
from xmpp_queue.client.placement import Placements, on_node
from xmpp_queue.client.wire import ItemEvent

R = TypeVar("R")


def queue_config(
    config: Mapping[str, str | int | bool] | None = None, **queue_options: str | int | bool
) -> dict[str, str | int | bool]:
    """A node_config for a queue: ``pubsub#queue=1`` plus ``pubsub#queue_<name>`` fields.

    ``queue_config(lock_timeout=5, max_deliveries=3)`` gives ``pubsub#queue``,
    ``pubsub#queue_lock_timeout`` and ``pubsub#queue_max_deliveries``; *config*
    adds fields by their full var (``{"pubsub#title": "jobs"}``).
    """
    fields: dict[str, str | int | bool] = {"pubsub#queue": True}
    fields.update({f"pubsub#queue_{name}": value for name, value in queue_options.items()})
    fields.update(config or {})
    return fields


class NodeOwner(ReplayCommands):
    """The node verbs of :class:`~xmpp_queue.client.Publisher` (module docstring)."""

    placements: Placements

    # --- nodes ---------------------------------------------------------------------

    async def create_queue(
        self,
        node: str,
        *,
        config: Mapping[str, str | int | bool] | None = None,
        members: Iterable[str] = (),
        **queue_options: str | int | bool,
    ) -> bool:
        """Create *node* as a queue (see :func:`queue_config`); False if it existed.

        An existing node is left as it is (``conflict`` is tolerated so that
        every producer can call this at start-up). New queues are whitelisted by
        the service's default: *members* (bare JIDs of the worker accounts) are
        made members so they may subscribe; this needs the publisher to own the
        node (it does when it created it).
        """
        form = queue_config(config, **queue_options)
        link = await self._link_up()
        create = self._placed(link, node, lambda at: at.create_node(node, form), ask=False)
        created = await create
        wanted = {jid: "member" for jid in members}
        if wanted:
            await self._placed(link, node, lambda at: at.set_affiliations(node, wanted))
        return created

    async def create_node(
        self, node: str, config: Mapping[str, str | int | bool] | None = None
    ) -> bool:
        """Create a plain (broadcast) node; False if it existed."""
        link = await self._link_up()
        return await self._placed(link, node, lambda at: at.create_node(node, config), ask=False)

    def _placed(
        self,
        link: PubSubLink,
        node: str,
        action: Callable[[PubSubLink], Awaitable[R]],
        ask: bool = True,
    ) -> Awaitable[R]:
        """*action* on *node*'s service (a sharded service's shard: placement.py)."""
        return on_node(self.placements, link, node, action, ask_first=ask)

    async def _command_link(self, node: str) -> PubSubLink:
        """The link toward *node*'s service, asked once per node (push commands)."""
        link = await self._link_up()
        known = self.placements.known(node)
        return link.via(known or await self.placements.resolve(link.stream, node))

    async def _replay(self, command: str, values: dict[str, str]) -> CommandResult:
        link, node = await self._link_up(), values["node"]
        return await self._placed(link, node, lambda at: run_command(at, PREFIX + command, values))

    async def items(self, node: str, max_items: int | None = None) -> list[ItemEvent]:
        """The items stored on *node* (XEP-0060 §6.5), each with its payload
        ``element``, ``headers`` and ``attributes`` (e.g. a dead-letter node's
        items: ``reason``, ``origin-node`` and the publisher's attributes)."""
        link = await self._link_up()
        return await self._placed(link, node, lambda at: at.items(node, max_items))
