"""Contract: nodes, affiliations and subscriptions behave the same on every store."""

from __future__ import annotations

import dataclasses
from datetime import UTC, timedelta, timezone

import pytest

from xmpp_queue.core.errors import NodeExists
from xmpp_queue.core.model import (
    AccessModel,
    Affiliation,
    AffiliationEntry,
    NodeConfig,
    PublishModel,
    SendLastPublished,
    SubscriptionState,
)
from xmpp_queue.core.ports import Store

from .samples import T0, at, item, node, sub

# --- nodes -----------------------------------------------------------------------------


async def test_node_round_trips_with_its_whole_config(store: Store) -> None:
    config = NodeConfig(
        title="Jobs",
        max_items=None,
        persist_items=False,
        access_model=AccessModel.WHITELIST,
        publish_model=PublishModel.OPEN,
        send_last_published_item=SendLastPublished.ON_SUB,
        queue=True,
        queue_lock_timeout=30,
        queue_max_deliveries=5,
        queue_dead_letter="jobs/dead",
        queue_retry_delay=2,
    )
    async with store.transaction() as tx:
        await tx.nodes.add(dataclasses.replace(node("jobs"), config=config))
        await tx.commit()
    async with store.transaction() as tx:
        got = await tx.nodes.get("jobs")
        assert await tx.nodes.get("missing") is None
    assert got is not None
    assert got.config == config
    assert got.creator == "owner@example.org/desk"
    assert got.created_at == T0 and got.created_at.utcoffset() == timedelta(0)


