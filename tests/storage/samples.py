"""Small builders for contract tests: a node, an item, a subscription at fixed times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from xmpp_queue.core.model import Item, Node, NodeConfig, Subscription, SubscriptionState

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """T0 plus *seconds*."""
    return T0 + timedelta(seconds=seconds)


def node(node_id: str = "jobs", **config: object) -> Node:
    return Node(node_id, NodeConfig(**config), T0, "owner@example.org/desk")  # type: ignore[arg-type]


def item(node_id: str, item_id: str, payload: str | None = "<job/>", **extra: object) -> Item:
    fields: dict[str, object] = {
        "node": node_id,
        "item_id": item_id,
        "seq": 0,
        "publisher": "pub@example.org/engine",
        "payload": payload,
        "published_at": T0,
        "updated_at": T0,
        "payload_size": len(payload or ""),
    }
    fields.update(extra)
    return Item(**fields)  # type: ignore[arg-type]


def sub(
    node_id: str,
    jid: str,
    subid: str,
    queue_requests: int | None = None,
    created_at: datetime = T0,
) -> Subscription:
    return Subscription(
        node=node_id,
        jid=jid,
        subid=subid,
        state=SubscriptionState.SUBSCRIBED,
        created_at=created_at,
        queue_requests=queue_requests,
    )
