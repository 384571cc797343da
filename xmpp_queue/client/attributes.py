"""Item attributes on the client side: what a publish sends, what a job reads.

A publisher attaches key/value attributes to an item; they travel as XEP-0131
SHIM headers inside the ``<item/>`` (after the payload). Four registered header
names mean something to the service: ``Start`` (hold the item back until then),
``Expires``/``TTL`` (never deliver it after that) and ``Urgency`` (dispatch
order). The publish keywords ``delay``/``deliver_at``, ``ttl`` and ``priority``
are conveniences that become those headers here (and ``ordering_key`` our
``ordering-key`` header, which an ordered queue hands out one at a time per
key), checked before anything is sent, so a mistake is a ``ValueError`` at the
call and not a refused stanza.

``delay`` is turned into an absolute ``Start`` at call time with this
machine's clock (the service compares it with its own): keep clocks in sync
(NTP) or expect the skew on top of the delay.

The names and the service's own headers come from the core
(:mod:`xmpp_queue.core.attributes`): one list, so a name the service reserves
for itself (``delivery-attempt``, a dead letter's ``reason``...) is refused
here too and never shows up as a publisher's attribute on a job.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from xmpp_queue.core.attributes import (
    EXPIRES,
    ORDERING_KEY,
    RESERVED,
    START,
    TTL,
    URGENCY,
    format_datetime,
)
from xmpp_queue.core.model import Urgency

PriorityName = Literal["high", "medium", "low"]
Priority = PriorityName | Urgency
Seconds = int | float | timedelta

SCHEDULE_NAMES = frozenset({START, EXPIRES, TTL, URGENCY, ORDERING_KEY})
"""Header names the service reads (start, expiry, urgency, ordering key)."""
SERVICE_NAMES = RESERVED
"""Header names the service writes itself (never a publisher's attribute)."""

_LEVELS = ("low", "medium", "high")
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
# What one <header name='...'>...</header> adds to a stanza beyond its name and value.
HEADER_OVERHEAD = len("<header name=''></header>")
HEADERS_OVERHEAD = len("<headers xmlns='http://jabber.org/protocol/shim'></headers>")


def _seconds(value: Seconds, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | timedelta):
        raise ValueError(f"{name} must be seconds (int or float) or a timedelta, not {value!r}")
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not math.isfinite(seconds):
        raise ValueError(f"{name} must be a finite number of seconds")
    return seconds


def priority_name(priority: Priority | str) -> str:
    """``high``, ``medium`` or ``low`` from a name (any case) or an :class:`Urgency`."""
    if isinstance(priority, Urgency):
        return _LEVELS[int(priority)]
    if isinstance(priority, str) and priority.strip().lower() in _LEVELS:
        return priority.strip().lower()
    raise ValueError(f"priority must be 'high', 'medium' or 'low' (an Urgency), not {priority!r}")


def item_headers(
    attributes: Mapping[str, str] | None = None,
    *,
    delay: Seconds | None = None,
    deliver_at: datetime | None = None,
    ttl: Seconds | None = None,
    priority: Priority | str | None = None,
    ordering_key: str | None = None,
    now: datetime | None = None,
) -> dict[str, str]:
    """The SHIM headers of one item: *attributes* plus the scheduling keywords.

    Raises ``ValueError`` naming the problem: a name the service sets itself,
    a non-string name or value, ``delay`` with ``deliver_at``, a keyword and
    its header both given, a negative delay, a naive ``deliver_at``, a TTL
    that is not a positive whole number of seconds, an unknown priority.
    *now* (aware) is the moment ``delay`` counts from (default: the clock now).
    """
    headers: dict[str, str] = {}
    for name, value in (attributes or {}).items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise ValueError(f"attribute {name!r}: names and values must be strings")
        if not name or name.strip() != name:
            raise ValueError(f"attribute {name!r}: a name must be non-empty, without outer spaces")
        if name in RESERVED:
            raise ValueError(f"attribute {name!r} is set by the service; it cannot be published")
        if _NOT_XML.search(name) or _NOT_XML.search(value):
            raise ValueError(f"attribute {name!r}: control characters cannot travel in XML")
        headers[name] = value
    if delay is not None and deliver_at is not None:
        raise ValueError("give delay or deliver_at, not both")
    if delay is not None or deliver_at is not None:
        _not_both(headers, START, "delay/deliver_at")
        if deliver_at is not None:
            if not isinstance(deliver_at, datetime) or deliver_at.tzinfo is None:
                raise ValueError("deliver_at must be an aware datetime (e.g. with tzinfo=UTC)")
            start = deliver_at
        else:
            assert delay is not None
            seconds = _seconds(delay, "delay")
            if seconds < 0:
                raise ValueError(f"delay must not be negative, got {seconds:g} s")
            start = (now or datetime.now(UTC)) + timedelta(seconds=seconds)
        headers[START] = format_datetime(start)  # XEP-0082, UTC, Z
    if ttl is not None:
        _not_both(headers, TTL, "ttl")
        seconds = _seconds(ttl, "ttl")
        if seconds != int(seconds) or seconds < 1:
            raise ValueError(f"ttl must be a whole number of seconds, at least 1, got {seconds:g}")
        headers[TTL] = str(int(seconds))
    if priority is not None:
        _not_both(headers, URGENCY, "priority")
        headers[URGENCY] = priority_name(priority)
    if ordering_key is not None:
        _not_both(headers, ORDERING_KEY, "ordering_key")
        if not isinstance(ordering_key, str) or not ordering_key.strip():
            raise ValueError(f"ordering_key must be a non-empty string, not {ordering_key!r}")
        if _NOT_XML.search(ordering_key):
            raise ValueError("ordering_key: control characters cannot travel in XML")
        headers[ORDERING_KEY] = ordering_key
    return headers


def _not_both(headers: Mapping[str, str], name: str, keyword: str) -> None:
    if name in headers:
        raise ValueError(f"give {keyword}= or the attribute {name!r}, not both")


def headers_bytes(headers: Mapping[str, str]) -> int:
    """About how many bytes *headers* add to a publish (for batch size limits)."""
    if not headers:
        return 0
    inner = sum(
        HEADER_OVERHEAD + len(k.encode("utf-8")) + len(v.encode("utf-8"))
        for k, v in headers.items()
    )
    return HEADERS_OVERHEAD + inner


@dataclass(frozen=True, slots=True)
class PublishItem:
    """One entry of :meth:`Publisher.publish_batch`: a payload with its id and
    attributes. (The older ``(payload, item_id)`` tuples are still accepted.)

    The keywords mean what they mean on :meth:`Publisher.publish`; ``delay``
    counts from when the batch is submitted.
    """

    payload: str | None
    item_id: str | None = None
    attributes: Mapping[str, str] = field(default_factory=dict)
    delay: Seconds | None = None
    deliver_at: datetime | None = None
    ttl: Seconds | None = None
    priority: Priority | str | None = None
    ordering_key: str | None = None

    def headers(self, now: datetime | None = None) -> dict[str, str]:
        return item_headers(
            self.attributes,
            delay=self.delay,
            deliver_at=self.deliver_at,
            ttl=self.ttl,
            priority=self.priority,
            ordering_key=self.ordering_key,
            now=now,
        )


def as_publish_item(entry: PublishItem | tuple[str | None, str | None]) -> PublishItem:
    """A batch entry as a :class:`PublishItem` (a ``(payload, item_id)`` tuple too)."""
    if isinstance(entry, PublishItem):
        return entry
    if isinstance(entry, tuple) and len(entry) == 2:
        return PublishItem(entry[0], entry[1])
    raise ValueError(f"a batch entry is a PublishItem or a (payload, item_id) tuple, not {entry!r}")


# --- reading -------------------------------------------------------------------------


def publisher_attributes(headers: Mapping[str, str]) -> dict[str, str]:
    """The publisher's attributes among an item's headers: every header except
    the ones the service writes itself (``delivery-attempt``, ``SubID``...).
    The scheduling names (``Start``, ``TTL``...) stay: the publisher sent them."""
    return {k: v for k, v in headers.items() if k not in RESERVED}


def read_time(headers: Mapping[str, str], name: str) -> datetime | None:
    """A DateTime header as aware UTC, or None when absent or unreadable."""
    text = headers.get(name)
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return None if moment.tzinfo is None else moment.astimezone(UTC)


def read_priority(headers: Mapping[str, str]) -> str:
    """The item's ``Urgency`` (``medium`` without one, as the service counts it)."""
    value = headers.get(URGENCY, "").strip().lower()
    return value if value in _LEVELS else "medium"


def read_ttl(headers: Mapping[str, str]) -> int | None:
    """The ``TTL`` header in seconds, or None."""
    try:
        return int(headers[TTL].strip())
    except (KeyError, ValueError):
        return None


class AttributeView:
    """``attributes``, ``priority``, ``deliver_at``, ``expires_at`` and ``ttl`` read
    from an item's ``headers`` (a mixin for :class:`Job` and the items one reads
    back): computed on access, so a job that never looks pays nothing."""

    __slots__ = ()
    headers: Mapping[str, str]

    @property
    def attributes(self) -> dict[str, str]:
        """The publisher's attributes (the headers minus the service's own)."""
        return publisher_attributes(self.headers)

    @property
    def priority(self) -> str:
        """``high``, ``medium`` or ``low`` (the ``Urgency`` it was published with)."""
        return read_priority(self.headers)

    @property
    def deliver_at(self) -> datetime | None:
        """The ``Start`` it was published with (a delayed item), as aware UTC."""
        return read_time(self.headers, START)

    @property
    def expires_at(self) -> datetime | None:
        """The ``Expires`` it was published with, as aware UTC (see also ``ttl``)."""
        return read_time(self.headers, EXPIRES)

    @property
    def ttl(self) -> int | None:
        """The ``TTL`` in seconds it was published with (counted from its publish)."""
        return read_ttl(self.headers)

    @property
    def ordering_key(self) -> str | None:
        """The ``ordering-key`` it was published with (None: unordered)."""
        return self.headers.get(ORDERING_KEY)
