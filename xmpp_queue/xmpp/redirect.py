"""Redirects: a node served by another shard, answered the XMPP way.

Why this form: RFC 6120 §8.3.3.14 defines ``<redirect/>`` (type ``modify``) for
"the recipient is redirecting requests for this information to another
entity", with the new address as the element's character data (an XMPP URI);
XEP-0060 writes a node's URI as ``xmpp:service?;node=name``. A redirect is
temporary by definition, which is right for placements: a node may move to
another shard later. ``<gone/>`` (permanent) is kept for a node deleted with a
redirect URI (XEP-0060 §8.4), as today. The URI is also the error's ``<text/>``,
for clients that show only the text.

The same reply comes from the directory on the public name (every node request
there) and from a shard asked for a node placed on another shard.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from xml.etree import ElementTree as ET

from xmpp_queue.core.placement import node_uri
from xmpp_queue.xmpp.refusals import REFUSALS

log = logging.getLogger("xmpp_queue.xmpp.redirect")

STANZAS = "urn:ietf:params:xml:ns:xmpp-stanzas"


class NodeElsewhere(Exception):
    """The node is served by *service*: the request is redirected there."""

    def __init__(self, node: str | None, service: str) -> None:
        super().__init__(f"{node or '(instant node)'} is served by {service}")
        self.node = node
        self.service = service

    @property
    def uri(self) -> str:
        return node_uri(self.service, self.node)


def _quote(value: str) -> str:
    return "'" + value.replace("&", "&amp;").replace("<", "&lt;").replace("'", "&apos;") + "'"


def _text(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def redirect_reply(request: ET.Element, where: NodeElsewhere) -> str:
    """The error reply to *request* (an IQ element) sending its sender to *where*."""
    uri = _text(where.uri)
    REFUSALS.note(
        request.get("from", ""),
        "event=request_redirected from=%s node=%s to=%s",
        request.get("from", ""),
        where.node or "-",
        where.service,
        condition="redirect",
    )
    return (
        f"<iq type='error' from={_quote(request.get('to', ''))} "
        f"to={_quote(request.get('from', ''))} id={_quote(request.get('id', ''))}>"
        f"<error type='modify'><redirect xmlns='{STANZAS}'>{uri}</redirect>"
        f"<text xmlns='{STANZAS}'>{uri}</text></error></iq>"
    )


def requested_node(element: ET.Element) -> str | None:
    """The node a pubsub request element names (``node`` attribute), if any."""
    node = element.get("node")
    return node if node else None


Owner = Callable[[str], Awaitable[str | None]]
Claim = Callable[[str, str], Awaitable[str]]


class PlacementGuard:
    """A shard's check that a request's node is its own (docs/scaling.md).

    Free on the hot path: a node this shard holds in memory passes with one set
    lookup. Only a node it does not hold costs a placement read (cached): placed
    on another shard, the request is redirected there; placed nowhere, a create
    claims it for this shard first (two shards never create one name), anything
    else goes on to the service (which answers item-not-found).
    """

    def __init__(self, shard: str, holds: Callable[[str], bool], owner: Owner, claim: Claim):
        self.shard = shard
        self.holds = holds
        self.owner = owner
        self.claim = claim

    async def check(self, verb: str, node: str | None) -> None:
        """Raise :class:`NodeElsewhere` when *node* belongs to another shard."""
        if node is None or self.holds(node):
            return
        if verb == "create":
            where = await self.claim(node, self.shard)
        else:
            found = await self.owner(node)
            if found is None:
                return
            where = found
        if where != self.shard:
            raise NodeElsewhere(node, where)
