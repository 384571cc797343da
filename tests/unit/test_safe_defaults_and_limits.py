"""Safe defaults for poison items, and the limits per JID (``[limits]``), on a fake clock."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.kit import ADMIN, ALICE, BOB, OWNER, PUB, FakeClock, build_service
from xmpp_queue.core.effects import Effect, ItemNotice
from xmpp_queue.core.errors import Forbidden, InvalidNodeConfig, NodeFull
from xmpp_queue.core.limits import Limits, NodeQuotaExceeded, PublishRateExceeded
from xmpp_queue.core.model import Affiliation, NewItem, NodeConfig
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.storage.store import StateStore


async def limited(clock: FakeClock, limits: Limits) -> PubSubService:
    svc = build_service(
        StateStore.in_memory(),
        clock,
        settings=ServiceSettings(
            default_config=NodeConfig(),
            admins=frozenset({ADMIN.bare}),
            access=ServiceAccess.for_domain("example.org"),
            limits=limits,
        ),
    )
    await svc.start()
    return svc


@pytest.fixture
async def tight(clock: FakeClock) -> AsyncIterator[PubSubService]:
    svc = await limited(
        clock, Limits(max_nodes_per_jid=2, max_queue_items=3, publish_rate=10, publish_burst=5)
    )
    yield svc
    await svc.stop()


def deliveries(effects: tuple[Effect, ...]) -> list[str]:
    return [e.items[0].item_id for e in effects if isinstance(e, ItemNotice)]


# --- poison items --------------------------------------------------------------------


async def test_a_failing_handler_on_a_default_queue_gets_a_bounded_number_of_deliveries(
    service: PubSubService, clock: FakeClock
) -> None:
    """A worker that fails at once on every delivery (nack) of a queue made with
    the defaults: at most 6 deliveries in the first minute (retry delay 1 s,
    doubling), then the item is dead-lettered after 10 deliveries, never dropped."""
    await service.create_node(OWNER, "jobs", {"pubsub#queue": ["1"]})
    await service.set_node_affiliations(OWNER, "jobs", [(ALICE.bare, Affiliation.MEMBER)])
    await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    got = deliveries((await service.publish(OWNER, "jobs", "poison", "<p/>", 4)).effects)
    times = [0.0] * len(got)
    elapsed = 0.0
    while elapsed < 900:  # 15 minutes, in quarter seconds
        for _ in got:  # the handler fails at once: nack every item it got
            out = await service.unlock(ALICE, "jobs", "poison")
            got_now = deliveries(out.effects)
            times += [elapsed] * len(got_now)
        got = []
        clock.advance(0.25)
        elapsed += 0.25
        got = deliveries((await service.tick()).effects)
        times += [elapsed] * len(got)
    first_minute = [t for t in times if t < 60]
    assert first_minute == [0, 1, 3, 7, 15, 31], times  # 1 s, doubling
    assert len(times) == 10, times  # the default delivery limit
    dead = await service.get_items(OWNER, "jobs/dead-letter")
    assert [i.item_id for i in dead.items] == ["poison"]  # dead-lettered, never dropped
    assert (await service.get_items(OWNER, "jobs")).items == ()


async def test_xep_0254_immediate_hand_over_stays_available_as_a_setting(
    service: PubSubService,
) -> None:
    await service.create_node(
        OWNER, "jobs", {"pubsub#queue": ["1"], "pubsub#queue_retry_delay": ["0"]}
    )
    await service.set_node_affiliations(OWNER, "jobs", [(ALICE.bare, Affiliation.MEMBER)])
    await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    await service.publish(OWNER, "jobs", "i1", "<p/>", 4)
    out = await service.unlock(ALICE, "jobs", "i1")
    assert deliveries(out.effects) == ["i1"]  # offered again at once


# --- limits per JID ------------------------------------------------------------------


async def test_nodes_per_jid_are_limited_and_a_refused_create_leaves_nothing(
    tight: PubSubService,
) -> None:
    await tight.create_node(OWNER, "a", {})
    await tight.create_node(OWNER, "b", {})
    with pytest.raises(NodeQuotaExceeded):
        await tight.create_node(OWNER, "c", {})
    assert [n.node_id for n in await tight.list_nodes(OWNER)] == ["a", "b"]
    await tight.create_node(BOB, "c", {})  # per JID
    await tight.create_node(ADMIN, "d", {})  # admins are not bound
    await tight.create_node(ADMIN, "e", {})
    await tight.create_node(ADMIN, "f", {})
    await tight.delete_node(OWNER, "a")
    await tight.create_node(OWNER, "a2", {})  # a deleted node no longer counts


async def test_7_1_3_node_full_a_queue_past_max_items_refuses_and_drops_nothing(
    tight: PubSubService, clock: FakeClock
) -> None:
    """XEP-0060 §7.1.3 "Node is full": a queue never drops; it refuses (NodeFull,
    conflict + node-full on the wire). New queues get [limits] max_queue_items."""
    await tight.create_node(OWNER, "jobs", {"pubsub#queue": ["1"]})
    assert (await tight.get_config(OWNER, "jobs")).max_items == 3
    for n in range(3):
        await tight.publish(OWNER, "jobs", f"i{n}", "<p/>", 4)
    with pytest.raises(NodeFull):
        await tight.publish(OWNER, "jobs", "i3", "<p/>", 4)
    assert [i.item_id for i in (await tight.get_items(OWNER, "jobs")).items] == ["i0", "i1", "i2"]
    await tight.publish(OWNER, "jobs", "i1", "<q/>", 4)  # re-publishing an id is no new item


async def test_a_queue_may_not_hold_more_than_the_service_allows(tight: PubSubService) -> None:
    with pytest.raises(InvalidNodeConfig) as err:
        await tight.create_node(OWNER, "q", {"pubsub#queue": ["1"], "pubsub#max_items": ["4"]})
    assert err.value.field == "pubsub#max_items"
    with pytest.raises(InvalidNodeConfig):
        await tight.create_node(OWNER, "q", {"pubsub#queue": ["1"], "pubsub#max_items": ["max"]})
    await tight.create_node(OWNER, "q", {"pubsub#queue": ["1"], "pubsub#max_items": ["2"]})
    with pytest.raises(InvalidNodeConfig):
        await tight.configure_node(OWNER, "q", {"pubsub#max_items": ["10"]})
    assert (await tight.get_config(OWNER, "q")).max_items == 2
    # not a queue (BOB: OWNER's queue and its dead-letter node fill OWNER's quota of 2)
    await tight.create_node(BOB, "news", {"pubsub#max_items": ["max"]})


async def test_the_publish_rate_per_jid_refuses_past_the_burst_until_tokens_refill(
    tight: PubSubService, clock: FakeClock
) -> None:
    await tight.create_node(OWNER, "news", {})
    await tight.set_node_affiliations(OWNER, "news", [(PUB.bare, Affiliation.PUBLISHER)])
    for n in range(5):  # the burst
        await tight.publish(PUB, "news", f"i{n}", "<p/>", 4)
    with pytest.raises(PublishRateExceeded) as err:
        await tight.publish(PUB, "news", "late", "<p/>", 4)
    assert 0 < err.value.retry_after <= 0.1
    assert "late" not in {i.item_id for i in (await tight.get_items(PUB, "news")).items}
    await tight.publish(OWNER, "news", "other", "<p/>", 4)  # another JID has its own bucket
    await tight.publish(ADMIN, "news", "admin", "<p/>", 4)  # admins are not bound
    clock.advance(0.1)  # 10/s: one token back
    await tight.publish(PUB, "news", "late", "<p/>", 4)
    with pytest.raises(PublishRateExceeded):
        await tight.publish(PUB, "news", "later", "<p/>", 4)


async def test_a_refused_publish_spends_no_token(tight: PubSubService) -> None:
    await tight.create_node(OWNER, "news", {})
    for n in range(5):
        with pytest.raises(Forbidden):  # PUB is no publisher yet
            await tight.publish(PUB, "news", f"i{n}", "<p/>", 4)
    await tight.set_node_affiliations(OWNER, "news", [(PUB.bare, Affiliation.PUBLISHER)])
    await tight.publish(PUB, "news", "ok", "<p/>", 4)


async def test_the_publish_rate_counts_items_so_batches_cannot_walk_past_it(
    clock: FakeClock,
) -> None:
    """Issue 27: 30 batches of 1,000 in a few seconds were all accepted at 1,000/s with a
    burst of 5,000. The bucket counts items: a batch of n needs n tokens."""
    svc = await limited(clock, Limits(publish_rate=1000, publish_burst=5000))
    try:
        await svc.create_node(OWNER, "news", {"pubsub#max_items": ["max"]})
        await svc.set_node_affiliations(OWNER, "news", [(PUB.bare, Affiliation.PUBLISHER)])
        accepted = 0
        for b in range(30):
            batch = [NewItem(f"b{b}-{k}", "<p/>", 4) for k in range(1000)]
            try:
                await svc.publish_items(PUB, "news", batch)
                accepted += len(batch)
            except PublishRateExceeded as err:
                assert err.retry_after > 0
            clock.advance(0.1)  # 30 batches in 3 s
        # burst 5,000 + 3 s x 1,000/s = 8,000 at most (the issue saw 30,000)
        assert 5000 <= accepted <= 8000
    finally:
        await svc.stop()


async def test_a_batch_larger_than_the_burst_passes_on_a_full_bucket_and_leaves_a_debt(
    clock: FakeClock,
) -> None:
    svc = await limited(clock, Limits(publish_rate=10, publish_burst=5))
    try:
        await svc.create_node(OWNER, "news", {"pubsub#max_items": ["max"]})
        await svc.set_node_affiliations(OWNER, "news", [(PUB.bare, Affiliation.PUBLISHER)])
        await svc.publish_items(PUB, "news", [NewItem(f"i{k}", "<p/>", 4) for k in range(20)])
        clock.advance(1.0)  # 10 tokens back: still 5 short of one
        with pytest.raises(PublishRateExceeded) as err:
            await svc.publish(PUB, "news", "next", "<p/>", 4)
        assert err.value.retry_after == pytest.approx(0.6)  # -15 + 10 -> needs 6 more
        clock.advance(0.6)
        await svc.publish(PUB, "news", "next", "<p/>", 4)
    finally:
        await svc.stop()


async def _dead_letter_one(svc: PubSubService, item_id: str) -> str:
    """Publish one item to "jobs", have ALICE take it and dead-letter it; where it went."""
    await svc.publish(OWNER, "jobs", item_id, "<p/>", 4)
    await svc.dead_letter_now(ALICE, "jobs", item_id, "broken")
    for node in await svc.list_nodes(OWNER):
        if node.node_id != "jobs" and item_id in {
            i.item_id for i in (await svc.get_items(OWNER, node.node_id)).items
        }:
            return node.node_id
    raise AssertionError(f"{item_id} is nowhere")


async def test_dead_letter_nodes_count_in_the_node_quota_so_renames_cannot_walk_past_it(
    clock: FakeClock,
) -> None:
    """Issue 27: renaming pubsub#queue_dead_letter and dead-lettering made a new node
    each time, past max_nodes_per_jid. Every node a JID causes counts: its queues'
    dead-letter nodes, made or still to be made on first use."""
    svc = await limited(clock, Limits(max_nodes_per_jid=3, publish_rate=0))
    try:
        await svc.create_node(OWNER, "jobs", {"pubsub#queue": ["1"]})  # + jobs/dead-letter
        await svc.set_node_affiliations(OWNER, "jobs", [(ALICE.bare, Affiliation.MEMBER)])
        await svc.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["5"]})
        await svc.create_node(OWNER, "news", {})  # 3 of 3
        with pytest.raises(NodeQuotaExceeded):
            await svc.create_node(OWNER, "more", {})
        assert await _dead_letter_one(svc, "a") == "jobs/dead-letter"  # reserved: made
        with pytest.raises(NodeQuotaExceeded) as err:
            await svc.configure_node(OWNER, "jobs", {"pubsub#queue_dead_letter": ["dl1"]})
        assert err.value.dead_letter == "dl1"
        assert (await svc.get_config(OWNER, "jobs")).queue_dead_letter in (None, "")
        await svc.delete_node(OWNER, "news")  # room for one more
        await svc.configure_node(OWNER, "jobs", {"pubsub#queue_dead_letter": ["dl1"]})
        assert await _dead_letter_one(svc, "b") == "dl1"
        with pytest.raises(NodeQuotaExceeded):
            await svc.configure_node(OWNER, "jobs", {"pubsub#queue_dead_letter": ["dl2"]})
        # naming a node that exists makes nothing new: allowed at the limit
        await svc.configure_node(OWNER, "jobs", {"pubsub#queue_dead_letter": ["jobs/dead-letter"]})
        assert await _dead_letter_one(svc, "c") == "jobs/dead-letter"
        # unrelated changes at the limit are fine, and so is an admin's rename
        await svc.configure_node(OWNER, "jobs", {"pubsub#title": ["Jobs"]})
        await svc.configure_node(ADMIN, "jobs", {"pubsub#queue_dead_letter": ["dl3"]})
        assert await _dead_letter_one(svc, "d") == "dl3"  # never dropped
        assert len(await svc.list_nodes(OWNER)) == 4
    finally:
        await svc.stop()


async def test_a_queue_needs_room_for_its_dead_letter_node_unless_it_names_an_existing_one(
    clock: FakeClock,
) -> None:
    svc = await limited(clock, Limits(max_nodes_per_jid=2, publish_rate=0))
    try:
        await svc.create_node(OWNER, "shared-dead", {})
        with pytest.raises(NodeQuotaExceeded) as err:
            await svc.create_node(OWNER, "jobs", {"pubsub#queue": ["1"]})
        assert err.value.dead_letter == "jobs/dead-letter"
        await svc.create_node(
            OWNER, "jobs", {"pubsub#queue": ["1"], "pubsub#queue_dead_letter": ["shared-dead"]}
        )
    finally:
        await svc.stop()


async def test_a_rate_exempt_jid_is_not_bound_by_the_publish_rate(clock: FakeClock) -> None:
    """Issue 24: the pipeline's loader ran at the per-JID rate by surprise; listed in
    [limits] rate_exempt it is not counted, while others still are."""
    svc = await limited(
        clock, Limits(publish_rate=10, publish_burst=5, rate_exempt=frozenset({PUB.bare}))
    )
    try:
        await svc.create_node(OWNER, "news", {"pubsub#max_items": ["max"]})
        await svc.set_node_affiliations(OWNER, "news", [(PUB.bare, Affiliation.PUBLISHER)])
        await svc.publish_items(PUB, "news", [NewItem(f"b{k}", "<p/>", 4) for k in range(50)])
        for n in range(20):
            await svc.publish(PUB, "news", f"i{n}", "<p/>", 4)
        for n in range(5):
            await svc.publish(OWNER, "news", f"o{n}", "<p/>", 4)
        with pytest.raises(PublishRateExceeded):
            await svc.publish(OWNER, "news", "o-late", "<p/>", 4)
    finally:
        await svc.stop()
