"""Value types of the pubsub/queue domain.

Plain frozen dataclasses and enums: what the service reasons about, what the
repositories store and what the glue renders. Nothing here knows XML, sockets
or SQL. JIDs are plain strings; the glue normalises them (slixmpp's JID) before
they reach the core, so the core only needs to split off a resource.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any


def bare(jid: str) -> str:
    """The bare JID (local@domain) of a full or bare JID string."""
    return jid.split("/", 1)[0]


def jid_matches(subscription_jid: str, requester: str) -> bool:
    """Whether *requester* may act for a subscription held by *subscription_jid*.

    A full-JID subscription belongs to that resource alone; a bare-JID
    subscription to every resource of the account (docs/queueing.md: lock holder identity).
    """
    if "/" in subscription_jid:
        return subscription_jid == requester
    return subscription_jid == bare(requester)


class Affiliation(enum.StrEnum):
    """XEP-0060 §4.1 affiliations, strongest first."""

    OWNER = "owner"
    PUBLISHER = "publisher"
    PUBLISH_ONLY = "publish-only"
    MEMBER = "member"
    NONE = "none"
    OUTCAST = "outcast"


class SubscriptionState(enum.StrEnum):
    """XEP-0060 §4.2 subscription states."""

    NONE = "none"
    PENDING = "pending"
    UNCONFIGURED = "unconfigured"
    SUBSCRIBED = "subscribed"


class AccessModel(enum.StrEnum):
    OPEN = "open"
    WHITELIST = "whitelist"
    AUTHORIZE = "authorize"


class PublishModel(enum.StrEnum):
    PUBLISHERS = "publishers"
    SUBSCRIBERS = "subscribers"
    OPEN = "open"


class NotificationType(enum.StrEnum):
    """XEP-0060 ``pubsub#notification_type``: the ``<message/>`` type of notifications."""

    HEADLINE = "headline"
    NORMAL = "normal"


class ItemReply(enum.StrEnum):
    """XEP-0060 ``pubsub#itemreply`` (§12.x "Associating Events and Payloads").

    ``publisher`` puts the publisher's JID on items in notifications and in every
    item retrieval; ``none`` leaves it out. ``owner`` is not offered: the spec's
    interoperability note says it is not widely supported.
    """

    NONE = "none"
    PUBLISHER = "publisher"


class SendLastPublished(enum.StrEnum):
    NEVER = "never"
    ON_SUB = "on_sub"
    ON_SUB_AND_PRESENCE = "on_sub_and_presence"


@dataclass(frozen=True, slots=True)
class Actor:
    """Who asks. ``jid`` is the full JID of the requester as the server stamped it.

    ``system`` is the service itself (admin commands, timers): it may do
    everything, like Prosody's ``actor = true``.
    """

    jid: str
    system: bool = False
    # Derived once: access checks ask for it many times per operation.
    bare: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "bare", bare(self.jid))


