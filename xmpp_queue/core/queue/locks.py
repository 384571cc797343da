"""LockRules: who may release a locked item, in XEP-0254's error order.

Pure. The order (docs/queueing.md) for retract/unlock on a queue node: no such item →
item-not-found; the requester holds no subscription and may not act as a
publisher/owner → forbidden; locked by another subscriber → conflict; not (any
longer) locked by the requester → unexpected-request.

The lock belongs to the subscription that received the item: a full-JID
subscription may be released by that full JID only, a bare-JID subscription by
any resource of the account (``model.jid_matches``). An entity that
unsubscribed keeps the locks it still holds until it acks, unlocks, or the lock
times out (XEP-0254 §4 has workers unsubscribe first and then release).
"""

from __future__ import annotations

import enum

from xmpp_queue.core.errors import Forbidden, ItemLockedByOther, ItemNotFound, NotLockHolder
from xmpp_queue.core.model import Item, jid_matches


class Release(enum.Enum):
    HOLDER = "holder"  # the requester holds the lock: ack / nack / extend
    PRIVILEGED = "privileged"  # a publisher/owner removing someone else's item


def check_release(
    node: str,
    item_id: str,
    item: Item | None,
    requester: str,
    is_subscriber: bool,
    is_privileged: bool,
    action: str,
) -> Release:
    """Decide how a retract/unlock/extend from *requester* is treated, or raise."""
    if item is None:
        raise ItemNotFound(node, item_id)
    holder = item.lock_jid if item.locked_by is not None else None
    if holder is not None and jid_matches(holder, requester):
        return Release.HOLDER
    if not is_subscriber and not is_privileged:
        raise Forbidden(action, f"only the subscriber holding item {item_id} may {action} it")
    if is_privileged and action == "retract":
        return Release.PRIVILEGED
    if holder is not None:
        raise ItemLockedByOther(node, item_id)
    raise NotLockHolder(node, item_id)
