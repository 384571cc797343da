"""Who may do what: XEP-0060 §4.1's affiliation table as data.

Every guard in the service asks :func:`may` instead of branching on
affiliations, so a new action (unlock another holder's item, say) is one row
here. Access models (§4.5) then narrow what an unaffiliated entity may do.
"""

from __future__ import annotations

import enum

from xmpp_queue.core.model import AccessModel, Affiliation, PublishModel


class Action(enum.StrEnum):
    SUBSCRIBE = "subscribe"
    RETRIEVE = "retrieve-items"
    PUBLISH = "publish"
    RETRACT_ANY = "retract-any"  # delete items of others (and queue items locked by others)
    RETRACT_OWN = "retract-own"  # delete items one published (publish-only, §4.1 note)
    PURGE = "purge"
    CONFIGURE = "configure"
    DELETE = "delete"
    MANAGE = "manage"  # subscriptions and affiliations of others (§8.8, §8.9)


_ALL = frozenset(Action)

# §4.1 table; "Yes *" for publishers (delete/purge any item) is granted, as the
# note allows; publish-only may delete only its own items (the note's SHOULD).
CAPABILITIES: dict[Affiliation, frozenset[Action]] = {
    Affiliation.OWNER: _ALL,
    Affiliation.PUBLISHER: frozenset(
        {
            Action.SUBSCRIBE,
            Action.RETRIEVE,
            Action.PUBLISH,
            Action.RETRACT_ANY,
            Action.RETRACT_OWN,
            Action.PURGE,
        }
    ),
    Affiliation.PUBLISH_ONLY: frozenset({Action.PUBLISH, Action.RETRACT_OWN}),
    Affiliation.MEMBER: frozenset({Action.SUBSCRIBE, Action.RETRIEVE}),
    Affiliation.NONE: frozenset({Action.SUBSCRIBE, Action.RETRIEVE}),
    Affiliation.OUTCAST: frozenset(),
}

# Affiliations the service supports (disco advertises "<name>-affiliation").
SUPPORTED_AFFILIATIONS = tuple(a for a in Affiliation if a is not Affiliation.NONE)
SUPPORTED_ACCESS_MODELS = tuple(AccessModel)


def may(affiliation: Affiliation, action: Action) -> bool:
    return action in CAPABILITIES[affiliation]


def may_publish(affiliation: Affiliation, model: PublishModel, subscribed: bool) -> bool:
    """§4.1 plus the node's pubsub#publish_model."""
    if affiliation is Affiliation.OUTCAST:
        return False
    if may(affiliation, Action.PUBLISH):
        return True
    if model is PublishModel.OPEN:
        return True
    return model is PublishModel.SUBSCRIBERS and subscribed
