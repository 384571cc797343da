"""The owner's requests (XEP-0060 §8): create, configure, delete, purge, and the
node's subscriptions and affiliations.

Each parser takes the ``<pubsub/>`` element and the verb element inside it and
returns a frozen request (or raises the core's error for what is malformed).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from xmpp_queue.core.errors import (
    BadRequest,
)
from xmpp_queue.core.model import Affiliation, SubscriptionState
from xmpp_queue.xmpp.forms import FormValues, find_form, read_form
from xmpp_queue.xmpp.requests import (
    child,
    form_values,
    jid_of,
    node_of,
    optional_node,
)
from xmpp_queue.xmpp.stanzas import PUBSUB, PUBSUB_OWNER


@dataclass(frozen=True, slots=True)
class CreateRequest:
    node: str | None  # None: instant node (§8.1.2)
    config: FormValues | None


@dataclass(frozen=True, slots=True)
class NodeRequest:
    """Requests that name only a node: configure get, purge, owner subscriptions
    and affiliations get."""

    node: str


@dataclass(frozen=True, slots=True)
class ConfigureSet:
    node: str
    values: FormValues
    cancel: bool  # <x type='cancel'/>: §8.2.6, nothing changes


@dataclass(frozen=True, slots=True)
class DeleteRequest:
    node: str
    redirect: str | None


@dataclass(frozen=True, slots=True)
class NodeSubscriptionsSet:
    node: str
    changes: tuple[tuple[str, SubscriptionState, str | None], ...]


@dataclass(frozen=True, slots=True)
class NodeAffiliationsSet:
    node: str
    changes: tuple[tuple[str, Affiliation], ...]


def parse_create(pubsub: ET.Element, el: ET.Element) -> CreateRequest:
    configure = child(pubsub, PUBSUB, "configure")
    return CreateRequest(optional_node(el), form_values(configure))


def parse_node(pubsub: ET.Element, el: ET.Element) -> NodeRequest:
    return NodeRequest(node_of(el))


def parse_configure_set(pubsub: ET.Element, el: ET.Element) -> ConfigureSet:
    node = node_of(el)
    x = find_form(el)
    if x is None:
        raise BadRequest("configure needs a data form")
    form = read_form(x)
    return ConfigureSet(node, form.values, form.type == "cancel")


def parse_delete(pubsub: ET.Element, el: ET.Element) -> DeleteRequest:
    redirect = child(el, PUBSUB_OWNER, "redirect")
    uri = redirect.get("uri") if redirect is not None else None
    return DeleteRequest(node_of(el), uri or None)


def parse_node_subscriptions_set(pubsub: ET.Element, el: ET.Element) -> NodeSubscriptionsSet:
    node = node_of(el)
    changes = []
    for sub in el:
        try:
            state = SubscriptionState(sub.get("subscription", ""))
        except ValueError:
            raise BadRequest(
                "subscription must be none, pending, unconfigured or subscribed"
            ) from None
        changes.append((jid_of(sub), state, sub.get("subid") or None))
    return NodeSubscriptionsSet(node, tuple(changes))


def parse_node_affiliations_set(pubsub: ET.Element, el: ET.Element) -> NodeAffiliationsSet:
    node = node_of(el)
    changes = []
    for aff in el:
        try:
            affiliation = Affiliation(aff.get("affiliation", ""))
        except ValueError:
            allowed = ", ".join(a.value for a in Affiliation)
            raise BadRequest(f"affiliation must be one of {allowed}") from None
        changes.append((jid_of(aff), affiliation))
    return NodeAffiliationsSet(node, tuple(changes))
