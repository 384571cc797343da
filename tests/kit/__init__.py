"""Shared test parts that are not fixtures: build the service the way tests need it.

Imported by test modules (fixtures stay in the conftest modules, which nothing
imports from)."""

from __future__ import annotations

import itertools

from xmpp_queue.core.model import NodeConfig
from xmpp_queue.core.ports import Clock, Store
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess

ADMIN_JID = "admin@example.org"


def build_service(store: Store, clock: Clock, domain: str = "example.org") -> PubSubService:
    """A service over *store* with *clock*, admins ``admin@<domain>``, users of
    *domain*, counting subscription ids ``id1, id2...`` (not started)."""
    counter = itertools.count(1)
    return PubSubService(
        store,
        clock,
        lambda: f"id{next(counter)}",
        ServiceSettings(
            default_config=NodeConfig(),
            admins=frozenset({f"admin@{domain}"}),
            access=ServiceAccess.for_domain(domain),
        ),
    )
