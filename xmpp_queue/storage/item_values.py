"""The item values the store keeps, and the one-call constructors of changed ones.

Items are the core's frozen :class:`Item` values: a change makes a new value
(:func:`with_lock` and friends build it with one constructor call, several
times cheaper than ``dataclasses.replace``), so a value handed to a caller is
never changed under it, and identity (``is``) says whether a stored value is
still the one that was read. Here also the shared markers a stored item may
carry (no headers, a payload left in the database) and the UTC normalisation
every stored time goes through. Plain functions, no state.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Final

from xmpp_queue.core.model import Item, copy_item

EMPTY_HEADERS: Mapping[str, str] = MappingProxyType({})
"""Shared by every item without headers (nearly all): an empty dict each is 64 bytes."""

COLD: Final[str] = "\x00payload kept in the database\x00"
"""The ``payload`` of an item whose payload is not in memory, compared by identity.

Payloads are most of a queued item's size, and a deep backlog is read from
its head only, so the tail of a long queue keeps its payloads in the database
(see ``store`` for the policy). A value carrying this marker never
leaves the store: every read that hands items out fetches the payloads first.
"""

PREFETCH = 256
"""A dispatch that meets a cold payload fetches this many of the next ones with it."""


def utc(value: datetime) -> datetime:
    """Aware UTC, as the SQL store returns it; naive datetimes are refused there too."""
    if value.tzinfo is UTC:
        return value
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r}: storage needs aware UTC datetimes")
    return value.astimezone(UTC)


def utc_opt(value: datetime | None) -> datetime | None:
    return None if value is None else utc(value)


def frozen_headers(headers: Mapping[str, str]) -> Mapping[str, str]:
    """Item headers as stored: the shared empty mapping, or a read-only copy."""
    if not headers:
        return EMPTY_HEADERS
    if isinstance(headers, MappingProxyType):
        return headers
    return MappingProxyType(dict(headers))


def stored_item(item: Item, seq: int) -> Item:
    """*item* as the store keeps it: the given seq, UTC times, frozen headers."""
    return copy_item(
        item,
        seq=seq,
        published_at=utc(item.published_at),
        updated_at=utc(item.updated_at),
        locked_at=utc_opt(item.locked_at),
        lock_expires_at=utc_opt(item.lock_expires_at),
        available_at=utc_opt(item.available_at),
        headers=frozen_headers(item.headers),
        priority=int(item.priority),
        expires_at=utc_opt(item.expires_at),
        acked_at=utc_opt(item.acked_at),
    )


def with_payload_value(i: Item, payload: str | None) -> Item:
    """The same item with its payload fetched (or, with COLD, dropped)."""
    return copy_item(i, payload=payload)


def with_lock(i: Item, subid: str, jid: str, locked_at: datetime, expires_at: datetime) -> Item:
    return copy_item(
        i,
        locked_by=subid,
        lock_jid=jid,
        locked_at=locked_at,
        lock_expires_at=expires_at,
        available_at=None,
        deliveries=i.deliveries + 1,
    )


def without_lock(i: Item, available_at: datetime | None) -> Item:
    return copy_item(
        i,
        locked_by=None,
        lock_jid=None,
        locked_at=None,
        lock_expires_at=None,
        available_at=available_at,
    )


def with_deadline(i: Item, expires_at: datetime) -> Item:
    return copy_item(i, lock_expires_at=expires_at)


def with_payload(
    i: Item, payload: str | None, size: int, publisher: str, updated_at: datetime
) -> Item:
    return copy_item(
        i, payload=payload, payload_size=size, publisher=publisher, updated_at=updated_at
    )
