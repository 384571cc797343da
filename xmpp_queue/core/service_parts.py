"""What the service's groups of verbs share: the context, the node types, the topics.

:class:`~xmpp_queue.core.service.PubSubService` is one class to its callers, but its
verbs are written in one module per concern (reads, owner, publisher, subscriber,
queue), each a base class of it. They all reach the same parts, built once by
``PubSubService.__init__``; this class declares them, so each module type-checks on
its own, and holds the one step more than one concern uses: deleting a node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from xmpp_queue.core.batcher import Work
from xmpp_queue.core.context import ServiceContext, ServiceSettings
from xmpp_queue.core.model import Node
from xmpp_queue.core.node_types import NodeTypes
from xmpp_queue.core.topics import Topics

FormValues = Mapping[str, Sequence[str]]


class ServiceParts:
    """The parts every group of verbs works with (set by ``PubSubService``)."""

    _ctx: ServiceContext
    _types: NodeTypes
    _topics: Topics
    settings: ServiceSettings

    async def _delete(self, w: Work, n: Node, redirect: str | None = None) -> None:
        """The one deletion path (an owner's delete, an unused queue's expiry):
        the bound queues told, then the node's type deletes and notifies."""
        await self._topics.topic_deleted(w, n)
        await self._types.of(n).delete(w, n, redirect)
