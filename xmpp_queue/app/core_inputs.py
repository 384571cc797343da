"""What the composition root gives the core: the clock, the id factory, its settings.

Why apart: benchmarks and tests build services of their own with the same
clock and ids, and the mapping from the file's settings to the core's is one
rule that tests check without running anything.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from xmpp_queue.core.service import ServiceSettings
from xmpp_queue.settings import Settings

if TYPE_CHECKING:
    pass


def utc_now() -> datetime:
    """The service clock: timezone-aware UTC, so stored deadlines compare everywhere."""
    return datetime.now(UTC)


def new_id() -> str:
    """Ids for subscriptions and items the service names itself (128 random bits, hex)."""
    return uuid.uuid4().hex


def service_settings(settings: Settings) -> ServiceSettings:
    """What the core needs from the file: new-node defaults, the admins, the access
    policy and the limits per JID."""
    access = settings.access
    return ServiceSettings(
        default_config=dataclasses.replace(
            settings.queue.node_config(), access_model=access.node_access_model
        ),
        admins=settings.admins.jids,
        access=dataclasses.replace(
            access.policy(), own_domain=settings.component.jid.split("/")[0].split("@")[-1]
        ),
        limits=settings.limits.limits(),
        queue_access_model=access.queue_access_model,
        expose_publishers=access.expose_publishers,
        items_page_size=settings.component.items_page_size,
        page_bytes=settings.component.max_payload_ceiling,
        max_payload_ceiling=settings.component.max_payload_ceiling,
    )
