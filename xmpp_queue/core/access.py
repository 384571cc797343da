"""Guards shared by the service's operations: node lookup, affiliation, access model.

Each guard raises the domain error the XEP-0060 tables call for and never
writes, so a refused request leaves no trace (guard first).
"""

from __future__ import annotations

import re
from collections.abc import Collection

from xmpp_queue.core.capabilities import Action, may
from xmpp_queue.core.errors import (
    BadRequest,
    ClosedNode,
    Forbidden,
    Outcast,
    SubscriptionRequired,
)
from xmpp_queue.core.model import (
    AccessModel,
    Actor,
    Affiliation,
    Node,
    Subscription,
    SubscriptionState,
    jid_matches,
)
from xmpp_queue.core.ports import Transaction

MAX_ID_LENGTH = 1023
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def check_id(value: str, what: str) -> str:
    """Node and item ids: non-empty, at most 1023 characters, no control characters."""
    if not value:
        raise BadRequest(f"empty {what}")
    if len(value) > MAX_ID_LENGTH:
        raise BadRequest(f"{what} longer than {MAX_ID_LENGTH} characters")
    if _CONTROL.search(value):
        raise BadRequest(f"{what} contains control characters")
    return value


async def affiliation_of(
    tx: Transaction, node_id: str, actor: Actor, admins: Collection[str]
) -> Affiliation:
    """The actor's affiliation; the service itself and configured admins own every node."""
    if actor.system or actor.bare in admins:
        return Affiliation.OWNER
    return await tx.affiliations.get(node_id, actor.bare)


def require(affiliation: Affiliation, action: Action) -> None:
    if affiliation is Affiliation.OUTCAST:
        raise Outcast()
    if not may(affiliation, action):
        raise Forbidden(str(action))


def own_subscriptions(subs: list[Subscription], actor: Actor) -> list[Subscription]:
    return [s for s in subs if jid_matches(s.jid, actor.jid)]


async def own_subscriptions_on(tx: Transaction, node_id: str, actor: Actor) -> list[Subscription]:
    """The subscriptions to *node_id* the actor may act for (:func:`jid_matches`): its
    full JID's and its account's. Looked up by JID, so an ack or a publish costs what
    the actor holds, not the number of the node's subscribers."""
    subs = await tx.subscriptions.for_jid(actor.jid, node_id)
    if actor.jid != actor.bare:
        subs += await tx.subscriptions.for_jid(actor.bare, node_id)
    return subs


def visible(node: Node, affiliation: Affiliation) -> bool:
    """Whether the node exists for this requester (disco#items, disco#info, reads).

    XEP-0060 §5.1/§5.4 let a service hide a node from entities not allowed to
    subscribe to it. A whitelisted node (every new queue) is listed and described
    only to its affiliates (owner, publishers, publish-only, members; admins are
    owners); outcasts see no node. Open and authorize nodes stay visible: anyone may
    subscribe to the first and ask to subscribe to the second. Hidden nodes are
    answered as absent (item-not-found), so their names, creator, title and
    configuration do not leak to strangers of the node.
    """
    if affiliation is Affiliation.OUTCAST:
        return False
    if affiliation is not Affiliation.NONE:
        return True
    return node.config.access_model is not AccessModel.WHITELIST


def check_access(
    node: Node, affiliation: Affiliation, action: Action, subs: list[Subscription]
) -> None:
    """§4.5 access models for entities without a stronger affiliation.

    open: anyone not banned subscribes and retrieves. whitelist: only members
    (and stronger). authorize: anyone may ask to subscribe (pending until an
    owner approves); items only for approved subscribers.
    """
    require(affiliation, action)
    if affiliation is not Affiliation.NONE:
        return
    model = node.config.access_model
    if model is AccessModel.WHITELIST:
        raise ClosedNode()
    if model is AccessModel.AUTHORIZE and action is Action.RETRIEVE:
        if not any(s.state is SubscriptionState.SUBSCRIBED for s in subs):
            raise SubscriptionRequired()
