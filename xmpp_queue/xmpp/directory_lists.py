"""The directory's node-less listings: all my subscriptions, all my affiliations.

Why on the directory: XEP-0060 §5.6 and §5.7 ask the service for the
requester's subscriptions and affiliations "for all nodes at the service"; on a
sharded deployment that service is the public name, and its nodes are on
several shards. The core's :class:`~xmpp_queue.core.account_lists.AccountLists`
reads them for every shard from the shared database; this module only writes
the answer, in the shape a single service gives (``iq_results.py``):

- ``<subscriptions/>`` (get, no node): ``<subscription node= jid= subscription=
  subid=/>`` for each subscription of the requester's account;
- ``<affiliations/>`` (get, no node): ``<affiliation node= affiliation=/>``.

Neither element has room for the shard's JID in XEP-0060's schema, so it is not
invented here: a client that wants a node's shard asks the directory's
disco#items (``<item jid='p1...' node='jobs'/>``) or sends its request for the
node to the public name and follows the redirect, as the client library does.
With a node, both requests go to the node's shard like every node request.
"""

from __future__ import annotations

from collections.abc import Sequence

from xmpp_queue.core.account_lists import AccountLists
from xmpp_queue.core.model import Actor, AffiliationEntry, Subscription
from xmpp_queue.xmpp.stanzas import PUBSUB, pubsub_feature

LISTINGS = ("subscriptions", "affiliations")
FEATURES = (pubsub_feature("retrieve-subscriptions"), pubsub_feature("retrieve-affiliations"))


def _a(value: str) -> str:
    return (
        value.replace("&", "&amp;").replace("<", "&lt;").replace("'", "&apos;").replace(">", "&gt;")
    )


def subscriptions_body(subs: Sequence[Subscription]) -> str:
    """The ``<pubsub/>`` of a §5.6 answer (empty ``<subscriptions/>`` when none)."""
    rows = "".join(
        f"<subscription node='{_a(s.node)}' jid='{_a(s.jid)}' "
        f"subscription='{_a(str(s.state))}' subid='{_a(s.subid)}'/>"
        for s in subs
    )
    return f"<pubsub xmlns='{PUBSUB}'><subscriptions>{rows}</subscriptions></pubsub>"


def affiliations_body(entries: Sequence[AffiliationEntry]) -> str:
    """The ``<pubsub/>`` of a §5.7 answer (empty ``<affiliations/>`` when none)."""
    rows = "".join(
        f"<affiliation node='{_a(e.node)}' affiliation='{_a(str(e.affiliation))}'/>"
        for e in entries
    )
    return f"<pubsub xmlns='{PUBSUB}'><affiliations>{rows}</affiliations></pubsub>"


async def listing_body(lists: AccountLists, verb: str, actor: Actor) -> str:
    """The answer's body for *verb* (one of :data:`LISTINGS`) asked by *actor*."""
    if verb == "subscriptions":
        return subscriptions_body(await lists.subscriptions(actor))
    return affiliations_body(await lists.affiliations(actor))
