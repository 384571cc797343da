"""Limits on the wire (issue 27): a refused dead-letter rename, an item-counted rate."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.kit import build_service
from tests.kit.stanzas import (
    NODE_CONFIG,
    OWNER,
    OWNER_NS,
    PUB,
    SERVICE,
    FakeClock,
    FakeTransport,
    Stream,
    error_of,
    make_node,
    make_queue,
    pubsub,
    submit,
)
from xmpp_queue.core.limits import Limits
from xmpp_queue.core.model import NodeConfig
from xmpp_queue.core.service import ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.xmpp.component import QueueComponent


@pytest.fixture
async def limited(clock: FakeClock) -> AsyncIterator[Stream]:
    from xmpp_queue.storage.store import StateStore

    service = build_service(
        StateStore.in_memory(),
        clock,
        settings=ServiceSettings(
            default_config=NodeConfig(),
            access=ServiceAccess.for_domain("example.org"),
            limits=Limits(max_nodes_per_jid=2, publish_rate=10, publish_burst=20),
        ),
    )
    await service.start()
    s = Stream(
        QueueComponent(SERVICE, "secret", "127.0.0.1", 5347, service), FakeTransport(), clock
    )
    await s.start()
    yield s
    await s.close()


async def test_renaming_the_dead_letter_node_past_the_quota_is_not_allowed(
    limited: Stream,
) -> None:
    await make_node(limited, "failed")
    await make_queue(limited, "jobs", pubsub__queue_dead_letter="failed")  # 2 of 2
    form = submit(NODE_CONFIG, pubsub__queue_dead_letter="elsewhere")
    reply, _ = await limited.iq(
        "set", OWNER, pubsub(f"<configure node='jobs'>{form}</configure>", OWNER_NS)
    )
    assert error_of(reply) == ("cancel", "not-allowed", None)
    assert "dead-letter" in (reply.findtext(".//{*}text") or "")


async def test_a_batch_publish_needs_a_token_per_item(limited: Stream) -> None:
    """Burst 20: after one publish, a batch of 20 does not fit; a batch of 19 does."""
    await make_queue(limited, "jobs", pubsub__max_items="100")
    one = "<publish node='jobs'><item id='first'><job xmlns='urn:example'/></item></publish>"
    reply, _ = await limited.iq("set", PUB, pubsub(one))
    assert reply.get("type") == "result"

    def batch(n: int) -> str:
        items = "".join(f"<item id='i{k}'><job xmlns='urn:example'/></item>" for k in range(n))
        return pubsub(f"<publish node='jobs'>{items}</publish>")

    reply, _ = await limited.iq("set", PUB, batch(20))
    assert error_of(reply)[:2] == ("wait", "resource-constraint")
    reply, _ = await limited.iq("set", PUB, batch(19))
    assert reply.get("type") == "result"
