"""Rows to domain values and back, for the SQL store.

Kept apart from the statements so each reads on its own. JSON columns hold
small open-ended maps (node config, subscribe options, item headers); their
formats are the storage layer's, and decoding is lenient about what a newer or
older version may have written: unknown config keys are ignored and missing
ones take the NodeConfig default, so adding a config field needs no migration.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import Item, Node, NodeConfig, Subscription, SubscriptionState
from xmpp_queue.storage import schema

# A SQLAlchemy Row, or a plain tuple from the raw SQLite cursor (sqlite_fast).
AnyRow = Sequence[Any]

_CONFIG_TYPES: dict[str, Any] = typing.get_type_hints(NodeConfig)


def encode_config(config: NodeConfig) -> str:
    # StrEnum members are str, so json writes their values.
    return json.dumps(dataclasses.asdict(config), sort_keys=True, separators=(",", ":"))


def decode_config(text: str) -> NodeConfig:
    raw = json.loads(text)
    values: dict[str, Any] = {}
    for key, value in raw.items():
        kind = _CONFIG_TYPES.get(key)
        if kind is None:
            continue  # a field this version does not know
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            value = kind(value)
        values[key] = value
    return NodeConfig(**values)


def encode_options(options: Mapping[str, tuple[str, ...]]) -> str | None:
    if not options:
        return None
    return json.dumps({k: list(v) for k, v in options.items()}, separators=(",", ":"))


def decode_options(text: str | None) -> dict[str, tuple[str, ...]]:
    if not text:
        return {}
    return {k: tuple(v) for k, v in json.loads(text).items()}


def encode_headers(headers: Mapping[str, str]) -> str | None:
    """None for no headers: almost every item has none, so store nothing."""
    if not headers:
        return None
    return json.dumps(dict(headers), separators=(",", ":"))


def decode_headers(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    decoded: dict[str, str] = json.loads(text)
    return decoded


# --- nodes --------------------------------------------------------------------------

NODE_COLUMNS = (
    schema.nodes.c.node_id,
    schema.nodes.c.config,
    schema.nodes.c.created_at,
    schema.nodes.c.creator,
)


def node_from_row(row: AnyRow) -> Node:
    return Node(node_id=row[0], config=decode_config(row[1]), created_at=row[2], creator=row[3])


def node_values(node: Node) -> dict[str, Any]:
    return {
        "node_id": node.node_id,
        "config": encode_config(node.config),
        "created_at": node.created_at,
        "creator": node.creator,
    }


# --- subscriptions --------------------------------------------------------------------

_s = schema.subscriptions.c
SUBSCRIPTION_COLUMNS = (
    _s.node_id,
    _s.jid,
    _s.subid,
    _s.state,
    _s.created_at,
    _s.queue_requests,
    _s.options,
    _s.last_activity,
)


def subscription_from_row(row: AnyRow) -> Subscription:
    return Subscription(
        node=row[0],
        jid=row[1],
        subid=row[2],
        state=SubscriptionState(row[3]),
        created_at=row[4],
        queue_requests=row[5],
        options=decode_options(row[6]),
        last_activity=row[7],
    )


def subscription_values(sub: Subscription) -> dict[str, Any]:
    return {
        "node_id": sub.node,
        "subid": sub.subid,
        "jid": sub.jid,
        "state": sub.state.value,
        "created_at": sub.created_at,
        "queue_requests": sub.queue_requests,
        "options": encode_options(sub.options),
        "last_activity": sub.last_activity,
    }


# --- items ------------------------------------------------------------------------------

_i = schema.items.c
ITEM_COLUMNS = (
    _i.node_id,
    _i.item_id,
    _i.seq,
    _i.publisher,
    _i.payload,
    _i.published_at,
    _i.updated_at,
    _i.payload_size,
    _i.locked_by,
    _i.lock_jid,
    _i.locked_at,
    _i.lock_expires_at,
    _i.available_at,
    _i.deliveries,
    _i.headers,
)
# The same without the payload, for bulk reads whose callers do not need it (purge).
ITEM_COLUMNS_NO_PAYLOAD = tuple(c for c in ITEM_COLUMNS if c is not _i.payload)


def item_from_row(row: AnyRow) -> Item:
    return Item(
        node=row[0],
        item_id=row[1],
        seq=row[2],
        publisher=row[3],
        payload=row[4],
        published_at=row[5],
        updated_at=row[6],
        payload_size=row[7],
        locked_by=row[8],
        lock_jid=row[9],
        locked_at=row[10],
        lock_expires_at=row[11],
        available_at=row[12],
        deliveries=row[13],
        headers=decode_headers(row[14]),
    )


def item_from_row_no_payload(row: AnyRow) -> Item:
    return Item(
        node=row[0],
        item_id=row[1],
        seq=row[2],
        publisher=row[3],
        payload=None,
        published_at=row[4],
        updated_at=row[5],
        payload_size=row[6],
        locked_by=row[7],
        lock_jid=row[8],
        locked_at=row[9],
        lock_expires_at=row[10],
        available_at=row[11],
        deliveries=row[12],
        headers=decode_headers(row[13]),
    )


def item_values(item: Item) -> dict[str, Any]:
    """Insert values; ``seq`` is left to the database."""
    return {
        "node_id": item.node,
        "item_id": item.item_id,
        "publisher": item.publisher,
        "payload": item.payload,
        "payload_size": item.payload_size,
        "published_at": item.published_at,
        "updated_at": item.updated_at,
        "locked_by": item.locked_by,
        "lock_jid": item.lock_jid,
        "locked_at": item.locked_at,
        "lock_expires_at": item.lock_expires_at,
        "available_at": item.available_at,
        "deliveries": item.deliveries,
        "headers": encode_headers(item.headers),
    }


# --- ledger -------------------------------------------------------------------------------

_l = schema.ledger.c
LEDGER_COLUMNS = (
    _l.at,
    _l.kind,
    _l.node,
    _l.item_id,
    _l.subscriber,
    _l.deliveries,
    _l.payload_size,
)


def event_values(event: LedgerEvent) -> dict[str, Any]:
    # Keys are the Column keys (attribute names), which equal ledger_names' names.
    return {
        "at": event.at,
        "kind": event.kind.value,
        "node": event.node,
        "item_id": event.item_id,
        "subscriber": event.subscriber,
        "deliveries": event.deliveries,
        "payload_size": event.payload_size,
    }


def event_from_row(row: AnyRow) -> LedgerEvent:
    return LedgerEvent(
        at=row[0],
        kind=EventKind(row[1]),
        node=row[2],
        item_id=row[3],
        subscriber=row[4],
        deliveries=row[5],
        payload_size=row[6],
    )