SYSTEM = Actor(jid="", system=True)


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """A node's configuration (XEP-0060 §16.4 node_config plus our queue fields).

    ``max_items`` None means "max" (no limit). Queue fields only matter when
    ``queue`` is true (docs/queueing.md). The queue defaults are the safe ones: a
    poison item is offered at most ``queue_max_deliveries`` times, with a retry
    delay that doubles from ``queue_retry_delay`` seconds, then dead-lettered
    (never dropped); ``queue_retry_delay`` 0 is XEP-0254's immediate hand-over.
    ``notification_type`` is headline for every node type: a notice for an
    offline or departed recipient is dropped by the server rather than stored
    offline, which for a queue item is right (the item stays locked in the queue
    and comes back by release or lock timeout; a stored copy would be worked on
    again, late, after it went to another worker).
    """

    title: str = ""
    description: str = ""
    payload_type: str = ""
    max_items: int | None = None
    persist_items: bool = True
    deliver_payloads: bool = True
    notify_retract: bool = True
    notify_delete: bool = True
    notify_config: bool = False
    access_model: AccessModel = AccessModel.OPEN
    publish_model: PublishModel = PublishModel.PUBLISHERS
    max_payload_size: int = 262144
    send_last_published_item: SendLastPublished = SendLastPublished.NEVER
    notification_type: NotificationType = NotificationType.HEADLINE
    itemreply: ItemReply = ItemReply.NONE
    queue: bool = False
    queue_lock_timeout: int = 300
    queue_max_deliveries: int = 10
    queue_dead_letter: str = ""
    queue_retry_delay: int = 1
    queue_retry_delay_max: int = 600
    # The message model (docs/queueing.md, "Attributes" and what rides on them).
    attributes_max: int = 32
    attribute_name_max: int = 128
    attribute_value_max: int = 1024
    attributes_max_bytes: int = 8192
    item_expire: int = 0  # seconds; 0 = items never expire
    queue_expire_action: str = "dead-letter"  # or "drop"
    queue_delay: int = 0  # seconds every item is held back unless it says otherwise
    queue_max_delay: int = 7 * 86400
    queue_priority_age: int = 60  # seconds after which a waiting item counts as high
    queue_dedup_window: int = 0  # seconds; 0 = off
    max_bytes: int | None = None  # payload bytes the node holds; None = no limit
    queue_overflow: str = "refuse"  # past max_items/max_bytes: or "drop-oldest"
    # Ordered work (docs/queueing.md, "Ordering keys" and "Single active consumer").
    queue_ordered: bool = False  # at most one item per ordering key in flight
    queue_single_active: bool = False  # one subscriber at a time receives
    # Topics (docs/queueing.md, "Topics and subscriptions"): the node this queue is
    # bound to (every item published there is copied here) and the filter over attributes.
    queue_topic: str = ""
    queue_filter: str = ""
    queue_expire_after: int = 0  # seconds a bound queue may go unsubscribed; 0 = off
    # Retention and replay (docs/queueing.md, "Retention, seek and snapshots").
    queue_retain_acked: int = 0  # seconds an acked item is kept for a seek; 0 = off


@dataclass(frozen=True, slots=True)
class Node:
    node_id: str
    config: NodeConfig
    created_at: datetime
    creator: str = ""


@dataclass(frozen=True, slots=True)
class Item:
    """A stored item. ``payload`` is opaque to the core (canonical XML made by the glue).

    Queue state: ``locked_by`` is the subid of the subscription holding the item,
    ``lock_jid`` its JID, ``lock_expires_at`` the deadline; ``available_at`` keeps
    an unlocked item out of dispatch until then (retry delay); ``deliveries``
    counts hand-outs. ``headers`` carry metadata such as a dead letter's origin
    (rendered as XEP-0131 SHIM headers). ``ordering_key`` (from the publisher's
    ``ordering-key`` attribute) groups items whose order matters on an ordered queue.
    ``acked_at`` is set only on a retained item (``pubsub#queue_retain_acked``):
    acked, kept for a seek, never handed out, never counted in the backlog.
    """

    node: str
    item_id: str
    seq: int
    publisher: str
    payload: str | None
    published_at: datetime
    updated_at: datetime
    payload_size: int = 0
    locked_by: str | None = None
    lock_jid: str | None = None
    locked_at: datetime | None = None
    lock_expires_at: datetime | None = None
    available_at: datetime | None = None
    deliveries: int = 0
    headers: Mapping[str, str] = field(default_factory=dict)
    priority: int = 1
    expires_at: datetime | None = None
    ordering_key: str | None = None
    acked_at: datetime | None = None


class Urgency(enum.IntEnum):
    """An item's priority: XEP-0131's registered ``Urgency`` header values.

    Higher is handed out first; an item without the header is ``medium``.
    """

    LOW = 0
    MEDIUM = 1
    HIGH = 2


