"""XEP-0030 service discovery for the service, its nodes and their items.

Features are derived, not listed (Prosody's ``get_feature_set``): the request
table in ``handlers`` says which pubsub features each routed request
implements, the core's capability data says which affiliations and access
models exist, the config field table says which config-driven features apply,
and plugins (ad-hoc commands, SHIM) add their own through slixmpp's static
disco, which is merged in. A feature nobody routes cannot be advertised.

One global handler per disco request type answers from the core, so nodes
created at run time are discoverable at once; static disco nodes (the ad-hoc
command list) are still answered by slixmpp's static store.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from typing import Any

from slixmpp import JID
from slixmpp.basexmpp import BaseXMPP
from slixmpp.plugins.xep_0030.stanza.info import DiscoInfo
from slixmpp.plugins.xep_0030.stanza.items import DiscoItems

from xmpp_queue.core.capabilities import SUPPORTED_ACCESS_MODELS, SUPPORTED_AFFILIATIONS
from xmpp_queue.core.model import Actor, Affiliation, PageRequest
from xmpp_queue.core.node_config import NODE_CONFIG_FIELDS
from xmpp_queue.core.service import PubSubService
from xmpp_queue.xmpp import errors, forms
from xmpp_queue.xmpp.handlers import ROUTES
from xmpp_queue.xmpp.render import RENDERED_FEATURES
from xmpp_queue.xmpp.stanzas import PUBSUB, QUEUEING, pubsub_feature

log = logging.getLogger("xmpp_queue.xmpp.disco")

DISCO_ITEMS_LIMIT = 1000
"""At most this many items are listed for a node (a queue can hold millions; the
full list is for ``<items/>`` with XEP-0059 paging)."""

# Features that follow from a node_config field being supported.
CONFIG_FEATURES = {
    "pubsub#send_last_published_item": "last-published",
    "pubsub#persist_items": "persistent-items",
}
DISCO_FEATURES = (pubsub_feature("meta-data"),)  # node disco#info carries the form


def service_features() -> list[str]:
    """Everything the service advertises beyond what plugins add, in stable order."""
    features = [PUBSUB]
    for route in ROUTES.values():
        features.extend(route.features)
    features.extend(
        pubsub_feature(f"{a}-affiliation")
        for a in SUPPORTED_AFFILIATIONS
        if a is not Affiliation.OWNER
    )
    features.extend(pubsub_feature(f"access-{m}") for m in SUPPORTED_ACCESS_MODELS)
    features.extend(
        pubsub_feature(CONFIG_FEATURES[f.var])
        for f in NODE_CONFIG_FIELDS
        if f.var in CONFIG_FEATURES
    )
    features.extend(DISCO_FEATURES)
    features.extend(RENDERED_FEATURES)
    return list(dict.fromkeys(features))


class DiscoProvider:
    """Answers disco#info and disco#items from the core."""

    def __init__(self, xmpp: BaseXMPP, service: PubSubService, name: str) -> None:
        self.xmpp = xmpp
        self.service = service
        self.name = name
        self.features = service_features()

    def register(self) -> None:
        disco = self.xmpp.plugin["xep_0030"]
        disco.set_node_handler("get_info", None, None, self.get_info)
        disco.set_node_handler("get_items", None, None, self.get_items)

    @property
    def _static(self) -> Any:
        return self.xmpp.plugin["xep_0030"].static

    def _admit(self, ifrom: JID | None, verb: str) -> None:
        """A requester outside ``[access] users`` gets service-unavailable for every
        disco request (the errors table), the service's own and static nodes' too.
        A query without a sender is slixmpp asking itself (local), not a stranger."""
        if ifrom is None or not ifrom.full:
            return
        try:
            self.service.admit(Actor(_full(ifrom)))
        except Exception as exc:
            raise errors.as_xmpp_error(exc, verb, _full(ifrom)) from None

    async def get_info(self, jid: JID, node: str | None, ifrom: JID | None, data: Any) -> Any:
        self._admit(ifrom, "disco#info")
        if node and self._static.node_exists(jid, node):
            return self._static.get_info(jid, node, ifrom, data)
        if not node:
            return self._service_info(jid)
        try:
            found = await self.service.get_node(Actor(_full(ifrom)), node)
        except Exception as exc:
            raise errors.as_xmpp_error(exc, "disco#info", _full(ifrom)) from None
        info = DiscoInfo()
        info.add_identity("pubsub", "leaf")
        info.add_feature(PUBSUB)
        if found.config.queue:
            info.add_feature(QUEUEING)
        info.xml.append(forms.meta_data_form(found))
        return info

    def _service_info(self, jid: JID) -> DiscoInfo:
        info = DiscoInfo()
        info.add_identity("pubsub", "service", self.name)
        static = self._static.get_info(jid, None, None, None)
        for category, itype, lang, name in static["identities"]:
            info.add_identity(category, itype, name, lang)
        for feature in (*self.features, *static["features"]):
            info.add_feature(feature)
        return info

    async def get_items(self, jid: JID, node: str | None, ifrom: JID | None, data: Any) -> Any:
        self._admit(ifrom, "disco#items")
        if node and self._static.node_exists(jid, node):
            return self._static.get_items(jid, node, ifrom, data)
        actor = Actor(_full(ifrom))
        items = DiscoItems()
        try:
            if not node:
                for found in await self.service.list_nodes(actor):
                    items.add_item(jid, found.node_id, found.config.title or None)
                for item in self._static.get_items(jid, None, None, None)["items"]:
                    items.add_item(*item)
                return items
            await self.service.get_node(actor, node)  # a hidden node is item-not-found
            page = await self.service.get_items(
                actor, node, page=PageRequest(max=DISCO_ITEMS_LIMIT)
            )
        except Exception as exc:
            raise errors.as_xmpp_error(exc, "disco#items", _full(ifrom)) from None
        items["node"] = node
        # §5.5: name is the ItemID, no node attribute. Appended directly: slixmpp's
        # add_item keeps one item per (jid, node) and these all share both.
        for stored in page.items:
            ET.SubElement(
                items.xml, f"{{{items.namespace}}}item", {"jid": jid.full, "name": stored.item_id}
            )
        return items


def _full(jid: JID | None) -> str:
    return jid.full if jid is not None else ""
