"""Who may use the service at all, and who may create nodes: the ``[access]`` policy.

The component sits on a server that usually federates with the whole XMPP
network, and a work queue holds private work. So the service is closed by
default: ``config.py`` fills :attr:`ServiceAccess.users` with the component's
parent domain (``queue.example.org`` -> ``example.org``), and everyone else is
refused every request (``ServiceAccessDenied``) before anything is read or
written. ``"*"`` opens the service to the federation; node owners then decide
per node who may do what (access model, affiliations).

Creating nodes is allowed separately (:attr:`ServiceAccess.creators`), by
default to the same parent domain: a service opened to the federation lets
strangers subscribe to and publish on the nodes whose owners let them, but not
create nodes, because a remote server can mint JIDs without end and so walk
around any per-JID node quota. Admins may always do both.

Pure: rules over JID strings, no I/O, so the glue and the tests ask the same
questions (``admits``, ``may_create``) the service's operations ask.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from xmpp_queue.core.errors import Forbidden, PubSubError
from xmpp_queue.core.model import Actor, bare

EVERYONE = "*"
ADMINS_ONLY = "admins"


class ServiceAccessDenied(PubSubError):
    """The requester is not among the service's users (``[access] users``).

    Answered ``forbidden`` to pubsub requests and ``service-unavailable`` to
    service discovery (``xmpp/errors.py``), so a stranger learns nothing of the
    nodes here.
    """

    def __init__(self, jid: str) -> None:
        super().__init__(f"{bare(jid) or 'this entity'} may not use this service")
        self.jid = jid


class CreateForbidden(Forbidden):
    """The requester may use the service but not create nodes (``[access] create``)."""

    def __init__(self, jid: str) -> None:
        super().__init__("create nodes", f"{bare(jid)} may not create nodes on this service")


def domain_of(jid: str) -> str:
    """The domain part of a JID (``user@domain/resource`` -> ``domain``)."""
    return bare(jid).rsplit("@", 1)[-1]


def parent_domain(component: str) -> str:
    """``queue.example.org`` -> ``example.org``; a single label is its own parent."""
    return component.split(".", 1)[1] if "." in component else component


@dataclass(frozen=True, slots=True)
class JidSet:
    """Domains and bare JIDs, or everyone (``"*"``). An entry with ``@`` is a bare
    JID, one without a domain (a domain matches its users, not its subdomains)."""

    entries: frozenset[str] = frozenset()

    @classmethod
    def of(cls, entries: Iterable[str]) -> JidSet:
        return cls(frozenset(e.lower() for e in entries))

    @property
    def everyone(self) -> bool:
        return EVERYONE in self.entries

    def contains(self, jid: str) -> bool:
        if self.everyone:
            return True
        who = bare(jid).lower()
        return who in self.entries or domain_of(who) in self.entries

    def describe(self) -> str:
        if self.everyone:
            return "everyone (the federation)"
        return ", ".join(sorted(self.entries)) or "nobody"


@dataclass(frozen=True, slots=True)
class ServiceAccess:
    """The ``[access]`` policy (see the module docstring).

    ``users``: who may use the service at all. ``creators``: who may create nodes
    (``None`` = everyone in ``users``; an empty set = admins only). Built in code
    without arguments it admits nobody but admins: the safe default when nobody
    said which domain the service belongs to.
    """

    users: JidSet = JidSet()
    creators: JidSet | None = JidSet()
    own_domain: str | None = None
    """The component's own domain: addresses there are the service's own (a push
    subscription's ``push+<id>@`` JID, which acks what it pushed); no XMPP client can
    hold one, so they are admitted (not allowed to create: ``may_create``)."""

    @classmethod
    def for_domain(cls, domain: str) -> ServiceAccess:
        """The default for a component: its users and creators are one domain's."""
        return cls(JidSet.of([domain]), JidSet.of([domain]))

    @classmethod
    def everyone(cls) -> ServiceAccess:
        """Open to the federation, creation included (tests and benchmarks say so)."""
        return cls(JidSet.of([EVERYONE]), None)

    def admits(self, actor: Actor, admins: frozenset[str]) -> bool:
        if actor.system or actor.bare in admins or self.users.contains(actor.jid):
            return True
        return self.own_domain is not None and domain_of(actor.bare) == self.own_domain

    def may_create(self, actor: Actor, admins: frozenset[str]) -> bool:
        if actor.system or actor.bare in admins:
            return True
        if not self.users.contains(actor.jid):
            return False
        return self.creators is None or self.creators.contains(actor.jid)

    def check(self, actor: Actor, admins: frozenset[str]) -> None:
        if not self.admits(actor, admins):
            raise ServiceAccessDenied(actor.jid)

    def check_create(self, actor: Actor, admins: frozenset[str]) -> None:
        self.check(actor, admins)
        if not self.may_create(actor, admins):
            raise CreateForbidden(actor.jid)

    def describe_creators(self) -> str:
        if self.creators is None:
            return "every user"
        return self.creators.describe() if self.creators.entries else "admins only"
