"""Item attributes: what a publisher may attach, and what the service reads from them.

Attributes are key/value strings carried on the wire as XEP-0131 SHIM headers
beside the payload. Four registered header names mean something to the service
(XEP-0131's registry, used as XEP-0149 uses them on a pubsub item):

- ``Start`` (an XEP-0082 DateTime): hold the item back until then (delayed delivery);
- ``Expires`` (a DateTime) or ``TTL`` (seconds): a waiting item past that time is
  never delivered (it is dead-lettered or dropped, as the node says);
- ``Urgency`` (``high``, ``medium`` or ``low``): dispatch order.

One name of ours means something too: ``ordering-key`` (any non-empty text)
groups items that an ordered queue (``pubsub#queue_ordered``) hands out one at a
time, in publish order (docs/queueing.md, "Ordering keys").

Every other name is the publisher's own and travels untouched. Names the
service writes itself (``delivery-attempt``, a dead letter's ``reason``, a
failure's ``last-error``...) are
refused from publishers, so a worker can trust them. The limits are the node's
(``pubsub#attributes_max`` and friends); each refusal names the limit it hit.

Pure functions of (attributes, node config, publish time): no XML, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from xmpp_queue.core.errors import AttributeRefused, AttributeTooBig, DelayTooLong
from xmpp_queue.core.model import Item, NewItem, NodeConfig, Urgency, new_item
from xmpp_queue.core.queue.failures import ERROR_HISTORY, LAST_ERROR

START, EXPIRES, TTL, URGENCY = "Start", "Expires", "TTL", "Urgency"
ORDERING_KEY = "ordering-key"

RESERVED = frozenset(
    {
        "delivery-attempt",
        "delivery-resent",
        "origin-node",
        "origin-item",
        "deliveries",
        "reason",
        "dead-lettered-at",
        "expired-at",
        "SubID",
        LAST_ERROR,
        ERROR_HISTORY,
    }
)
"""Header names the service sets itself: a publisher may not forge them."""

_URGENCY = {"high": Urgency.HIGH, "medium": Urgency.MEDIUM, "low": Urgency.LOW}


@dataclass(frozen=True, slots=True)
class Schedule:
    """What the attributes (and the node's defaults) decide about an item's life."""

    priority: int = Urgency.MEDIUM
    available_at: datetime | None = None  # None: ready at once
    expires_at: datetime | None = None  # None: never
    ordering_key: str | None = None  # None: unordered


def parse_datetime(value: str, name: str) -> datetime:
    """An XEP-0082 DateTime (``2026-11-25T08:00:00Z``, with a zone) as aware UTC."""
    text = value.strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise AttributeRefused(
            name, "not an XEP-0082 DateTime (e.g. 2026-11-25T08:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        raise AttributeRefused(name, "a DateTime needs a time zone (Z or +hh:mm)")
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00: before year 1 in UTC
        raise AttributeRefused(name, "a DateTime out of range in UTC") from None


def format_datetime(moment: datetime) -> str:
    """The XEP-0082 DateTime form the service writes (UTC, ``Z``)."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def check_attributes(attributes: Mapping[str, str], config: NodeConfig) -> None:
    """Refuse what the node does not take: reserved names, or past a limit."""
    if len(attributes) > config.attributes_max:
        raise AttributeTooBig("pubsub#attributes_max", config.attributes_max, len(attributes))
    total = 0
    for name, value in attributes.items():
        if not name or name.strip() != name:
            raise AttributeRefused(name, "a name must be non-empty, without outer spaces")
        if name in RESERVED:
            raise AttributeRefused(name, "set by the service; publishers may not send it")
        name_bytes, value_bytes = len(name.encode()), len(value.encode())
        if name_bytes > config.attribute_name_max:
            raise AttributeTooBig(
                "pubsub#attribute_name_max", config.attribute_name_max, name_bytes
            )
        if value_bytes > config.attribute_value_max:
            raise AttributeTooBig(
                "pubsub#attribute_value_max", config.attribute_value_max, value_bytes
            )
        total += name_bytes + value_bytes
    if total > config.attributes_max_bytes:
        raise AttributeTooBig("pubsub#attributes_max_bytes", config.attributes_max_bytes, total)


def schedule(
    attributes: Mapping[str, str], config: NodeConfig, now: datetime, delays: bool = True
) -> Schedule:
    """Priority, start and expiry of an item published at *now* on a node with *config*.

    *delays* False (a broadcast node): a ``Start`` is checked but not waited for.

    Start: the ``Start`` attribute, else ``now + pubsub#queue_delay``; a start past
    ``now + pubsub#queue_max_delay`` is refused. Expiry: the earliest of
    ``Expires``, ``now + TTL`` and ``now + pubsub#item_expire``.
    """
    priority = Urgency.MEDIUM
    if URGENCY in attributes:
        level = _URGENCY.get(attributes[URGENCY].strip().lower())
        if level is None:
            raise AttributeRefused(URGENCY, "must be high, medium or low")
        priority = level

    start: datetime | None = None
    if START in attributes:
        start = parse_datetime(attributes[START], START)
    elif config.queue_delay > 0:
        start = now + timedelta(seconds=config.queue_delay)
    if not delays:
        start = None
    if start is not None:
        if start - now > timedelta(seconds=config.queue_max_delay):
            raise DelayTooLong(config.queue_max_delay)
        if start <= now:
            start = None  # already due: an ordinary item

    ends: list[datetime] = []
    if EXPIRES in attributes:
        ends.append(parse_datetime(attributes[EXPIRES], EXPIRES))
    if TTL in attributes:
        try:
            seconds = int(attributes[TTL].strip())
        except ValueError:
            raise AttributeRefused(TTL, "must be a whole number of seconds") from None
        if seconds <= 0:
            raise AttributeRefused(TTL, "must be at least 1 second")
        try:
            ends.append(now + timedelta(seconds=seconds))
        except OverflowError:  # past year 9999 (or past what a timedelta holds)
            raise AttributeRefused(TTL, "too large: it ends after the year 9999") from None
    if config.item_expire > 0:
        ends.append(now + timedelta(seconds=config.item_expire))
    expires_at = min(ends) if ends else None
    key = attributes.get(ORDERING_KEY)
    if key is not None and not key.strip():
        raise AttributeRefused(ORDERING_KEY, "must not be empty")
    return Schedule(int(priority), start, expires_at, key)


def republished(existing: Item, attributes: Mapping[str, str]) -> dict[str, str]:
    """The attributes a re-publish of a still-queued item stores. The item keeps its
    place and lock, so it keeps what decided them: its ``Start`` header stays the
    first publish's (a new one would be shown but never applied), and a different
    ``ordering-key`` is refused (the key the queue orders it by cannot change
    under it: retract the item first)."""
    key = attributes.get(ORDERING_KEY)
    if key != existing.ordering_key:
        raise AttributeRefused(
            ORDERING_KEY,
            f"item {existing.item_id!r} is queued under key {existing.ordering_key!r}; "
            "retract it to change its key",
        )
    kept = {k: v for k, v in attributes.items() if k != START}
    if START in existing.headers:
        kept[START] = existing.headers[START]
    return kept


def scheduled_item(
    node_id: str, item_id: str, publisher: str, item: NewItem, plan: Schedule, at: datetime
) -> Item:
    """The stored form of a new item published at *at* under *plan* (leaf and queue
    alike: a leaf's plan has no start and no ordering key)."""
    return new_item(
        node_id,
        item_id,
        publisher,
        item.payload,
        item.size,
        item.attributes,
        at,
        priority=plan.priority,
        expires_at=plan.expires_at,
        available_at=plan.available_at,
        ordering_key=plan.ordering_key,
    )
