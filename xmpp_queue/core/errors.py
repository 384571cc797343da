"""The domain's error vocabulary.

Each class is named for what happened and carries structured context; none
knows a stanza condition or namespace. ``xmpp/errors.py`` holds the one table
that maps these to XMPP errors (type, condition, pubsub#errors child), and
admin commands turn them into notes. A guard raises before any write, so a
raised error never leaves a change behind.
"""

from __future__ import annotations

from collections.abc import Sequence


class PubSubError(Exception):
    """Base of every error a client can cause. ``text`` is safe to show to it."""

    def __init__(self, text: str = "") -> None:
        super().__init__(text or self.__class__.__doc__ or self.__class__.__name__)
        self.text = text


# --- request shape -----------------------------------------------------------------


class BadRequest(PubSubError):
    """The request is malformed."""


class NodeIdRequired(PubSubError):
    """The request needs a node id and has none."""


class ItemRequired(PubSubError):
    """The request needs an item id and has none."""


class JidRequired(PubSubError):
    """The request needs a jid attribute and has none."""


class InvalidJid(PubSubError):
    """The JID in the request is not the requester's own (XEP-0060 §6.1.3.1)."""


class InvalidPayload(PubSubError):
    """The payload is not one well-formed XML element."""


class PayloadRequired(PubSubError):
    """The node delivers payloads and the publish has none."""


class ItemForbidden(PubSubError):
    """The node is transient and notification-only and the publish carries an item."""


class PayloadTooBig(PubSubError):
    """The payload is larger than the node's pubsub#max_payload_size."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"payload of {size} bytes exceeds the node's limit of {limit} bytes")
        self.size = size
        self.limit = limit


class AttributeRefused(PubSubError):
    """An item attribute the node does not take: a reserved name or a bad value."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"attribute {name!r}: {reason}")
        self.name = name


class AttributeTooBig(PubSubError):
    """An item's attributes exceed one of the node's limits (named in the text)."""

    def __init__(self, limit_field: str, limit: int, actual: int) -> None:
        super().__init__(f"attributes exceed {limit_field} ({actual} > {limit})")
        self.limit_field = limit_field


class DelayTooLong(PubSubError):
    """A delayed publish asks for a start past the node's pubsub#queue_max_delay."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"start is past pubsub#queue_max_delay ({limit} seconds from now)")
        self.limit = limit


class FeatureNotImplemented(PubSubError):
    """The service does not implement this feature."""

    def __init__(self, feature: str, text: str = "") -> None:
        super().__init__(text or f"feature not implemented: {feature}")
        self.feature = feature


# --- nodes ---------------------------------------------------------------------------


class NodeNotFound(PubSubError):
    def __init__(self, node: str) -> None:
        super().__init__(f"no such node: {node}")
        self.node = node


class NodeExists(PubSubError):
    def __init__(self, node: str) -> None:
        super().__init__(f"node already exists: {node}")
        self.node = node


class InvalidNodeConfig(PubSubError):
    """A node configuration value is unknown or out of range (XEP-0060 §8.2.5.2)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class UnsupportedAccessModel(InvalidNodeConfig):
    """pubsub#access_model names a model the service does not offer (§8.1.3)."""


class PreconditionNotMet(PubSubError):
    """A publish-options precondition does not match the node config (§7.1.5)."""

    def __init__(self, field: str, reason: str = "") -> None:
        super().__init__(f"precondition not met: {field}" + (f" ({reason})" if reason else ""))
        self.field = field


class NodeFull(PubSubError):
    """The node holds pubsub#max_items items and rejects more."""


# --- access ----------------------------------------------------------------------------


class Forbidden(PubSubError):
    """The requester may not do this."""

    def __init__(self, action: str, text: str = "") -> None:
        super().__init__(text or f"not allowed to {action}")
        self.action = action


class Outcast(PubSubError):
    """The requester is banned from the node (affiliation outcast)."""


class ClosedNode(PubSubError):
    """The node's access model is whitelist and the requester is not on it."""


class PendingSubscription(PubSubError):
    """The subscription waits for an owner's approval."""


class SubscriptionRequired(PubSubError):
    """Only approved subscribers may retrieve this node's items (§6.5.9.3); a pending
    subscription is not enough."""


# --- subscriptions ---------------------------------------------------------------------


class NotSubscribed(PubSubError):
    """The requester has no such subscription."""

    def __init__(self, node: str, jid: str, modify: bool = False) -> None:
        super().__init__(f"{jid} is not subscribed to {node}")
        self.node = node
        self.jid = jid
        # §6.2.3.2 answers type cancel, §6.3.4.2 type modify.
        self.modify = modify


class SubIdRequired(PubSubError):
    """The entity has several subscriptions; the request must say which (subid)."""


class InvalidSubId(PubSubError):
    """No subscription has this subid."""


class InvalidOptions(PubSubError):
    """A subscription option is unknown or has a bad value (§6.3.6.2)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class QueueConfigurationRequired(PubSubError):
    """XEP-0254 §2.1: a queue subscription must say pubsub#queue_requests.

    ``fields`` names the required subscribe_options fields, so the glue can send
    the options form back with the error.
    """

    def __init__(self, node: str, jid: str, fields: Sequence[str]) -> None:
        super().__init__(f"subscribing to queue node {node} requires pubsub#queue_requests")
        self.node = node
        self.jid = jid
        self.fields = tuple(fields)


# --- items and locks -------------------------------------------------------------------


class ItemNotFound(PubSubError):
    def __init__(self, node: str, item_id: str) -> None:
        super().__init__(f"no item {item_id} in node {node}")
        self.node = node
        self.item_id = item_id


class SnapshotNotFound(PubSubError):
    """A seek to, or deletion of, a snapshot the queue does not have."""

    def __init__(self, node: str, name: str) -> None:
        super().__init__(f"no snapshot {name} of node {node}")
        self.node = node
        self.name = name


class PageNotFound(PubSubError):
    """The item an XEP-0059 after/before refers to no longer exists."""


class NotAQueue(PubSubError):
    """A queue-only request (unlock, extend) was sent for an ordinary node."""

    def __init__(self, node: str) -> None:
        super().__init__(f"node {node} is not a queue")
        self.node = node


class ItemLockedByOther(PubSubError):
    """XEP-0254 §2.3/§2.4: the item is locked by another subscriber (conflict)."""

    def __init__(self, node: str, item_id: str) -> None:
        super().__init__(f"item {item_id} is locked by another subscriber")
        self.node = node
        self.item_id = item_id


class NotLockHolder(PubSubError):
    """XEP-0254 §2.3/§2.4: the item is no longer locked by the requester (unexpected-request)."""

    def __init__(self, node: str, item_id: str) -> None:
        super().__init__(f"item {item_id} is no longer locked by you")
        self.node = node
        self.item_id = item_id


# --- the service itself -----------------------------------------------------------------


class StorageUnavailable(PubSubError):
    """The database cannot be reached; try again later."""


class NotActive(StorageUnavailable):
    """This process lost its lease to another (high availability): nothing it does
    commits any more; the client retries and reaches the active process."""
