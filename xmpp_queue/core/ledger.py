"""The event ledger: one row per state change of a queue item.

The service appends these in the same transaction as the change (docs/architecture.md:
durability); the Spark pipeline reads them. Two optional details let the report say
what the items were and why they failed, not only how many: a ``published`` row
keeps the publisher's attributes (JSON object, the service's own headers left out),
and an ``unlocked``/``expired``/``dead_lettered``/``dropped`` row its reason.
Table and column names live in ``xmpp_queue/ledger_names.py`` (shared by storage
and pipeline); the event kinds are here because they are the domain's words.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from xmpp_queue.core.attributes import RESERVED
from xmpp_queue.core.json_text import sorted_map
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
    # Topic items a bound queue's filter kept out (stored nothing): one row per queue
    # and committed batch, a count (deliveries: how many; reason: the topic).
    FILTERED = "filtered"
    # Retention and replay (docs/queueing.md): none of these starts or ends a
    # lifecycle of the pipeline's report (an acked item stays acked there).
    REPLAYED = "replayed"  # a retained item waiting again after a seek (reason: its target)
    RETENTION_ENDED = "retention_ended"  # a retained item deleted at its retention's end
    SNAPSHOT = "snapshot"  # a snapshot taken (item_id: its name; reason: taken/deleted)
    # A bound queue deleted after pubsub#queue_expire_after seconds without a
    # subscriber (item_id empty; reason: the delay in seconds). A node event.
    EXPIRED_UNUSED = "expired_unused"


REASON_EXPIRED = "expired"
"""Reason of an item that waited past its expiry (dead-lettered or dropped)."""
REASON_TRUNCATED = "truncated"
"""Reason of an item dropped to make room (``pubsub#queue_overflow`` drop-oldest)."""

FINISHED = frozenset({EventKind.ACKED, EventKind.RETRACTED})
"""The events that end an item's life for the dedup window (``queue_dedup_window``)."""


@dataclass(frozen=True, slots=True)
class LedgerEvent:
    """One ledger row. ``subscriber`` is the lock holder's JID where one is involved.

    ``attributes`` (published rows only): the publisher's attributes as a JSON
    object, None when it sent none. ``reason``: why an item was unlocked, expired,
    dead-lettered or dropped, None where no reason was given or the kind has none;
    on a ``published`` row, the topic a fan-out copy came from (None otherwise);
    on a ``filtered`` row, the topic (and ``deliveries`` is the count of items).
    """

    at: datetime
    kind: EventKind
    node: str
    item_id: str
    subscriber: str | None = None
    deliveries: int = 0
    payload_size: int = 0
    attributes: str | None = None
    reason: str | None = None


class _Appends(Protocol):
    def append(self, event: LedgerEvent) -> None: ...


def publisher_attributes(headers: Mapping[str, str]) -> str | None:
    """*headers* without the service's own (:data:`RESERVED`), as a compact JSON
    object with sorted keys; None when nothing is left (no encoding then). Written by
    ``sorted_map``: ``json.dumps``'s text without an encoder built per row."""
    if not headers:
        return None
    own = {k: v for k, v in headers.items() if k not in RESERVED}
    if not own:
        return None
    return sorted_map(own)


def record(
    ledger: _Appends,
    at: datetime,
    kind: EventKind,
    item: Item,
    subscriber: str | None = None,
    reason: str | None = None,
    attributes: Mapping[str, str] | None = None,
) -> None:
    """Append the row for *kind* happening to *item* (its delivery count and size as now).

    A ``published`` row keeps the publisher's attributes: *attributes* when given,
    else the item's headers (a dead letter or fan-out copy arriving keeps the
    original publisher's, and the service's own headers are left out either way).
    *reason* says why an item failed or left; other kinds pass none.
    """
    encoded = None
    if kind is EventKind.PUBLISHED:
        encoded = publisher_attributes(item.headers if attributes is None else attributes)
    ledger.append(
        LedgerEvent(
            at,
            kind,
            item.node,
            item.item_id,
            subscriber,
            item.deliveries,
            item.payload_size,
            encoded,
            reason,
        )
    )


def record_filtered(ledger: _Appends, at: datetime, counts: Mapping[tuple[str, str], int]) -> None:
    """One ``filtered`` row per (queue, topic) in *counts*: a counter, not an item.

    Why a count and not a row per item: a topic whose bound queues filter most
    items out would otherwise write a row (and build an item) for every queue that
    did not want each publish, which made the publisher several times slower than
    on an unbound topic. The row's ``deliveries`` is how many items the queue's
    filter kept out in the batch, ``reason`` the topic, ``item_id`` empty.
    """
    for (queue, topic), n in counts.items():
        ledger.append(LedgerEvent(at, EventKind.FILTERED, queue, "", None, n, 0, None, topic))