def _item_copier() -> Callable[..., Item]:
    """Build ``copy(item, **changes)`` once from :class:`Item`'s fields.

    The one place an item is copied with changes: a new field needs no edit
    here. Generated source, so a copy is one constructor call with keyword
    defaults, several times cheaper than ``dataclasses.replace`` (which
    validates and re-runs ``__init__`` through introspection on every call);
    the store copies an item on every lock, unlock and deadline change.
    """
    names = [f.name for f in fields(Item)]
    params = ", ".join(f"{n}=_KEEP" for n in names)
    args = ", ".join(f"i.{n} if {n} is _KEEP else {n}" for n in names)
    source = f"def copy_item(i, *, {params}):\n    return Item({args})\n"
    scope: dict[str, Any] = {"Item": Item, "_KEEP": _KEEP}
    exec(source, scope)
    copier: Callable[..., Item] = scope["copy_item"]
    copier.__doc__ = "*i* with the given fields changed (see ``_item_copier``)."
    return copier


_KEEP: Any = object()
copy_item = _item_copier()


@dataclass(frozen=True, slots=True)
class NewItem:
    """What a publisher hands in: one typed value from every transport to the store.

    ``item_id`` None asks the service for one; ``size`` is the payload's stored
    byte count (checked against ``pubsub#max_payload_size``); ``attributes`` are
    the publisher's key/value pairs (XEP-0131 headers on the wire), checked
    against the node's limits by :mod:`xmpp_queue.core.attributes`.
    """

    item_id: str | None
    payload: str | None
    size: int = 0
    attributes: Mapping[str, str] = field(default_factory=dict)


def new_item(
    node_id: str,
    item_id: str,
    publisher: str,
    payload: str | None,
    size: int,
    headers: Mapping[str, str],
    at: datetime,
    *,
    priority: int = Urgency.MEDIUM,
    expires_at: datetime | None = None,
    available_at: datetime | None = None,
    ordering_key: str | None = None,
) -> Item:
    """An item as published (or moved in) at *at*: unlocked, never delivered; the
    store gives it its ``seq``. *available_at* holds it back (a delayed publish)."""
    return Item(
        node=node_id,
        item_id=item_id,
        seq=0,
        publisher=publisher,
        payload=payload,
        published_at=at,
        updated_at=at,
        payload_size=size,
        available_at=available_at,
        headers=dict(headers),
        priority=priority,
        expires_at=expires_at,
        ordering_key=ordering_key,
    )


@dataclass(frozen=True, slots=True)
class Subscription:
    """A subscription: (node, jid, subid). ``options`` are raw subscribe_options values.

    ``queue_requests`` is XEP-0254's parallelism window (None on ordinary nodes).
    """

    node: str
    jid: str
    subid: str
    state: SubscriptionState
    created_at: datetime
    queue_requests: int | None = None
    options: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    last_activity: datetime | None = None


@dataclass(frozen=True, slots=True)
class AffiliationEntry:
    node: str
    jid: str
    affiliation: Affiliation


@dataclass(frozen=True, slots=True)
class PageRequest:
    """XEP-0059 request: ``max`` items, ``after``/``before`` item ids, or ``index``.

    ``before == ""`` asks for the last page (§2.5).
    """

    max: int | None = None
    after: str | None = None
    before: str | None = None
    index: int | None = None


@dataclass(frozen=True, slots=True)
class ItemPage:
    """Items in publish order, with XEP-0059 paging facts when paging was asked.

    ``show_publisher``: the node (``pubsub#itemreply``) or the service exposes
    publishers, so every item carries its ``publisher`` attribute (§7.1.2.x).
    ``paged``: the answer must carry an XEP-0059 ``<set/>`` (paging was asked, or
    the service's page limit cut the answer). ``backward``: a ``before`` page,
    which a transport that must shorten it shortens from its start.
    """

    items: tuple[Item, ...]
    count: int
    first_index: int | None = None
    paged: bool = False
    show_publisher: bool = False
    backward: bool = False


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A queue's named snapshot (docs/queueing.md, "Retention, seek and snapshots").

    ``mark_seq`` is the first seq not yet handed out when it was taken: a seek
    to it brings back every retained item published after (seq >= mark_seq) or
    acked after ``created_at`` (so unacked then).
    """

    node: str
    name: str
    created_at: datetime
    mark_seq: int
