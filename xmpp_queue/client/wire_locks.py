"""Lock requests of a worker (this project's and XEP-0254's), and reading a node's
lock timeout: the stanzas :class:`~xmpp_queue.client.link.PubSubLink` sends for
a held item (nack with or without a reason, extend, delayed unlock, dead-letter).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from xml.etree import ElementTree as ET

from xmpp_queue.client.wire import EXTEND_NS, PUBSUB_NS, QUEUEING_NS, quote_attr

LOCK_TIMEOUT_FIELD = "pubsub#queue_lock_timeout"


def node_info_query(node: str) -> str:
    """XEP-0060 §5.4: a node's disco#info, with its meta-data form."""
    return f"<query xmlns='http://jabber.org/protocol/disco#info' node='{quote_attr(node)}'/>"


def form_value(result: ET.Element, var: str) -> str | None:
    """The first value of field *var* in any data form of *result* (None if absent)."""
    for found in result.iter("{jabber:x:data}field"):
        if found.get("var") == var:
            return found.findtext("{jabber:x:data}value")
    return None


def one_line(text: str, limit: int = 200) -> str:
    """*text* as one line of at most *limit* characters (control characters would
    not be XML; the service refuses longer reasons)."""
    return "".join(c if c >= " " and c != "\x7f" else " " for c in text).strip()[:limit]


def unlock_items(
    node: str, item_ids: Sequence[str], reasons: Mapping[str, str] | None = None
) -> str:
    """This project's batch nack: several items given back at once (all or none),
    each with its reason (why its handler failed) when it has one."""
    reasons = reasons or {}
    items = "".join(
        f"<item id='{quote_attr(i)}' reason='{quote_attr(one_line(reasons[i]))}'/>"
        if reasons.get(i)
        else f"<item id='{quote_attr(i)}'/>"
        for i in item_ids
    )
    return (
        f"<pubsub xmlns='{PUBSUB_NS}'><unlock xmlns='{EXTEND_NS}' node='{quote_attr(node)}'>"
        f"{items}</unlock></pubsub>"
    )


def unlock(node: str, item_id: str, reason: str = "") -> str:
    """XEP-0254 §2.4: give the item back (nack). With a *reason*, this project's
    ``<unlock reason>`` carries it (XEP-0254's unlock has no place for one)."""
    if reason:
        return unlock_items(node, [item_id], {item_id: reason})
    return (
        f"<pubsub xmlns='{PUBSUB_NS}'><unlock xmlns='{QUEUEING_NS}' node='{quote_attr(node)}'>"
        f"<item id='{quote_attr(item_id)}'/></unlock></pubsub>"
    )


def extend(node: str, item_id: str, seconds: int) -> str:
    """This project's extension: keep the lock for *seconds* from now."""
    return (
        f"<pubsub xmlns='{PUBSUB_NS}'><extend xmlns='{EXTEND_NS}' node='{quote_attr(node)}'"
        f" seconds='{int(seconds)}'><item id='{quote_attr(item_id)}'/></extend></pubsub>"
    )


def unlock_later(node: str, item_id: str, delay: int) -> str:
    """This project's delayed nack: give the item back, offered again after *delay* s."""
    return (
        f"<pubsub xmlns='{PUBSUB_NS}'><unlock xmlns='{EXTEND_NS}' node='{quote_attr(node)}'"
        f" delay='{int(delay)}'><item id='{quote_attr(item_id)}'/></unlock></pubsub>"
    )


def dead_letter(node: str, item_id: str, reason: str) -> str:
    """This project's dead-letter-now: the holder sends a poison item to the
    node's dead-letter node, *reason* (one line, at most 200 characters: control
    characters would not be XML) becomes its ``reason`` header."""
    reason = one_line(reason)
    return (
        f"<pubsub xmlns='{PUBSUB_NS}'><dead-letter xmlns='{EXTEND_NS}' node='{quote_attr(node)}'"
        f" reason='{quote_attr(reason)}'><item id='{quote_attr(item_id)}'/></dead-letter></pubsub>"
    )
