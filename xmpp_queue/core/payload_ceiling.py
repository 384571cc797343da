"""The largest item a node may accept: what can still be sent in one stanza.

An item is sent whole (a notification, an items page, a redelivery, a dead
letter), and an XMPP server closes the component's stream when one stanza is
over its limit, so an item too big to send must be refused when it is
published, not discovered when it is sent. The transport tells the service the
ceiling (``ServiceSettings.max_payload_ceiling``: its stanza limit less the
envelope around an item); ``pubsub#max_payload_size`` may not go above it, and
a publish is judged on the lower of the two, so a node configured before the
ceiling was lowered still refuses what cannot be sent.
"""

from __future__ import annotations

from xmpp_queue.core.errors import InvalidNodeConfig
from xmpp_queue.core.model import NodeConfig


def check_payload_ceiling(
    config: NodeConfig, before: NodeConfig | None, ceiling: int | None
) -> None:
    """Refuse a ``pubsub#max_payload_size`` above *ceiling* when it is set or changed
    (an unrelated change to a node kept from before is not refused)."""
    if ceiling is None or config.max_payload_size <= ceiling:
        return
    if before is not None and before.max_payload_size == config.max_payload_size:
        return
    raise InvalidNodeConfig(
        "pubsub#max_payload_size",
        f"at most {ceiling} bytes on this service: a larger item would not fit in one "
        "stanza ([component] max_stanza_size less the envelope)",
    )


def payload_limit(config: NodeConfig, ceiling: int | None) -> int:
    """The size a published payload is judged on."""
    if ceiling is None:
        return config.max_payload_size
    return min(config.max_payload_size, ceiling)
