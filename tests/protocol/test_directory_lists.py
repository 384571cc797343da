"""All my subscriptions and all my affiliations, asked of the directory (XEP-0060
§5.6, §5.7): one answer over every shard, stanza in, stanza out.

The records come from an in-memory placement table; the SQL behind them runs in
tests/storage/test_shard_store.py and tests/integration/test_shards.py.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from tests.kit.placements import MemoryPlacements
from tests.kit.stanzas import ALICE, NS, error_of, find
from tests.kit.stanzas import pubsub as ps
from tests.protocol.test_directory import DISCO_INFO, PUBLIC, SHARDS, ask, redirect_of
from tests.storage.samples import at, sub
from xmpp_queue.core.account_lists import AccountLists
from xmpp_queue.core.model import Affiliation, Subscription, SubscriptionState
from xmpp_queue.core.placement import node_uri
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.xmpp.directory import Directory

PS = NS["ps"]
ALICE_BARE = "alice@example.org"


@pytest.fixture
def placements() -> MemoryPlacements:
    return MemoryPlacements()


@pytest.fixture
def directory(placements: MemoryPlacements) -> Directory:
    """The directory as a sharded process builds it: with the account lists."""
    access = ServiceAccess.for_domain("example.org")
    return Directory(PUBLIC, SHARDS, placements, access, lists=AccountLists(placements))


def subscribed(node: str, jid: str, subid: str) -> dict[str, str]:
    return {"node": node, "jid": jid, "subscription": "subscribed", "subid": subid}


def rows(reply: ET.Element, name: str) -> list[dict[str, str]]:
    container = find(reply, f"ps:pubsub/ps:{name}")
    assert container.get("node") is None
    return [dict(e.attrib) for e in container]


def spread_over_shards(placements: MemoryPlacements) -> None:
    """Alice's rows on three shards, and a neighbour's that must not show."""
    placements.node("jobs", SHARDS[0])
    placements.node("mail", SHARDS[1])
    placements.node("news", SHARDS[2])
    placements.subscriptions += [
        sub("jobs", f"{ALICE_BARE}/worker-1", "s1", queue_requests=4),
        sub("news", "alice@example.org.evil/x", "s2"),  # not alice: another domain
        sub("news", ALICE_BARE, "s3", created_at=at(1)),
        sub("mail", "bob@example.org/b", "s4"),
        sub("mail", f"{ALICE_BARE}/phone", "s5", created_at=at(2)),
    ]
    placements.affiliations[("jobs", ALICE_BARE)] = Affiliation.PUBLISHER
    placements.affiliations[("mail", ALICE_BARE)] = Affiliation.OUTCAST
    placements.affiliations[("news", ALICE_BARE)] = Affiliation.OWNER
    placements.affiliations[("news", "bob@example.org")] = Affiliation.OWNER


async def test_all_my_subscriptions_come_from_every_shard(
    directory: Directory, placements: MemoryPlacements
) -> None:
    spread_over_shards(placements)
    reply = await ask(directory, "get", ALICE, ps("<subscriptions/>"))
    assert reply.get("type") == "result", ET.tostring(reply).decode()
    assert rows(reply, "subscriptions") == [
        {
            "node": "jobs",
            "jid": f"{ALICE_BARE}/worker-1",
            "subscription": "subscribed",
            "subid": "s1",
        },
        {"node": "news", "jid": ALICE_BARE, "subscription": "subscribed", "subid": "s3"},
        {"node": "mail", "jid": f"{ALICE_BARE}/phone", "subscription": "subscribed", "subid": "s5"},
    ]


async def test_all_my_affiliations_come_from_every_shard(
    directory: Directory, placements: MemoryPlacements
) -> None:
    spread_over_shards(placements)
    reply = await ask(directory, "get", ALICE, ps("<affiliations/>"))
    assert rows(reply, "affiliations") == [
        {"node": "jobs", "affiliation": "publisher"},
        {"node": "mail", "affiliation": "outcast"},
        {"node": "news", "affiliation": "owner"},
    ]


async def test_nothing_held_is_an_empty_list_and_a_pending_one_shows_its_state(
    directory: Directory, placements: MemoryPlacements
) -> None:
    for name in ("subscriptions", "affiliations"):
        reply = await ask(directory, "get", ALICE, ps(f"<{name}/>"))
        assert rows(reply, name) == [], name
    placements.node("club", SHARDS[1])
    pending = replace(sub("club", ALICE_BARE, "s9"), state=SubscriptionState.PENDING)
    placements.subscriptions.append(pending)
    reply = await ask(directory, "get", ALICE, ps("<subscriptions/>"))
    assert [r["subscription"] for r in rows(reply, "subscriptions")] == ["pending"]


async def test_with_a_node_both_are_redirected_to_the_nodes_shard(
    directory: Directory, placements: MemoryPlacements
) -> None:
    spread_over_shards(placements)
    for name in ("subscriptions", "affiliations"):
        reply = await ask(directory, "get", ALICE, ps(f"<{name} node='mail'/>"))
        assert redirect_of(reply) == node_uri(SHARDS[1], "mail")


async def test_the_directory_advertises_both_features(directory: Directory) -> None:
    reply = await ask(directory, "get", ALICE, f"<query xmlns='{DISCO_INFO}'/>")
    features = {f.get("var") for f in reply.iter(f"{{{DISCO_INFO}}}feature")}
    assert {f"{PS}#retrieve-subscriptions", f"{PS}#retrieve-affiliations"} <= features


class CountingPlacements(MemoryPlacements):
    """Counts the account reads (a refused requester must cost none)."""

    account_reads = 0

    async def subscriptions_of(self, account: str) -> list[Subscription]:
        self.account_reads += 1
        return await super().subscriptions_of(account)


async def test_a_stranger_gets_no_list_and_costs_no_read() -> None:
    placements = CountingPlacements()
    spread_over_shards(placements)
    access = ServiceAccess.for_domain("example.org")
    directory = Directory(PUBLIC, SHARDS, placements, access, lists=AccountLists(placements))
    reply = await ask(directory, "get", "mallory@elsewhere.net/x", ps("<subscriptions/>"))
    assert error_of(reply)[:2] == ("cancel", "forbidden")
    assert placements.account_reads == 0
    reply = await ask(directory, "get", ALICE, ps("<subscriptions/>"))
    assert len(rows(reply, "subscriptions")) == 3 and placements.account_reads == 1


async def test_without_account_lists_the_directory_says_so(placements: MemoryPlacements) -> None:
    """A directory built without the lists (no database reader) answers as before."""
    directory = Directory(PUBLIC, SHARDS, placements, ServiceAccess.for_domain("example.org"))
    reply = await ask(directory, "get", ALICE, ps("<subscriptions/>"))
    assert error_of(reply)[:2] == ("cancel", "feature-not-implemented")
    reply = await ask(directory, "get", ALICE, f"<query xmlns='{DISCO_INFO}'/>")
    features = {f.get("var") for f in reply.iter(f"{{{DISCO_INFO}}}feature")}
    assert f"{PS}#retrieve-subscriptions" not in features
