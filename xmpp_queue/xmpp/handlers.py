"""The request table: (iq type, namespace, element) -> one short handler.

Like wokkel's ``_requestVerbMap`` and Prosody's ``handlers[type.."_"..name]``:
every handler parses its request (``*_requests``), calls ONE service method and
renders the result (``render``); if a handler grows past a few lines, logic is
leaking out of the core. The table also says which disco features each entry
implements, so ``disco`` advertises exactly what is routed here.

XEP-0254's examples send retract and unlock as ``type='get'``; both types are
accepted for them (docs/queueing.md). A known element with the wrong IQ type is
bad-request; an element the service does not know is feature-not-implemented.

The handlers themselves live by verb family (``owner_handlers``,
``subscriber_handlers``, ``item_handlers``); the router that runs a request
through this table is ``router.py``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from xmpp_queue.core.errors import BadRequest
from xmpp_queue.xmpp import errors
from xmpp_queue.xmpp.iq_request import Handler
from xmpp_queue.xmpp.item_handlers import (
    on_dead_letter,
    on_extend,
    on_publish,
    on_retract,
    on_unlock,
    on_unlock_later,
)
from xmpp_queue.xmpp.owner_handlers import (
    on_configure_get,
    on_configure_set,
    on_create,
    on_default_config,
    on_delete,
    on_node_affiliations_get,
    on_node_affiliations_set,
    on_node_subscriptions_get,
    on_node_subscriptions_set,
    on_purge,
)
from xmpp_queue.xmpp.stanzas import (
    PUBSUB,
    PUBSUB_OWNER,
    QUEUE_EXT,
    QUEUEING,
    RSM,
    pubsub_feature,
)
from xmpp_queue.xmpp.subscriber_handlers import (
    on_affiliations,
    on_default_options,
    on_items,
    on_options_get,
    on_options_set,
    on_subscribe,
    on_subscriptions,
    on_unsubscribe,
)


@dataclass(frozen=True, slots=True)
class Route:
    """One table entry: the handler and the disco features it implements."""

    handler: Handler
    features: tuple[str, ...] = ()


def _pubsub(*names: str) -> tuple[str, ...]:
    return tuple(pubsub_feature(n) for n in names)


_RETRACT = Route(on_retract, _pubsub("delete-items", "retract-items"))


_UNLOCK = Route(on_unlock, (QUEUEING,))


_OPTIONS = _pubsub("subscription-options")


ROUTES: dict[tuple[str, str, str], Route] = {
    # owner use cases (§8); create-and-configure sends <configure/> in the pubsub ns
    ("set", PUBSUB, "create"): Route(
        on_create, _pubsub("create-nodes", "instant-nodes", "create-and-configure")
    ),
    ("get", PUBSUB_OWNER, "configure"): Route(on_configure_get, _pubsub("config-node")),
    ("set", PUBSUB_OWNER, "configure"): Route(on_configure_set, _pubsub("config-node")),
    ("get", PUBSUB_OWNER, "default"): Route(on_default_config, _pubsub("retrieve-default")),
    ("set", PUBSUB_OWNER, "delete"): Route(on_delete, _pubsub("delete-nodes")),
    ("set", PUBSUB_OWNER, "purge"): Route(on_purge, _pubsub("purge-nodes")),
    ("get", PUBSUB_OWNER, "subscriptions"): Route(
        on_node_subscriptions_get, _pubsub("manage-subscriptions")
    ),
    ("set", PUBSUB_OWNER, "subscriptions"): Route(
        on_node_subscriptions_set, _pubsub("manage-subscriptions")
    ),
    ("get", PUBSUB_OWNER, "affiliations"): Route(
        on_node_affiliations_get, _pubsub("modify-affiliations")
    ),
    ("set", PUBSUB_OWNER, "affiliations"): Route(
        on_node_affiliations_set, _pubsub("modify-affiliations")
    ),
    # publisher (§7)
    ("set", PUBSUB, "publish"): Route(
        on_publish, _pubsub("publish", "publish-options", "item-ids")
    ),
    ("set", PUBSUB, "retract"): _RETRACT,
    ("get", PUBSUB, "retract"): _RETRACT,
    # subscriber (§6)
    ("set", PUBSUB, "subscribe"): Route(on_subscribe, _pubsub("subscribe")),
    ("set", PUBSUB, "unsubscribe"): Route(on_unsubscribe, _pubsub("subscribe")),
    ("get", PUBSUB, "options"): Route(on_options_get, _OPTIONS),
    ("set", PUBSUB, "options"): Route(on_options_set, _OPTIONS),
    ("get", PUBSUB, "default"): Route(on_default_options, _pubsub("retrieve-default-sub")),
    ("get", PUBSUB, "items"): Route(
        on_items, (*_pubsub("retrieve-items", "persistent-items", "rsm"), RSM)
    ),
    ("get", PUBSUB, "subscriptions"): Route(on_subscriptions, _pubsub("retrieve-subscriptions")),
    ("get", PUBSUB, "affiliations"): Route(on_affiliations, _pubsub("retrieve-affiliations")),
    # queue: XEP-0254 unlock (both IQ types, as its examples) and our lock extension
    ("set", QUEUEING, "unlock"): _UNLOCK,
    ("get", QUEUEING, "unlock"): _UNLOCK,
    ("set", QUEUE_EXT, "extend"): Route(on_extend, (QUEUE_EXT,)),
    ("set", QUEUE_EXT, "unlock"): Route(on_unlock_later, (QUEUE_EXT,)),
    ("set", QUEUE_EXT, "dead-letter"): Route(on_dead_letter, (QUEUE_EXT,)),
}


# Elements that qualify the request beside it rather than being the request.
MODIFIERS = frozenset(
    {(PUBSUB, "configure"), (PUBSUB, "options"), (PUBSUB, "publish-options"), (RSM, "set")}
)


_CONTAINERS = (f"{{{PUBSUB}}}pubsub", f"{{{PUBSUB_OWNER}}}pubsub")


def split_tag(tag: str) -> tuple[str, str]:
    if tag.startswith("{"):
        ns, _, name = tag[1:].partition("}")
        return ns, name
    return "", tag


def locate(xml: ET.Element) -> tuple[ET.Element, ET.Element, tuple[str, str, str]]:
    """The ``<pubsub/>`` container, the request element inside it, and its table key."""
    container = next((c for c in xml if c.tag in _CONTAINERS), None)
    if container is None:
        raise BadRequest("no pubsub request")
    children = list(container)
    primary = [c for c in children if split_tag(c.tag) not in MODIFIERS] or children
    if not primary:
        raise BadRequest("empty pubsub request")
    ns, name = split_tag(primary[0].tag)
    return container, primary[0], (xml.get("type", ""), ns, name)


def route_for(key: tuple[str, str, str]) -> Route:
    route = ROUTES.get(key)
    if route is not None:
        return route
    iq_type, ns, name = key
    if any(k[1:] == (ns, name) for k in ROUTES):
        raise BadRequest(f"<{name}/> is not a request of type {iq_type}")
    raise errors.UnknownRequest(f"unknown request <{name} xmlns='{ns}'/>")
