"""A requester's subscriptions and affiliations over every shard (XEP-0060 §5.6, §5.7).

Why here: on a sharded deployment (docs/scaling.md) a user's nodes are spread
over several shards, and "all my subscriptions" / "all my affiliations" sent to
the public name (the directory) would otherwise have no answer: each shard knows
only its own nodes. Every shard commits to one shared database, so the directory
answers from it, for every shard at once, through the :class:`AccountRecords`
port (storage reads the rows of every placed node).

The rules are the ones a single service applies (``service_reads.py``):
subscriptions of every JID whose bare JID is the requester's (the account's
resources included), in creation order; affiliations held by the requester's
bare JID. Each entry names its node; which shard serves a node is not part of
these elements (the XEP-0060 schema gives ``<subscription/>`` and
``<affiliation/>`` no attribute for it): a client finds it in the directory's
disco#items (each item carries the shard's JID and the node) or by sending any
request for the node to the public name, which redirects it.

The answer is what has been committed: a subscription being made at this moment
on a shard shows once its commit is done (the shard answers its subscriber only
after that commit too).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from xmpp_queue.core.model import Actor, Affiliation, AffiliationEntry, Subscription, bare


class AccountRecords(Protocol):
    """The shared database's rows of one account, over every shard's nodes."""

    async def subscriptions_of(self, account: str) -> Sequence[Subscription]:
        """Subscriptions of *account* (a bare JID) and its full JIDs, oldest first."""
        ...

    async def affiliations_of(self, account: str) -> Sequence[AffiliationEntry]:
        """Affiliations stored for *account* (a bare JID), by node."""
        ...


class AccountLists:
    """The directory's answers to the node-less listings (the module docstring)."""

    def __init__(self, records: AccountRecords) -> None:
        self.records = records

    async def subscriptions(self, actor: Actor) -> list[Subscription]:
        """§5.6: all subscriptions of every JID matching the requester's bare JID."""
        found = await self.records.subscriptions_of(actor.bare)
        return [s for s in found if bare(s.jid) == actor.bare]

    async def affiliations(self, actor: Actor) -> list[AffiliationEntry]:
        """§5.7: the requester's affiliations (``none`` is no affiliation)."""
        found = await self.records.affiliations_of(actor.bare)
        return [e for e in found if e.jid == actor.bare and e.affiliation is not Affiliation.NONE]
