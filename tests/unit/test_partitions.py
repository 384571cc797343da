"""Partitioned queues without a server: names, shards, the key's partition, the
client learning a logical name's partitions, and a worker's window spread."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from xmpp_queue.client.placement import Placements
from xmpp_queue.client.worker_partitions import spread
from xmpp_queue.core.placement import (
    partition_ids,
    partition_shards,
    pick_partition,
    pick_shard,
)
from xmpp_queue.xmpp.directory_partitions import collection_info

SHARDS = ("p0.q.example.org", "p1.q.example.org", "p2.q.example.org")
PUBLIC = "q.example.org"


def test_k_partitions_on_k_shards_land_on_k_different_shards() -> None:
    assert partition_ids("jobs", 3) == ["jobs#0", "jobs#1", "jobs#2"]
    shards = partition_shards("jobs", 3, SHARDS)
    assert sorted(shards) == sorted(SHARDS)
    assert shards[0] == pick_shard("jobs", SHARDS)  # from the logical name's hash
    assert partition_shards("jobs", 5, SHARDS)[3:] == shards[:2]  # more: round again


@given(st.text(min_size=1), st.integers(2, 16))
def test_one_key_always_goes_to_one_partition(key: str, k: int) -> None:
    parts = partition_ids("jobs", k)
    assert pick_partition(parts, key) == pick_partition(list(parts), key)


def test_keys_spread_over_the_partitions() -> None:
    parts = partition_ids("jobs", 4)
    counts = Counter(pick_partition(parts, f"customer-{n}") for n in range(4000))
    assert set(counts) == set(parts) and min(counts.values()) > 800


def test_a_window_is_spread_evenly_and_each_partition_gets_one() -> None:
    assert spread(8, 3) == [3, 3, 2]
    assert spread(6, 3) == [2, 2, 2]
    assert spread(2, 3) == [1, 1, 1]  # fewer than partitions: the window grows to k


class Directory:
    """The public name answering disco#info of a logical name as a collection."""

    async def call(
        self, to: str, body: str, iq_type: str = "set", reply_timeout: float | None = 30.0
    ) -> ET.Element:
        node = ET.fromstring(body).get("node") or ""
        if node == "orders":
            return ET.fromstring(f"<iq type='result'>{collection_info(node, 3)}</iq>")
        return ET.fromstring("<iq type='result'><query xmlns='x'/></iq>")


async def test_the_client_learns_the_partitions_on_first_contact() -> None:
    placements = Placements(PUBLIC)
    assert await placements.resolve(Directory(), "orders") == PUBLIC
    assert placements.partitions_of("orders") == ["orders#0", "orders#1", "orders#2"]
    assert await placements.resolve(Directory(), "plain") == PUBLIC
    assert placements.partitions_of("plain") is None
    assert placements.lookups == 2
