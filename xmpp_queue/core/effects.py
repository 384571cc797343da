"""Notifications as data.

The core never sends anything: each service call returns an :class:`Outcome`
whose ``effects`` list the notifications to send, after the change committed.
The glue (``xmpp/text_render.py``, ``xmpp/render.py``) turns each effect into one
``<message>``; tests read them directly. ``to`` is the JID the notification goes
to (a subscription's JID: bare or full).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from xmpp_queue.core.model import NodeConfig, NotificationType, SubscriptionState

T = TypeVar("T")


def headline(config: NodeConfig) -> bool:
    """Whether a node's notifications are ``headline`` messages (``pubsub#notification_type``)."""
    return config.notification_type is NotificationType.HEADLINE


@dataclass(frozen=True, slots=True)
class NoticeItem:
    """One item inside an items notification; ``payload`` None when not delivered,
    ``publisher`` None unless the node exposes publishers (``pubsub#itemreply``).
    ``published_at``: when it was published (a queue's deliveries carry it; the
    XMPP notice does not show it, a push POST does)."""

    item_id: str
    payload: str | None
    publisher: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    published_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ItemNotice:
    """XEP-0060 §7.1.2.1 event with items (for a queue: the items locked to *to*).

    ``headline`` is the node's ``pubsub#notification_type``: headline by default
    for every node type (see ``model.NodeConfig``). What happened, not how to show
    it: the glue picks its renderer by the effect's kind alone.
    """

    to: str
    node: str
    items: tuple[NoticeItem, ...]
    subids: tuple[str, ...] = ()
    headline: bool = True  # message type headline, else normal (pubsub#notification_type)


@dataclass(frozen=True, slots=True)
class RetractNotice:
    """XEP-0060 §7.2.2.1 retract event; on a queue, XEP-0254 §2.3's ack notice."""

    to: str
    node: str
    item_ids: tuple[str, ...]
    subids: tuple[str, ...] = ()
    headline: bool = True


@dataclass(frozen=True, slots=True)
class UnlockNotice:
    """XEP-0254 §2.4: the item is no longer locked to this subscriber."""

    to: str
    node: str
    item_id: str
    reason: str = "unlocked"
    headline: bool = True


@dataclass(frozen=True, slots=True)
class TruncateNotice:
    """A queue dropped its oldest waiting items to make room (``pubsub#queue_overflow``
    drop-oldest): how many and how many payload bytes, so a subscriber knows that
    part of the backlog is gone (the truncation event of Pub/Sub's 2015 design)."""

    to: str
    node: str
    items: int
    payload_bytes: int
    headline: bool = True


@dataclass(frozen=True, slots=True)
class PurgeNotice:
    to: str
    node: str
    headline: bool = True


@dataclass(frozen=True, slots=True)
class DeleteNotice:
    to: str
    node: str
    redirect: str | None = None
    headline: bool = True


@dataclass(frozen=True, slots=True)
class ConfigNotice:
    """XEP-0060 §8.2.4 configuration change; ``config`` None when payloads are off."""

    to: str
    node: str
    config: NodeConfig | None
    headline: bool = True


@dataclass(frozen=True, slots=True)
class SubscriptionNotice:
    """XEP-0060 §8.8.4 / §12.6: a subscription changed by someone else (owner, admin, timer)."""

    to: str
    node: str
    jid: str
    state: SubscriptionState
    subid: str | None = None
    headline: bool = True


@dataclass(frozen=True, slots=True)
class AuthorizationRequest:
    """XEP-0060 §8.6: ask an owner to approve a pending subscription (authorize model)."""

    to: str
    node: str
    jid: str
    subid: str


Effect = (
    ItemNotice
    | RetractNotice
    | UnlockNotice
    | TruncateNotice
    | PurgeNotice
    | DeleteNotice
    | ConfigNotice
    | SubscriptionNotice
    | AuthorizationRequest
)


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """What a service call returns: its result and the notifications to send.

    The glue answers the request first, then sends the effects in order.
    """

    value: T
    effects: tuple[Effect, ...] = ()
