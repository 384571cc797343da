"""Deadline arithmetic: lock deadlines, retry back-off and the dead-letter rule.

Pure functions of the node's configuration and an item's delivery count, so the
timer code and the tests agree on them without a clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from xmpp_queue.core.model import NodeConfig


def lock_deadline(config: NodeConfig, now: datetime, seconds: int | None = None) -> datetime:
    return now + timedelta(seconds=seconds if seconds is not None else config.queue_lock_timeout)


def retry_available_at(config: NodeConfig, deliveries: int, now: datetime) -> datetime | None:
    """When an unlocked or expired item may be offered again.

    ``queue_retry_delay`` 0 is the spec's immediate hand-over. Otherwise the delay
    doubles with each delivery after the first (exponential back-off, as Google
    Pub/Sub's retry policy), capped by ``queue_retry_delay_max``, so a poison
    item cannot keep every worker slot busy.
    """
    if config.queue_retry_delay <= 0:
        return None
    delay = config.queue_retry_delay * (2 ** max(0, min(deliveries - 1, 30)))
    if config.queue_retry_delay_max > 0:
        delay = min(delay, config.queue_retry_delay_max)
    return now + timedelta(seconds=delay)


def must_dead_letter(config: NodeConfig, deliveries: int) -> bool:
    """An item whose delivery count reached ``queue_max_deliveries`` (0 = no limit)
    goes to the dead-letter node instead of back into the queue."""
    return config.queue_max_deliveries > 0 and deliveries >= config.queue_max_deliveries


def dead_letter_node(node_id: str, config: NodeConfig) -> str:
    return config.queue_dead_letter or f"{node_id}/dead-letter"
