"""Partitioned queues on the directory: one create makes k partitions; the logical
name is a collection of them (docs/scaling.md).

Why on the directory: a partitioned queue spans shards, and the directory is the
one name that sees all of them. A create on the public name whose configure form
has ``pubsub#queue_partitions`` = k (2 or more) makes the partition nodes
``jobs#0`` ... ``jobs#k-1`` at once: each a queue with the form's configuration,
owned by the creator, placed on its own shard (one shard after the other from the
logical name's hash), in one database transaction; each shard loads its
partition on first use or at its next poll. The answer is an ordinary create
result: the creator is not redirected.

The logical name itself is no node: XEP-0060's collection node is the nearest
model, so the directory answers for it:

- disco#info of the logical name: identity ``pubsub``/``collection``, and the
  ``pubsub#meta-data`` form with ``pubsub#queue_partitions`` (how clients learn
  that a name is partitioned: the client library asks this anyway on first
  contact with a node);
- disco#items of it: each partition with the shard that serves it
  (``<item jid='p1...' node='jobs#1'/>``);
- any other request naming it: ``feature-not-implemented`` with a text naming
  the partitions (publish to and subscribe to a partition).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol
from xml.etree import ElementTree as ET

from xmpp_queue.core.errors import BadRequest, PubSubError
from xmpp_queue.core.model import Actor, NodeConfig
from xmpp_queue.core.node_config import apply_config
from xmpp_queue.core.placement import (
    PARTITIONS_FIELD,
    partition_ids,
    partition_shards,
)
from xmpp_queue.xmpp import forms
from xmpp_queue.xmpp.stanzas import PUBSUB

DISCO_INFO = "http://jabber.org/protocol/disco#info"
DISCO_ITEMS = "http://jabber.org/protocol/disco#items"
META_DATA = "http://jabber.org/protocol/pubsub#meta-data"
MAX_PARTITIONS = 256


class PartitionTable(Protocol):
    """What the directory needs of the placement table for partitioned queues."""

    async def partitions(self, logical: str) -> list[tuple[str, str]]: ...

    async def create_partitions(
        self,
        logical: str,
        placed: list[tuple[str, str]],
        config: NodeConfig,
        creator: str,
        owner: str | None,
    ) -> bool: ...


def requested_partitions(iq: ET.Element) -> tuple[int, forms.FormValues] | None:
    """(k, the rest of the configure form) when a create asks for partitions."""
    configure = iq.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}configure")
    x = forms.find_form(configure)
    if x is None:
        return None
    values = dict(forms.read_form(x).values)
    raw = values.pop(PARTITIONS_FIELD, None)
    if not raw or not raw[0].strip():
        return None
    try:
        count = int(raw[0])
    except ValueError:
        raise BadRequest(f"{PARTITIONS_FIELD}: '{raw[0]}' is not a whole number") from None
    if count == 1:
        return None  # one partition: an ordinary queue
    if not 2 <= count <= MAX_PARTITIONS:
        raise BadRequest(f"{PARTITIONS_FIELD}: between 2 and {MAX_PARTITIONS}")
    return count, values


async def create_partitioned(
    table: PartitionTable,
    shards: Sequence[str],
    defaults: NodeConfig,
    node: str,
    asked: tuple[int, forms.FormValues],
    actor: Actor,
) -> bool:
    """Create *node*'s partitions; False when a name is taken (the module docstring)."""
    count, values = asked
    if "#" in node:
        raise BadRequest("a partitioned queue's name may not contain '#'")
    try:
        config = replace(apply_config(defaults, values), queue=True)
    except PubSubError as exc:
        raise BadRequest(str(exc)) from None
    ids = partition_ids(node, count)
    placed = list(zip(ids, partition_shards(node, count, shards), strict=True))
    owner = None if actor.system else actor.bare
    return await table.create_partitions(node, placed, config, actor.jid, owner)


def collection_info(node: str, count: int) -> str:
    """disco#info of a partitioned queue's logical name (the module docstring)."""
    return (
        f"<query xmlns='{DISCO_INFO}' node='{_a(node)}'>"
        "<identity category='pubsub' type='collection'/>"
        f"<feature var='{PUBSUB}'/>"
        f"<x xmlns='jabber:x:data' type='result'>"
        f"<field var='FORM_TYPE' type='hidden'><value>{META_DATA}</value></field>"
        f"<field var='{PARTITIONS_FIELD}'><value>{count}</value></field>"
        "</x></query>"
    )


def collection_items(node: str, partitions: Sequence[tuple[str, str]]) -> str:
    """disco#items of the logical name: each partition with its shard."""
    items = "".join(f"<item jid='{_a(s)}' node='{_a(n)}'/>" for n, s in partitions)
    return f"<query xmlns='{DISCO_ITEMS}' node='{_a(node)}'>{items}</query>"


def _a(value: str) -> str:
    return (
        value.replace("&", "&amp;").replace("<", "&lt;").replace("'", "&apos;").replace(">", "&gt;")
    )