async def test_adding_a_taken_node_id_raises_node_exists_and_keeps_the_transaction(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        await tx.nodes.add(node("jobs"))
        with pytest.raises(NodeExists) as raised:
            await tx.nodes.add(node("jobs", title="other"))
        assert raised.value.node == "jobs"
        # The transaction is still usable (no aborted PostgreSQL transaction).
        await tx.nodes.add(node("mail"))
        await tx.commit()
    async with store.transaction() as tx:
        assert [n.node_id for n in await tx.nodes.all()] == ["jobs", "mail"]
        jobs = await tx.nodes.get("jobs")
        assert jobs is not None and jobs.config.title == ""


async def test_update_config_replaces_the_config(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.nodes.add(node("jobs"))
        await tx.nodes.update_config("jobs", NodeConfig(title="new", max_items=10, queue=True))
        await tx.commit()
    async with store.transaction() as tx:
        got = await tx.nodes.get("jobs")
    assert got is not None and got.config == NodeConfig(title="new", max_items=10, queue=True)


async def test_all_lists_nodes_by_id(store: Store) -> None:
    async with store.transaction() as tx:
        for node_id in ("b", "c/dead-letter", "a"):
            await tx.nodes.add(node(node_id))
        assert [n.node_id for n in await tx.nodes.all()] == ["a", "b", "c/dead-letter"]


async def test_removing_a_node_removes_its_items_subscriptions_and_affiliations(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        for node_id in ("gone", "kept"):
            await tx.nodes.add(node(node_id))
            await tx.items.put(item(node_id, "i1"))
            await tx.subscriptions.add(sub(node_id, "alice@example.org", f"s-{node_id}"))
            await tx.affiliations.set(node_id, "owner@example.org", Affiliation.OWNER)
        await tx.commit()
    async with store.transaction() as tx:
        await tx.nodes.remove("gone")
        await tx.nodes.remove("never-existed")
        await tx.commit()
    async with store.transaction() as tx:
        assert await tx.nodes.get("gone") is None
        assert await tx.items.count("gone") == 0
        assert await tx.subscriptions.for_node("gone") == []
        assert await tx.affiliations.for_node("gone") == []
        assert await tx.items.count("kept") == 1
        assert len(await tx.subscriptions.for_node("kept")) == 1
        assert await tx.affiliations.get("kept", "owner@example.org") is Affiliation.OWNER
        assert await tx.subscriptions.count() == 1
        assert await tx.items.count_all() == 1


# --- affiliations --------------------------------------------------------------------------


async def test_affiliation_is_none_until_set_and_set_overwrites(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.nodes.add(node("jobs"))
        assert await tx.affiliations.get("jobs", "bob@example.org") is Affiliation.NONE
        await tx.affiliations.set("jobs", "bob@example.org", Affiliation.PUBLISHER)
        await tx.affiliations.set("jobs", "bob@example.org", Affiliation.OUTCAST)
        await tx.commit()
    async with store.transaction() as tx:
        assert await tx.affiliations.get("jobs", "bob@example.org") is Affiliation.OUTCAST


async def test_setting_affiliation_none_removes_it(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.nodes.add(node("jobs"))
        await tx.affiliations.set("jobs", "bob@example.org", Affiliation.MEMBER)
        await tx.affiliations.set("jobs", "bob@example.org", Affiliation.NONE)
        await tx.affiliations.set("jobs", "nobody@example.org", Affiliation.NONE)
        assert await tx.affiliations.for_node("jobs") == []
        assert await tx.affiliations.get("jobs", "bob@example.org") is Affiliation.NONE


async def test_affiliations_list_by_node_and_by_jid(store: Store) -> None:
    async with store.transaction() as tx:
        for node_id in ("b", "a"):
            await tx.nodes.add(node(node_id))
        await tx.affiliations.set("a", "zed@example.org", Affiliation.MEMBER)
        await tx.affiliations.set("a", "amy@example.org", Affiliation.OWNER)
        await tx.affiliations.set("b", "amy@example.org", Affiliation.PUBLISH_ONLY)
        assert await tx.affiliations.for_node("a") == [
            AffiliationEntry("a", "amy@example.org", Affiliation.OWNER),
            AffiliationEntry("a", "zed@example.org", Affiliation.MEMBER),
        ]
        assert await tx.affiliations.for_jid("amy@example.org") == [
            AffiliationEntry("a", "amy@example.org", Affiliation.OWNER),
            AffiliationEntry("b", "amy@example.org", Affiliation.PUBLISH_ONLY),
        ]


# --- subscriptions ---------------------------------------------------------------------------


async def test_subscription_round_trips_with_options_and_times(store: Store) -> None:
    plus_two = timezone(timedelta(hours=2))
    s = dataclasses.replace(
        sub("jobs", "alice@example.org/w1", "s1", queue_requests=3),
        state=SubscriptionState.UNCONFIGURED,
        options={"pubsub#deliver": ("1",), "pubsub#keywords": ("a", "b")},
        last_activity=at(5.000123).astimezone(plus_two),
    )
    async with store.transaction() as tx:
        await tx.nodes.add(node("jobs"))
        await tx.subscriptions.add(s)
        await tx.commit()
    async with store.transaction() as tx:
        got = await tx.subscriptions.get("jobs", "s1")
        assert await tx.subscriptions.get("jobs", "nope") is None
    assert got == s
    assert got.last_activity is not None and got.last_activity.tzinfo == UTC
    assert got.created_at.tzinfo == UTC


async def test_subscription_update_replaces_and_remove_deletes(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.nodes.add(node("jobs"))
        await tx.subscriptions.add(sub("jobs", "alice@example.org", "s1"))
        changed = dataclasses.replace(
            sub("jobs", "alice@example.org", "s1", queue_requests=7),
            state=SubscriptionState.PENDING,
            options={"pubsub#deliver": ("0",)},
            last_activity=at(60),
        )
        await tx.subscriptions.update(changed)
        assert await tx.subscriptions.get("jobs", "s1") == changed
        await tx.subscriptions.remove("jobs", "s1")
        await tx.subscriptions.remove("jobs", "s1")
        assert await tx.subscriptions.get("jobs", "s1") is None
        assert await tx.subscriptions.count() == 0


async def test_subscriptions_of_a_node_come_oldest_first(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.nodes.add(node("jobs"))
        await tx.nodes.add(node("other"))
        # Same created_at and subids that sort differently: creation order decides.
        for subid in ("s9", "s10", "s2"):
            await tx.subscriptions.add(sub("jobs", f"{subid}@example.org", subid))
            await tx.subscriptions.add(sub("other", f"{subid}@example.org", f"o{subid}"))
        await tx.commit()
    async with store.transaction() as tx:
        assert [s.subid for s in await tx.subscriptions.for_node("jobs")] == ["s9", "s10", "s2"]
        # An update keeps the position.
        s10 = await tx.subscriptions.get("jobs", "s10")
        assert s10 is not None
        await tx.subscriptions.update(dataclasses.replace(s10, queue_requests=2))
        assert [s.subid for s in await tx.subscriptions.for_node("jobs")] == ["s9", "s10", "s2"]
        assert await tx.subscriptions.count() == 6


async def test_for_jid_matches_the_exact_jid_string(store: Store) -> None:
    async with store.transaction() as tx:
        for node_id in ("a", "b"):
            await tx.nodes.add(node(node_id))
        await tx.subscriptions.add(sub("a", "alice@example.org", "bare-a"))
        await tx.subscriptions.add(sub("a", "alice@example.org/w1", "full-a"))
        await tx.subscriptions.add(sub("b", "alice@example.org", "bare-b"))
        bare_subs = await tx.subscriptions.for_jid("alice@example.org")
        assert [s.subid for s in bare_subs] == ["bare-a", "bare-b"]
        assert [s.subid for s in await tx.subscriptions.for_jid("alice@example.org", "b")] == [
            "bare-b"
        ]
        full = await tx.subscriptions.for_jid("alice@example.org/w1")
        assert [s.subid for s in full] == ["full-a"]
        assert await tx.subscriptions.for_jid("alice@example.org/w2") == []


async def test_for_account_matches_every_resource_of_the_bare_jid_only(store: Store) -> None:
    async with store.transaction() as tx:
        for node_id in ("a", "b"):
            await tx.nodes.add(node(node_id))
        await tx.subscriptions.add(sub("a", "a_b@example.org", "bare"))
        await tx.subscriptions.add(sub("b", "a_b@example.org/w%1", "full"))
        # Look-alikes: LIKE wildcards in the JID, a longer domain, another case.
        await tx.subscriptions.add(sub("a", "axb@example.org/r", "wildcard"))
        await tx.subscriptions.add(sub("a", "a_b@example.org.evil/r", "longer"))
        await tx.subscriptions.add(sub("a", "A_B@example.org/r", "case"))
        found = await tx.subscriptions.for_account("a_b@example.org")
    assert [s.subid for s in found] == ["bare", "full"]
