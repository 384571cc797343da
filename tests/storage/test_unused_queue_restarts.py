"""``pubsub#queue_expire_after`` across a restart, on SQLite and PostgreSQL: the
store's index of unsubscribed bound queues lives in memory, so a reload files
every such queue again (from the reload's time: a restart can only delay a
deletion, never bring it forward) and the sweep still deletes it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.kit import ALICE, OWNER, PUB, FakeClock, build_service
from tests.kit.stores import SQL_BACKENDS, empty_database
from xmpp_queue.core.errors import NodeNotFound
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import Affiliation
from xmpp_queue.core.service import PubSubService
from xmpp_queue.storage.store import StateStore

AFTER = 600


@pytest.fixture(params=SQL_BACKENDS)
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await empty_database(request.param, request, tmp_path)


async def _service(url: str, clock: FakeClock) -> PubSubService:
    service = build_service(await StateStore.open(url), clock)
    await service.start()
    return service


async def _restart(service: PubSubService, url: str, clock: FakeClock) -> PubSubService:
    await service.stop()
    await service._ctx.store.close()
    return await _service(url, clock)


async def _exists(service: PubSubService, node: str) -> bool:
    try:
        await service.get_config(OWNER, node)
    except NodeNotFound:
        return False
    return True


async def test_an_unused_bound_queue_is_deleted_after_a_restart(url: str) -> None:
    clock = FakeClock()
    service = await _service(url, clock)
    try:
        await service.create_node(OWNER, "billing", {})
        await service.set_node_affiliations(OWNER, "billing", [(PUB.bare, Affiliation.PUBLISHER)])
        for node, after in (("q", AFTER), ("kept", 0)):
            values = {
                "pubsub#queue": ["1"],
                "pubsub#queue_topic": ["billing"],
                "pubsub#queue_expire_after": [str(after)],
            }
            await service.create_node(OWNER, node, values)
            await service.set_node_affiliations(OWNER, node, [(ALICE.bare, Affiliation.MEMBER)])
        await service.subscribe(ALICE, "q", ALICE.jid, {"pubsub#queue_requests": ["3"]})
        subid = (await service.own_subscriptions(ALICE, "q"))[0].subid
        await service.unsubscribe(ALICE, "q", ALICE.jid, subid)
        clock.advance(AFTER / 2)
        service = await _restart(service, url, clock)
        restarted = clock.now
        assert await _exists(service, "q")
        assert await service.next_deadline() == restarted + timedelta(seconds=AFTER)
        clock.advance(AFTER - 1)
        await service.sweep()
        assert await _exists(service, "q")
        clock.advance(1)
        await service.sweep()
        assert not await _exists(service, "q")
        assert await _exists(service, "kept")
        service = await _restart(service, url, clock)  # the deletion was committed
        assert not await _exists(service, "q")
        events = await service._ctx.read(lambda w: w.tx.ledger.events("q"))
        assert [e.kind for e in events if e.kind is EventKind.EXPIRED_UNUSED] == [
            EventKind.EXPIRED_UNUSED
        ]
        assert await service.next_deadline() is None
    finally:
        await service.stop()
        await service._ctx.store.close()
