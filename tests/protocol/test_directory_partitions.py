"""The directory's partitioned queues, stanza by stanza: one create makes k
partitions on k shards; the logical name answers as a collection of them."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.kit.placements import MemoryPlacements
from tests.kit.stanzas import ALICE, OWNER, error_of, find
from tests.kit.stanzas import pubsub as ps
from xmpp_queue.core.model import Affiliation, NodeConfig
from xmpp_queue.core.placement import partition_ids, partition_shards
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.xmpp.directory import Directory

PUBLIC = "queue.example.org"
SHARDS = ("p0.queue.example.org", "p1.queue.example.org", "p2.queue.example.org")
DISCO_ITEMS = "http://jabber.org/protocol/disco#items"
DISCO_INFO = "http://jabber.org/protocol/disco#info"


def form(**fields: str) -> str:
    values = "".join(f"<field var='{k}'><value>{v}</value></field>" for k, v in fields.items())
    return (
        "<x xmlns='jabber:x:data' type='submit'><field var='FORM_TYPE' type='hidden'>"
        f"<value>http://jabber.org/protocol/pubsub#node_config</value></field>{values}</x>"
    )


def create(node: str, **fields: str) -> str:
    return ps(f"<create node='{node}'/><configure>{form(**fields)}</configure>")


@pytest.fixture
def placements() -> MemoryPlacements:
    return MemoryPlacements()


@pytest.fixture
def directory(placements: MemoryPlacements) -> Directory:
    return Directory(
        PUBLIC,
        SHARDS,
        placements,
        ServiceAccess.for_domain("example.org"),
        frozenset({"admin@example.org"}),
        queue_defaults=NodeConfig(queue=True),
    )


async def ask(directory: Directory, itype: str, sender: str, body: str) -> ET.Element:
    text = await directory.answer(
        ET.fromstring(
            f"<iq xmlns='jabber:component:accept' type='{itype}' id='r1' from='{sender}' "
            f"to='{PUBLIC}'>{body}</iq>"
        )
    )
    assert text is not None
    return ET.fromstring(f"<s xmlns='jabber:component:accept'>{text}</s>")[0]


async def test_one_create_makes_k_partitions_on_k_shards_owned_by_the_creator(
    directory: Directory, placements: MemoryPlacements
) -> None:
    body = create("orders", **{"pubsub#queue_partitions": "3", "pubsub#queue_lock_timeout": "9"})
    reply = await ask(directory, "set", OWNER, body)
    assert reply.get("type") == "result", ET.tostring(reply).decode()
    assert find(reply, "ps:pubsub/ps:create").get("node") == "orders"
    parts = partition_ids("orders", 3)
    assert [placements.placed[p] for p in parts] == partition_shards("orders", 3, SHARDS)
    assert sorted(placements.placed[p] for p in parts) == sorted(SHARDS)
    owner = OWNER.split("/")[0]
    for p in parts:
        assert placements.configs[p].queue and placements.configs[p].queue_lock_timeout == 9
        assert placements.affiliations[(p, owner)] is Affiliation.OWNER
    # Again: a conflict, for the partitioned create and for a plain one.
    for again in (body, create("orders")):
        assert error_of(await ask(directory, "set", OWNER, again))[:2] == ("cancel", "conflict")


async def test_the_logical_name_is_a_collection_of_its_partitions(
    directory: Directory, placements: MemoryPlacements
) -> None:
    await ask(directory, "set", OWNER, create("orders", **{"pubsub#queue_partitions": "2"}))
    info = await ask(directory, "get", ALICE, f"<query xmlns='{DISCO_INFO}' node='orders'/>")
    identity = info.find(f".//{{{DISCO_INFO}}}identity")
    assert identity is not None and identity.get("type") == "collection"
    fields = {
        f.get("var"): f.findtext("{jabber:x:data}value") for f in info.iter("{jabber:x:data}field")
    }
    assert fields["pubsub#queue_partitions"] == "2"
    items = await ask(directory, "get", ALICE, f"<query xmlns='{DISCO_ITEMS}' node='orders'/>")
    listed = [(i.get("node"), i.get("jid")) for i in items.iter(f"{{{DISCO_ITEMS}}}item")]
    assert listed == [(p, placements.placed[p]) for p in partition_ids("orders", 2)]
    # A request naming the logical name itself: not a node; the text names the partitions.
    reply = await ask(directory, "get", ALICE, ps("<items node='orders'/>"))
    assert error_of(reply)[:2] == ("cancel", "feature-not-implemented")
    assert "orders#0" in ET.tostring(reply).decode()


@pytest.mark.parametrize("count", ["0", "x", "-2", "1000"])
async def test_a_bad_partition_count_is_refused_and_nothing_is_placed(
    directory: Directory, placements: MemoryPlacements, count: str
) -> None:
    reply = await ask(
        directory, "set", OWNER, create("orders", **{"pubsub#queue_partitions": count})
    )
    assert error_of(reply)[:2] == ("modify", "bad-request")
    assert placements.placed == {}


async def test_one_partition_is_an_ordinary_queue(
    directory: Directory, placements: MemoryPlacements
) -> None:
    reply = await ask(directory, "set", OWNER, create("orders", **{"pubsub#queue_partitions": "1"}))
    assert error_of(reply)[:2] == ("modify", "redirect")
    assert placements.partition_of == {}
