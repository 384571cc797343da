"""The event ledger: one row per state change of a queue item.

The service appends these in the same transaction as the change (docs/architecture.md:
durability); the Spark pipeline reads them. Table and column names live in
``xmpp_queue/ledger_names.py`` (shared by storage and pipeline); the event kinds
are here because they are the domain's words.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from xmpp_queue.core.model import Item


class EventKind(enum.StrEnum):
    PUBLISHED = "published"
    DELIVERED = "delivered"
    ACKED = "acked"
    UNLOCKED = "unlocked"
    EXPIRED = "expired"
    DEAD_LETTERED = "dead_lettered"
    RETRACTED = "retracted"
    PURGED = "purged"
    EXTENDED = "extended"
    DEDUPLICATED = "deduplicated"  # a publish of an id inside the dedup window: stored nothing
    DROPPED = "dropped"  # expired or truncated on a node that drops rather than dead-letters
    FILTERED = "filtered"  # a topic item a bound queue's filter kept out: stored nothing


FINISHED = frozenset({EventKind.ACKED, EventKind.RETRACTED})
"""The events that end an item's life for the dedup window (``queue_dedup_window``)."""


@dataclass(frozen=True, slots=True)
class LedgerEvent:
    """One ledger row. ``subscriber`` is the lock holder's JID where one is involved."""

    at: datetime
    kind: EventKind
    node: str
    item_id: str
    subscriber: str | None = None
    deliveries: int = 0
    payload_size: int = 0


class _Appends(Protocol):
    def append(self, event: LedgerEvent) -> None: ...


def record(
    ledger: _Appends, at: datetime, kind: EventKind, item: Item, subscriber: str | None = None
) -> None:
    """Append the row for *kind* happening to *item* (its delivery count and size as now)."""
    ledger.append(
        LedgerEvent(
            at, kind, item.node, item.item_id, subscriber, item.deliveries, item.payload_size
        )
    )
