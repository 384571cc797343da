"""The service's reads: discovery, items, one's own subscriptions and affiliations.

A part of :class:`~xmpp_queue.core.service.PubSubService` (composed in as a base
class, see ``service_parts``): every read runs in the commit batcher's read path
and changes nothing, so these verbs are kept apart from the ones that write.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from datetime import datetime

from xmpp_queue.core.access import check_access, own_subscriptions_on, visible
from xmpp_queue.core.batcher import Work
from xmpp_queue.core.capabilities import Action
from xmpp_queue.core.errors import InvalidSubId, NodeNotFound
from xmpp_queue.core.item_pages import read_items
from xmpp_queue.core.model import (
    Actor,
    AffiliationEntry,
    ItemPage,
    Node,
    NodeConfig,
    PageRequest,
    Subscription,
)
from xmpp_queue.core.service_parts import ServiceParts
from xmpp_queue.core.subscribe_options import SubscribeOptions

log = logging.getLogger("xmpp_queue.service")


class ServiceReads(ServiceParts):
    """Reads every requester may ask (each asks ``admit`` first)."""

    def admit(self, actor: Actor) -> None:
        """Refuse a requester outside the service's users (``[access] users``).

        Every operation below asks this first; the glue asks it for requests
        that reach no operation (service disco, worker presence)."""
        self._ctx.admit(actor)

    def default_config(self, actor: Actor, queue: bool = False) -> NodeConfig:
        """§8.3: what a new node of this type gets when the form leaves a field out."""
        self._ctx.admit(actor)
        return self.settings.defaults_for(queue)

    def default_subscribe_options(self, actor: Actor, queue: bool) -> SubscribeOptions:
        self._ctx.admit(actor)
        return SubscribeOptions(queue_requests=1 if queue else None, deliver=True, raw={})

    async def get_node(self, actor: Actor, node: str) -> Node:
        """The node, or NodeNotFound also when it is hidden from *actor*
        (``access.visible``: a whitelisted node for a non-affiliate)."""
        self._ctx.admit(actor)

        async def op(w: Work) -> Node:
            n = await self._ctx.node(w, node)
            if not visible(n, await self._ctx.affiliation(w, node, actor)):
                raise NodeNotFound(node)
            return n

        return await self._ctx.read(op)

    async def list_nodes(self, actor: Actor) -> list[Node]:
        """Every node *actor* may see (``access.visible``)."""
        self._ctx.admit(actor)

        async def op(w: Work) -> list[Node]:
            found = []
            for n in await w.tx.nodes.all():
                if visible(n, await self._ctx.affiliation(w, n.node_id, actor)):
                    found.append(n)
            return found

        return await self._ctx.read(op)

    async def get_items(
        self,
        actor: Actor,
        node: str,
        item_ids: Sequence[str] = (),
        max_items: int | None = None,
        page: PageRequest | None = None,
        subid: str | None = None,
    ) -> ItemPage:
        """§6.5: all items, the max_items newest, some by id, or an RSM page, never
        more than a page (``core/item_pages.py``); with the publisher of each when
        the node exposes publishers (§7.1.2)."""
        self._ctx.admit(actor)

        async def op(w: Work) -> ItemPage:
            n = await self._ctx.node(w, node)
            aff = await self._ctx.affiliation(w, node, actor)
            subs = await own_subscriptions_on(w.tx, node, actor)
            check_access(n, aff, Action.RETRIEVE, subs)
            if subid is not None and not any(s.subid == subid for s in subs):
                raise InvalidSubId()
            show = self._ctx.shown_publisher(n, "-") is not None
            s = self.settings
            found = await read_items(
                w.tx, node, item_ids, max_items, page, s.items_page_size, s.page_bytes
            )
            return dataclasses.replace(found, show_publisher=show)

        return await self._ctx.read(op)

    async def own_subscriptions(self, actor: Actor, node: str | None = None) -> list[Subscription]:
        self._ctx.admit(actor)

        async def op(w: Work) -> list[Subscription]:
            if node is not None:
                await self._ctx.node(w, node)
            subs = await w.tx.subscriptions.for_account(actor.bare)
            return [s for s in subs if node is None or s.node == node]

        return await self._ctx.read(op)

    async def own_affiliations(
        self, actor: Actor, node: str | None = None
    ) -> list[AffiliationEntry]:
        self._ctx.admit(actor)

        async def op(w: Work) -> list[AffiliationEntry]:
            if node is not None:
                await self._ctx.node(w, node)
            entries = await w.tx.affiliations.for_jid(actor.bare)
            return [e for e in entries if node is None or e.node == node]

        return await self._ctx.read(op)

    async def next_deadline(self) -> datetime | None:
        async def op(w: Work) -> datetime | None:
            return await w.tx.items.next_deadline(w.now)

        return await self._ctx.read(op)
