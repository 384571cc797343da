"""The commit pipeline: batch N+1 runs while N's write is in flight, and waits.

With a gated backend (tests/kit/gated.py) batch N's write is held as long as the
test likes. These tests fail if anything is answered (its future resolved, so its
notifications handed out) before the commit holding it is durable, if answers
come out of batch order, or if a failed commit leaves anything of its batch, or
of the batch built on it, in memory.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.kit import ALICE, OWNER, PUB
from tests.kit.gated import GatedBackend, WriteRefused
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import Affiliation
from xmpp_queue.core.service import PubSubService
from xmpp_queue.storage.store import StateStore


async def _queue(service: PubSubService, **config: str) -> None:
    values = {"pubsub#queue": ["1"]} | {f"pubsub#{k}": [v] for k, v in config.items()}
    await service.create_node(OWNER, "jobs", values)
    await service.set_node_affiliations(
        OWNER, "jobs", [(PUB.bare, Affiliation.PUBLISHER), (ALICE.bare, Affiliation.MEMBER)]
    )


def _store(service: PubSubService) -> StateStore:
    store = service.store
    assert isinstance(store, StateStore)
    return store


def _in_memory(service: PubSubService) -> set[str]:
    ns = _store(service).state.nodes["jobs"]
    return set(ns.items)


async def _turns(n: int = 20) -> None:
    """Let the event loop run the batcher for a while (memory only: no I/O)."""
    for _ in range(n):
        await asyncio.sleep(0)


def _publish(service: PubSubService, item_id: str) -> asyncio.Future[Any]:
    return asyncio.ensure_future(service.publish(PUB, "jobs", item_id, "<x/>", 4))


async def test_the_next_batch_runs_while_a_commit_is_written_and_nothing_is_answered_early(
    service: PubSubService,
) -> None:
    await _queue(service)
    await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["5"]})
    gate = GatedBackend.around(_store(service))
    gate.hold = True
    answered: list[str] = []
    first = _publish(service, "a")
    first.add_done_callback(lambda _: answered.append("a"))
    assert await gate.arrived(1, unless=[first])  # batch N is being written
    later = [_publish(service, "b"), _publish(service, "c")]
    for name, future in zip("bc", later, strict=True):
        future.add_done_callback(lambda _, name=name: answered.append(name))
    await _turns()
    # Batch N+1 ran against memory while N's write is held (the pipeline) ...
    assert {"a", "b", "c"} <= _in_memory(service)
    # ... and nobody was answered: no result, no notification handed out.
    assert answered == [] and not first.done() and not any(f.done() for f in later)
    assert len(gate.held) == 1  # one commit in flight: N+1 waits for N to settle
    gate.release(0)
    assert await gate.arrived(2, unless=later)  # N+1's write starts after N
    await _turns()
    assert answered == ["a"]  # N is durable; N+1 is not yet
    gate.release(1)
    await asyncio.gather(*later)
    assert answered == ["a", "b", "c"]  # answers in batch order
    assert [e.items[0].item_id for e in (await first).effects] == ["a"]  # delivered to Alice


async def test_a_failed_commit_fails_the_batch_built_on_it_and_memory_is_back(
    service: PubSubService,
) -> None:
    await _queue(service)
    await service.publish(PUB, "jobs", "kept", "<x/>", 4)
    durable = _in_memory(service)
    gate = GatedBackend.around(_store(service))
    gate.hold = True
    first = [_publish(service, "a1"), _publish(service, "a2")]
    assert await gate.arrived(1, unless=first)
    second = [_publish(service, "b1"), asyncio.ensure_future(service.retract(PUB, "jobs", "kept"))]
    await _turns()
    assert {"a1", "a2", "b1"} <= _in_memory(service) and "kept" not in _in_memory(service)
    gate.fail(0, WriteRefused())
    results = await asyncio.gather(*first, *second, return_exceptions=True)
    assert all(isinstance(r, WriteRefused) for r in results), results  # nobody told "done"
    assert len(gate.held) == 1  # the batch built on the failed one never wrote
    assert _in_memory(service) == durable  # the retract of "kept" is undone too
    gate.hold = False
    assert (await service.publish(PUB, "jobs", "a1", "<x/>", 4)).value == "a1"
    assert _in_memory(service) == durable | {"a1"}


async def test_a_failed_second_commit_keeps_the_first(service: PubSubService) -> None:
    await _queue(service)
    gate = GatedBackend.around(_store(service))
    gate.hold = True
    first = _publish(service, "a")
    assert await gate.arrived(1, unless=[first])
    second = _publish(service, "b")
    await _turns()
    gate.release(0)
    assert await gate.arrived(2, unless=[second])
    assert (await first).value == "a"
    gate.fail(1, WriteRefused())
    assert isinstance((await asyncio.gather(second, return_exceptions=True))[0], WriteRefused)
    assert _in_memory(service) == {"a"}


async def test_reads_of_the_ledger_wait_for_the_commit_in_flight(service: PubSubService) -> None:
    """A ledger count in N+1 sees N's rows once (not missing, not twice)."""
    await _queue(service)
    store = _store(service)
    gate = GatedBackend.around(store)
    gate.hold = True
    first = _publish(service, "a")
    assert await gate.arrived(1, unless=[first])

    async def count() -> int:
        async with store.transaction() as tx:
            return await tx.ledger.count("jobs", EventKind.PUBLISHED, _epoch())

    counting = asyncio.ensure_future(count())
    await _turns()
    assert not counting.done()  # it waits for N to settle
    gate.release(0)
    assert await counting == 1
    await first


async def test_an_ack_in_flight_counts_for_the_dedup_window_of_the_next_batch(
    service: PubSubService,
) -> None:
    await _queue(service, queue_dedup_window="60")
    await service.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    await service.publish(PUB, "jobs", "a", "<x/>", 4)
    gate = GatedBackend.around(_store(service))
    gate.hold = True
    ack = asyncio.ensure_future(service.retract(ALICE, "jobs", "a"))
    assert await gate.arrived(1, unless=[ack])
    again = _publish(service, "a")  # the publisher's retry, while the ack is in flight
    await _turns()
    gate.release(0)
    assert await gate.arrived(2, unless=[again])
    gate.release(1)
    await asyncio.gather(ack, again)
    assert "a" not in _in_memory(service)  # deduplicated, not queued again
    async with _store(service).transaction() as tx:
        kinds = [e.kind for e in await tx.ledger.events("jobs")]
    assert kinds[-1] is EventKind.DEDUPLICATED


def _epoch() -> Any:
    from datetime import UTC, datetime

    return datetime(2000, 1, 1, tzinfo=UTC)
