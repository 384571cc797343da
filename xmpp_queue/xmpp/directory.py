"""The directory on the public name: where each node lives, and redirects there.

Why: users know one service name (``queue.example.org``); the nodes live on
shards (``p0.queue.example.org`` ...), each a component domain served by one
process at a time (docs/scaling.md). The directory is itself a component on the
public name, served by whichever process holds its lease. It answers:

- **disco#info** of the service (pubsub identity and features, so a client's
  "is the service there" ping works) and **disco#items**: every node the
  requester may see, each item carrying the node's shard JID and its name
  (XEP-0060 §5.2: items carry ``jid`` and ``node``);
- **create** with a node name: picks the shard by hash of the name's family
  (``core/placement.py``), records the placement (or finds an earlier one) and
  redirects the creator there; the shard creates it. Without a name (an instant
  node) it redirects to the shards in turn;
- **every other request naming a node** (pubsub, pubsub#owner, queueing,
  disco with a node): a redirect to the node's shard (``redirect.py``), or
  item-not-found when it is placed nowhere;
- the node-less listings that span shards, all my subscriptions (§5.6) and all
  my affiliations (§5.7): answered from the shared database for every shard
  (``directory_lists.py``, through the core's ``AccountLists``);
- a stranger (``[access] users``) is refused as the component refuses one.

The directory holds no state of its own: placements are read from the database
(``storage/placement.py``) through :class:`Placements`.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol
from xml.etree import ElementTree as ET

from xmpp_queue.core.access import visible
from xmpp_queue.core.account_lists import AccountLists
from xmpp_queue.core.errors import BadRequest
from xmpp_queue.core.model import Actor, Affiliation, Node, NodeConfig
from xmpp_queue.core.placement import pick_shard
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.xmpp import directory_lists as dl
from xmpp_queue.xmpp import directory_partitions as dp
from xmpp_queue.xmpp.handlers import locate
from xmpp_queue.xmpp.redirect import STANZAS, NodeElsewhere, redirect_reply
from xmpp_queue.xmpp.stanzas import PUBSUB, PUBSUB_OWNER, QUEUEING, pubsub_feature

log = logging.getLogger("xmpp_queue.xmpp.directory")

DISCO_INFO = "http://jabber.org/protocol/disco#info"
DISCO_ITEMS = "http://jabber.org/protocol/disco#items"
PING = "urn:xmpp:ping"
FEATURES = (
    DISCO_INFO,
    DISCO_ITEMS,
    PUBSUB,
    QUEUEING,
    pubsub_feature("create-nodes"),
    pubsub_feature("instant-nodes"),
    pubsub_feature("retrieve-items"),
    PING,
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Listed(Protocol):
    """A placed node as the directory lists it."""

    @property
    def node_id(self) -> str: ...
    @property
    def shard(self) -> str: ...
    @property
    def config(self) -> NodeConfig: ...
    @property
    def affiliation(self) -> Affiliation: ...


class Placements(Protocol):
    """The placement table, as the directory reads and claims it."""

    async def owner(self, node_id: str) -> str | None: ...
    async def claim(self, node_id: str, shard: str) -> str: ...
    async def listing(self, requester: str) -> Sequence[Listed]: ...

    async def partitions(self, logical: str) -> list[tuple[str, str]]: ...

    async def create_partitions(
        self,
        logical: str,
        placed: list[tuple[str, str]],
        config: NodeConfig,
        creator: str,
        owner: str | None,
    ) -> bool: ...


def _q(value: str) -> str:
    return "'" + value.replace("&", "&amp;").replace("<", "&lt;").replace("'", "&apos;") + "'"


def _t(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _split(tag: str) -> tuple[str, str]:
    ns, _, name = tag[1:].partition("}") if tag.startswith("{") else ("", "", tag)
    return ns, name


class Directory:
    """Answers the public name's IQs (module docstring); :meth:`answer` gives the
    reply's text for one request element."""

    def __init__(
        self,
        jid: str,
        shards: Sequence[str],
        placements: Placements,
        access: ServiceAccess,
        admins: frozenset[str] = frozenset(),
        name: str = "xmpp-queue directory",
        queue_defaults: NodeConfig | None = None,
        lists: AccountLists | None = None,
    ) -> None:
        self.jid = jid
        self.shards = tuple(shards)
        self.placements = placements
        self.access = access
        self.admins = admins
        self.name = name
        self._turn = itertools.cycle(self.shards)
        # A partitioned queue's partitions start from these (the shards' queue defaults).
        self.queue_defaults = queue_defaults or NodeConfig(queue=True)
        # All my subscriptions / affiliations over every shard (None: not answered).
        self.lists = lists
        self.features = FEATURES + (dl.FEATURES if lists is not None else ())

    async def answer(self, iq: ET.Element) -> str | None:
        """The reply to *iq* (get or set), or None for anything that needs none."""
        if iq.get("type") not in ("get", "set"):
            return None
        sender = iq.get("from", "")
        actor = Actor(sender)
        child = iq[0] if len(iq) else None
        if child is None:
            return self._error(iq, "modify", "bad-request", "an empty request")
        ns, name = _split(child.tag)
        if not self.access.admits(actor, self.admins):
            condition = "service-unavailable" if ns in (DISCO_INFO, DISCO_ITEMS) else "forbidden"
            return self._error(iq, "cancel", condition, "not a user of this service")
        try:
            if ns == PING:
                return self._result(iq, "")
            if ns in (DISCO_INFO, DISCO_ITEMS):
                return await self._disco(iq, ns, child, actor)
            if ns in (PUBSUB, PUBSUB_OWNER) and name == "pubsub":
                return await self._pubsub(iq, locate(iq)[1], actor)
        except NodeElsewhere as where:
            return redirect_reply(iq, where)
        except BadRequest as exc:
            return self._error(iq, "modify", "bad-request", str(exc))
        except Exception:
            log.exception("event=directory_failed from=%s", sender)
            return self._error(iq, "wait", "internal-server-error", "the directory failed")
        return self._error(iq, "cancel", "service-unavailable", "not a request of the directory")

    async def _disco(self, iq: ET.Element, ns: str, query: ET.Element, actor: Actor) -> str:
        node = query.get("node")
        if node:
            await self._redirect_to_owner(node)
            parts = await self.placements.partitions(node)
            if parts:  # a partitioned queue: a collection of its partitions
                if ns == DISCO_INFO:
                    return self._result(iq, dp.collection_info(node, len(parts)))
                return self._result(iq, dp.collection_items(node, parts))
            return self._error(iq, "cancel", "item-not-found", f"no node {node}")
        if ns == DISCO_INFO:
            features = "".join(f"<feature var={_q(f)}/>" for f in self.features)
            body = (
                f"<query xmlns='{DISCO_INFO}'><identity category='pubsub' type='service' "
                f"name={_q(self.name)}/>{features}</query>"
            )
            return self._result(iq, body)
        admin = actor.bare in self.admins
        items = []
        for entry in await self.placements.listing(actor.bare):
            affiliation = Affiliation.OWNER if admin else entry.affiliation
            if visible(Node(entry.node_id, entry.config, _EPOCH), affiliation):
                items.append(f"<item jid={_q(entry.shard)} node={_q(entry.node_id)}/>")
        return self._result(iq, f"<query xmlns='{DISCO_ITEMS}'>{''.join(items)}</query>")

    async def _pubsub(self, iq: ET.Element, request: ET.Element, actor: Actor) -> str:
        ns, verb = _split(request.tag)
        node = request.get("node") or None
        if verb == "create":
            if not self.access.may_create(actor, self.admins):
                return self._error(iq, "cancel", "forbidden", "you may not create nodes")
            if node is None:
                raise NodeElsewhere(None, next(self._turn))
            asked = dp.requested_partitions(iq)
            if asked is not None:
                made = await dp.create_partitioned(
                    self.placements, self.shards, self.queue_defaults, node, asked, actor
                )
                if not made:
                    return self._error(iq, "cancel", "conflict", f"{node} exists")
                return self._result(
                    iq, f"<pubsub xmlns='{PUBSUB}'><create node={_q(node)}/></pubsub>"
                )
            if await self.placements.partitions(node):
                return self._error(iq, "cancel", "conflict", f"{node} exists (partitioned)")
            owner = await self.placements.claim(node, pick_shard(node, self.shards))
            raise NodeElsewhere(node, owner)
        if node is None:
            if verb == "default":
                raise NodeElsewhere(None, self.shards[0])
            asks_list = ns == PUBSUB and verb in dl.LISTINGS and iq.get("type") == "get"
            if asks_list and self.lists is not None:
                return self._result(iq, await dl.listing_body(self.lists, verb, actor))
            return self._error(
                iq, "cancel", "feature-not-implemented", "ask each shard (see disco#items)"
            )
        await self._redirect_to_owner(node)
        parts = await self.placements.partitions(node)
        if parts:
            names = ", ".join(n for n, _ in parts)
            text = f"{node} is partitioned: use its partitions ({names})"
            return self._error(iq, "cancel", "feature-not-implemented", text)
        return self._error(iq, "cancel", "item-not-found", f"no node {node}")

    async def _redirect_to_owner(self, node: str) -> None:
        owner = await self.placements.owner(node)
        if owner is not None:
            raise NodeElsewhere(node, owner)

    def _head(self, iq: ET.Element, kind: str) -> str:
        return (
            f"<iq type='{kind}' from={_q(iq.get('to', self.jid))} "
            f"to={_q(iq.get('from', ''))} id={_q(iq.get('id', ''))}"
        )

    def _result(self, iq: ET.Element, body: str) -> str:
        return self._head(iq, "result") + (f">{body}</iq>" if body else "/>")

    def _error(self, iq: ET.Element, kind: str, condition: str, text: str) -> str:
        log.info(
            "event=directory_refused from=%s condition=%s text=%r",
            iq.get("from", ""),
            condition,
            text,
        )
        return (
            self._head(iq, "error") + f"><error type='{kind}'><{condition} xmlns='{STANZAS}'/>"
            f"<text xmlns='{STANZAS}'>{_t(text)}</text></error></iq>"
        )
