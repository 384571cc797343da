"""Single active consumer (``pubsub#queue_single_active``): who receives.

RabbitMQ's single active consumer, Pulsar's Failover subscription: of a queue's
worker subscriptions one at a time receives items; the others stand by.

The active one is the subscription that holds locks, if any does; otherwise the
earliest subscription (creation order) that takes work. Holding locks wins so
that two subscriptions never hold items at once: a subscription that stopped
taking work (``pubsub#deliver`` off) while it still holds items keeps the queue
until those end. A subscription that leaves (unsubscribe, unavailable presence,
a bounced notification, a kick) has its locks released at once and without the
retry delay (``QueuePolicy``), so the next one takes the items in their order.

Pure: a function of the node's subscriptions and loads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from xmpp_queue.core.model import NodeConfig, Subscription
from xmpp_queue.core.queue.dispatch import takes_work

__all__ = ["active_subscription", "single_active_subid", "takes_work"]


def active_subscription(
    subs: Sequence[Subscription], loads: Mapping[str, int]
) -> Subscription | None:
    """The one subscription of a single-active queue that may hold items now."""
    for sub in subs:
        if loads.get(sub.subid):
            return sub
    for sub in subs:
        if takes_work(sub):
            return sub
    return None


def single_active_subid(
    config: NodeConfig, subs: Sequence[Subscription], loads: Mapping[str, int]
) -> str | None:
    """For displays: the active subscription's subid (None: not single-active, or nobody)."""
    if not (config.queue and config.queue_single_active):
        return None
    active = active_subscription(subs, loads)
    return active.subid if active is not None else None
