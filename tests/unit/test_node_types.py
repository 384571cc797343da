"""Node types by capability: the type is an enum read once, queue verbs only on queues.

The shared pubsub verbs (``NodePolicy``) and the queue-only verbs (``QueueVerbs``)
are separate interfaces; a leaf answers no queue verb (no stubs), the choice
refuses it first (``NotAQueue``), and the admin levers and the timer reach the
queue type through its own methods, never its engine.
"""

from __future__ import annotations

import pytest

from tests.kit import ADMIN, ALICE, OWNER, PUB
from xmpp_queue.core.errors import NotAQueue
from xmpp_queue.core.leaf import LeafPolicy
from xmpp_queue.core.model import Affiliation, NodeConfig
from xmpp_queue.core.node_types import NodeType, NodeTypes, QueueVerbs
from xmpp_queue.core.service import PubSubService

QUEUE_VERBS = ("unlock", "extend", "dead_letter", "release", "force_unlock", "expire_due")


def test_the_type_is_an_enum_read_from_the_configuration() -> None:
    assert NodeType.of_config(NodeConfig()) is NodeType.LEAF
    assert NodeType.of_config(NodeConfig(queue=True)) is NodeType.QUEUE


def test_a_leaf_carries_no_queue_verbs() -> None:
    assert not [verb for verb in QUEUE_VERBS if hasattr(LeafPolicy, verb)]
    assert all(hasattr(QueueVerbs, verb) for verb in QUEUE_VERBS)


async def test_queue_of_refuses_a_leaf_and_gives_the_queue_verbs_of_a_queue(
    service: PubSubService,
) -> None:
    await service.create_node(OWNER, "plain")
    await service.create_node(OWNER, "jobs", {"pubsub#queue": ["1"]})
    types: NodeTypes = service._types
    plain, jobs = await service.get_node(OWNER, "plain"), await service.get_node(OWNER, "jobs")
    with pytest.raises(NotAQueue):
        types.queue_of(plain)
    assert types.type_of(plain) is NodeType.LEAF
    assert types.type_of(jobs) is NodeType.QUEUE
    assert types.queue_of(jobs) is types.queue


@pytest.mark.parametrize("verb", ["extend", "dead_letter"])
async def test_queue_only_requests_on_a_leaf_are_refused(service: PubSubService, verb: str) -> None:
    await service.create_node(OWNER, "plain")
    with pytest.raises(NotAQueue):
        if verb == "extend":
            await service.extend_lock(OWNER, "plain", "x")
        else:
            await service.dead_letter_now(OWNER, "plain", "x", "bad")


async def test_a_leaf_subscriber_leaving_or_kicked_releases_nothing(
    service: PubSubService,
) -> None:
    """``release`` is a queue verb: leaving a leaf holds nothing to give back."""
    await service.create_node(OWNER, "news")
    await service.set_node_affiliations(OWNER, "news", [(PUB.bare, Affiliation.PUBLISHER)])
    await service.subscribe(ALICE, "news", ALICE.jid)
    await service.publish(PUB, "news", "n1", "<n/>", 4)
    assert (await service.release_subscriber(ALICE.jid, "unavailable")).value == 0
    await service.subscribe(ALICE, "news", ALICE.jid)
    assert (await service.kick_subscriber(ADMIN, "news", ALICE.jid)).value == 0
    assert await service.get_node_subscriptions(OWNER, "news") == []
