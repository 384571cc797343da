"""The client library (``xmpp_queue.client``) against real servers and the real component.

Every test runs once on Prosody and once on ejabberd (``xmpp_server``), with one
component per module and server (``shared_component``); each test makes its own
nodes. Waiting is on events with a timeout, never on fixed sleeps, except where
the point is that time passes (a lock timing out, a lock being extended).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from tests.integration.queue_helpers import unique
from xmpp_queue.client import (
    Job,
    Publisher,
    PublishError,
    StanzaError,
    Worker,
    json_payload,
)

pytestmark = pytest.mark.integration

TIMEOUT = 20.0  # generous: a busy 2-core machine, two servers, one component each

WorkerFactory = Callable[..., Awaitable[Worker]]


@pytest.fixture(scope="module")
def shared_component(xmpp_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The module's component, with new queues open to the service's users
    ([access] queue_access_model = "open"): these tests are about the client
    library, whose publisher creates the queues its workers take; who may do what
    has its own suite (test_authorization_matrix.py)."""
    from tests.integration.queue_helpers import module_component
    from tests.kit.integration import make_component

    workdir = tmp_path_factory.mktemp("client-component")
    proc = module_component(
        make_component, xmpp_server, workdir, access={"queue_access_model": "open"}
    )
    yield proc
    proc.stop()


@pytest.fixture
async def publisher(
    xmpp_server: Any, shared_component: Any, accounts: Any
) -> AsyncIterator[Publisher]:
    pub = Publisher(
        f"pub@{xmpp_server.domain}",
        accounts.password,
        accounts.component_jid,
        host=xmpp_server.host,
        port=xmpp_server.c2s_port,
        window=8,
        allow_plain=True,
    )
    await pub.connect()
    yield pub
    try:
        await asyncio.wait_for(pub.close(), 10)
    except (TimeoutError, PublishError):
        pub.abort()


@pytest.fixture
async def worker(
    xmpp_server: Any, shared_component: Any, accounts: Any
) -> AsyncIterator[WorkerFactory]:
    """``await worker("w1", node, handler, queue_requests=2)`` → a started Worker."""
    made: list[Worker] = []

    async def make(user: str, node: str, handler: Any, **options: Any) -> Worker:
        w = Worker(
            f"{user}@{xmpp_server.domain}",
            accounts.password,
            accounts.component_jid,
            node,
            handler,
            host=xmpp_server.host,
            port=xmpp_server.c2s_port,
            allow_plain=True,
            name=user,
            **options,
        )
        made.append(w)
        await w.start()
        return w

    yield make
    for w in made:
        if not w.stopping:
            try:
                await asyncio.wait_for(w.stop(grace=1), 10)
            except TimeoutError:
                w.abort()


class Tally:
    """Counts handler calls and wakes the test when a target is reached."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.done: Counter[str] = Counter()
        self.reached = asyncio.Event()

    def record(self, item_id: str) -> None:
        self.done[item_id] += 1
        if sum(self.done.values()) >= self.target:
            self.reached.set()

    async def wait(self) -> None:
        await asyncio.wait_for(self.reached.wait(), TIMEOUT)


async def until(predicate: Callable[[], bool], within: float = TIMEOUT) -> None:
    """Poll a condition on client-side counters (they change on incoming stanzas, and
    the library has no hook per counter: a short poll keeps the library plain)."""
    async with asyncio.timeout(within):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def test_every_item_is_processed_once_within_each_workers_window(
    publisher: Publisher, worker: WorkerFactory
) -> None:
    node = unique("q")
    assert await publisher.create_queue(node, lock_timeout=60) is True
    assert await publisher.create_queue(node) is False, "an existing node is tolerated"
    tally = Tally(40)
    running: Counter[str] = Counter()
    peak: Counter[str] = Counter()

    def handler_for(name: str) -> Callable[[Job], Awaitable[None]]:
        async def handle(job: Job) -> None:
            running[name] += 1
            peak[name] = max(peak[name], running[name])
            await asyncio.sleep(0.005)
            running[name] -= 1
            tally.record(str(job.json()["n"]))

        return handle

    w1 = await worker("w1", node, handler_for("w1"), queue_requests=1)
    w2 = await worker("w2", node, handler_for("w2"), queue_requests=3)
    futures = [await publisher.submit(node, json_payload({"n": n})) for n in range(40)]
    ids = await asyncio.gather(*futures)
    assert len(set(ids)) == 40, "the service generates one id per item"
    await tally.wait()
    await until(lambda: w1.stats.acked + w2.stats.acked == 40)
    assert sorted(tally.done) == sorted(str(n) for n in range(40))
    assert set(tally.done.values()) == {1}
    assert peak["w1"] <= 1 and peak["w2"] <= 3, f"window exceeded: {dict(peak)}"
    assert w1.stats.returned == w2.stats.returned == 0


async def test_batched_workers_get_several_items_per_message_and_ack_them_together(
    publisher: Publisher, worker: WorkerFactory
) -> None:
    """XEP-0060 §7.1.2.1 several items per notification (``pubsub#queue_max_batch``),
    §13.11 several acks per retract and our batch unlock, through the real server:
    every item exactly once, windows kept, a failed first try comes back."""
    node = unique("q")
    await publisher.create_queue(node, lock_timeout=60)
    futures = [await publisher.submit(node, json_payload({"n": n})) for n in range(60)]
    await asyncio.gather(*futures)
    tally = Tally(60)
    running: Counter[str] = Counter()
    peak: Counter[str] = Counter()

    def handler_for(name: str) -> Callable[[Job], Awaitable[None]]:
        async def handle(job: Job) -> None:
            running[name] += 1
            peak[name] = max(peak[name], running[name])
            await asyncio.sleep(0.002)
            running[name] -= 1
            n = job.json()["n"]
            if n % 10 == 0 and job.delivery == 1:
                raise RuntimeError("first try fails")  # a nack, batched with others
            tally.record(str(n))

        return handle

    w1 = await worker("w1", node, handler_for("w1"), queue_requests=8, max_batch=8)
    w2 = await worker("w2", node, handler_for("w2"), queue_requests=4, max_batch=4)
    await tally.wait()
    await until(lambda: w1.stats.acked + w2.stats.acked == 60)
    assert sorted(tally.done) == sorted(str(n) for n in range(60))
    assert set(tally.done.values()) == {1}
    assert peak["w1"] <= 8 and peak["w2"] <= 4, f"window exceeded: {dict(peak)}"
    assert w1.stats.failed + w2.stats.failed == 6
    received = w1.stats.received + w2.stats.received
    assert received == 66  # 60 items, 6 of them twice
    assert w1.stats.notifications + w2.stats.notifications < received, "no batch was sent"
    assert w1.stats.lost == w2.stats.lost == w1.stats.returned == w2.stats.returned == 0


async def test_a_trickle_of_items_is_acked_in_shared_retracts_with_ack_linger(
    publisher: Publisher, worker: WorkerFactory
) -> None:
    """``ack_linger``: items that arrive one at a time are acked several per retract
    through the real server, every item once, and the node is empty afterwards."""
    node = unique("q")
    await publisher.create_queue(node, lock_timeout=60)
    tally = Tally(12)

    async def handle(job: Job) -> None:
        tally.record(str(job.json()["n"]))

    w = await worker("w1", node, handle, queue_requests=8, ack_linger=0.3)
    for n in range(12):  # a trickle: one notification per item
        await (await publisher.submit(node, json_payload({"n": n})))
        await asyncio.sleep(0.03)
    await tally.wait()
    await until(lambda: w.stats.acked == 12)
    assert set(tally.done.values()) == {1} and len(tally.done) == 12
    assert w.stats.notifications == 12, "each item came alone"
    assert w._batching is not None
    assert w._batching.acks.requests <= 6, "the acks did not share retracts"
    assert w.stats.lost == w.stats.returned == w.stats.failed == 0
    assert await publisher.items(node) == []


async def test_a_trickle_arrives_in_full_batches_with_batch_wait(
    publisher: Publisher, worker: WorkerFactory
) -> None:
    """``batch_wait`` (``pubsub#queue_batch_wait``) through the real server: items
    published one at a time arrive four per notification, the short batch left at
    the end comes once its oldest item has waited the wait, every item once; a wait
    past the service's bound is refused with invalid-options."""
    node = unique("q")
    await publisher.create_queue(node, lock_timeout=60)
    tally = Tally(10)

    async def handle(job: Job) -> None:
        tally.record(str(job.json()["n"]))

    w = await worker("w1", node, handle, queue_requests=8, max_batch=4, batch_wait=1.5)
    loop = asyncio.get_running_loop()
    for n in range(10):  # a trickle: 4 + 4 fill batches, the last 2 wait
        if n == 8:
            short_batch_from = loop.time()
        await (await publisher.submit(node, json_payload({"n": n})))
        await asyncio.sleep(0.02)
    await tally.wait()
    waited = loop.time() - short_batch_from
    await until(lambda: w.stats.acked == 10)
    assert set(tally.done.values()) == {1} and len(tally.done) == 10
    assert w.stats.notifications == 3, "not two full batches and a short one"
    assert waited >= 1.2, f"the short batch came after {waited:.2f} s, not held"
    assert w.stats.lost == w.stats.returned == w.stats.failed == 0
    link = w.link
    assert link is not None
    with pytest.raises(StanzaError) as refused:
        await link.subscribe(node, {"pubsub#queue_requests": 2, "pubsub#queue_batch_wait": 20000})
    assert refused.value.condition == "not-acceptable"  # a subscribe's answer to bad options
    assert refused.value.app_condition == "invalid-options"


async def test_publish_with_an_id_returns_it_and_errors_are_typed(publisher: Publisher) -> None:
    node = unique("q")
    await publisher.create_queue(node)
    assert await publisher.publish(node, json_payload(1), item_id="mine-1") == "mine-1"
    with pytest.raises(PublishError) as caught:
        await publisher.publish(unique("missing"), json_payload(1))
    assert caught.value.condition == "item-not-found"
    with pytest.raises(PublishError) as caught:
        await publisher.publish(node, "<not-closed>")
    assert caught.value.condition == "bad-request"
    assert await publisher.publish(node, json_payload(2)), "the stream survived"


async def test_a_batch_publish_stores_all_or_nothing_xep_0060_13_11(
    publisher: Publisher,
) -> None:
    node = unique("batch")
    await publisher.create_queue(node, config={"pubsub#max_items": 4})
    ids = await publisher.publish_batch(
        node, [(json_payload({"n": n}), None if n == 2 else f"b{n}") for n in range(3)]
    )
    assert ids[0] == "b0" and ids[1] == "b1" and ids[2] not in ("", None)
    # A batch the queue has no room for (max_items 4) is refused whole: nothing stored.
    with pytest.raises(PublishError) as refused:
        await publisher.publish_batch(node, [(json_payload({"n": n}), f"c{n}") for n in range(2)])
    assert refused.value.condition == "conflict"  # node-full, §7.1.3.4
    assert await publisher.publish(node, json_payload({"n": 9}), "d9") == "d9"  # one fits


async def test_a_queue_subscription_needs_queue_requests_xep_0254_2_1(
    publisher: Publisher,
) -> None:
    node = unique("q")
    await publisher.create_queue(node)
    with pytest.raises(StanzaError) as caught:
        await publisher.link.subscribe(node)
    assert (caught.value.condition, caught.value.app_condition) == (
        "not-acceptable",
        "configuration-required",
    )


async def test_a_failing_handler_unlocks_and_the_item_comes_back(
    publisher: Publisher, worker: WorkerFactory
) -> None:
    node = unique("q")
    await publisher.create_queue(node, lock_timeout=60)
    deliveries: list[int] = []
    tally = Tally(1)

    async def fail_once(job: Job) -> None:
        deliveries.append(job.delivery)
        if job.delivery == 1:
            raise RuntimeError("not this time")
        tally.record(job.item_id)

    w1 = await worker("w1", node, fail_once)
    await publisher.publish(node, json_payload("x"))
    await tally.wait()
    await until(lambda: w1.stats.acked == 1)
    assert deliveries == [1, 2], "alone on the node, the unlocked item comes back to us"
    assert (w1.stats.failed, w1.stats.redelivered_seen) == (1, 1)


async def test_a_timed_out_lock_drops_the_result(
    publisher: Publisher, worker: WorkerFactory
) -> None:
    """The service takes the lock back (unlock notice): the late result is never acked."""
    node = unique("q")
    await publisher.create_queue(node, lock_timeout=1)
    tally = Tally(1)

    async def slow_first(job: Job) -> None:
        if job.delivery == 1:
            await until(lambda: job.lost)
            return
        tally.record(job.item_id)

    w1 = await worker("w1", node, slow_first, lock_extend=0)  # no keep-alive: it times out
    await publisher.publish(node, json_payload("slow"))
    await tally.wait()
    await until(lambda: w1.stats.acked == 1)
    assert w1.stats.lost == 1


async def test_lock_extension_keeps_a_long_job(publisher: Publisher, worker: WorkerFactory) -> None:
    node = unique("q")
    await publisher.create_queue(node, lock_timeout=2)
    tally = Tally(1)

    async def long_job(job: Job) -> None:
        await asyncio.sleep(2.6)  # longer than the lock timeout: time passing is the point
        tally.record(job.item_id)

    w1 = await worker("w1", node, long_job, lock_extend=2)
    await publisher.publish(node, json_payload("long"))
    await tally.wait()
    await until(lambda: w1.stats.acked == 1)
    assert w1.stats.lost == 0
    assert w1.stats.extended >= 2


async def test_stop_drains_then_leaves_the_rest_to_others(
    publisher: Publisher, worker: WorkerFactory
) -> None:
    node = unique("q")
    await publisher.create_queue(node, lock_timeout=60)
    release = asyncio.Event()
    started: list[str] = []

    async def blocked(job: Job) -> None:
        started.append(job.item_id)
        await release.wait()

    w1 = await worker("w1", node, blocked, queue_requests=2)
    for n in range(4):
        await publisher.publish(node, json_payload(n))
    await until(lambda: len(started) == 2)
    stopping = asyncio.ensure_future(w1.stop(grace=TIMEOUT))
    await asyncio.sleep(0)  # the stop has begun: no new work is taken from here on
    release.set()
    await asyncio.wait_for(stopping, TIMEOUT)
    assert w1.stats.acked == 2, "work in hand is finished, not dropped"
    assert len(started) == 2, "no new work after unsubscribing"

    tally = Tally(2)

    async def quick(job: Job) -> None:
        tally.record(job.item_id)

    await worker("w2", node, quick)
    await tally.wait()
    assert not set(tally.done) & set(started)


async def test_stop_after_the_grace_unlocks_unfinished_work(
    publisher: Publisher, worker: WorkerFactory
) -> None:
    node = unique("q")
    await publisher.create_queue(node, lock_timeout=60)
    started = asyncio.Event()

    async def forever(job: Job) -> None:
        started.set()
        await asyncio.Event().wait()

    w1 = await worker("w1", node, forever)
    await publisher.publish(node, json_payload("stuck"), item_id="stuck")
    await asyncio.wait_for(started.wait(), TIMEOUT)
    await asyncio.wait_for(w1.stop(grace=0.1), TIMEOUT)
    assert w1.stats.returned == 1

    tally = Tally(1)

    async def quick(job: Job) -> None:
        tally.record(job.item_id)

    await worker("w2", node, quick)
    await tally.wait()  # long before the 60 s lock timeout: the unlock handed it over
    assert list(tally.done) == ["stuck"]


async def test_a_crashed_worker_s_items_go_to_another_xep_0254_4(
    publisher: Publisher, worker: WorkerFactory
) -> None:
    """The connection drops without unsubscribing: the server's unavailable presence
    (the worker sent directed presence) makes the service hand the item over."""
    node = unique("q")
    await publisher.create_queue(node, lock_timeout=120)
    started = asyncio.Event()

    async def hang(job: Job) -> None:
        started.set()
        await asyncio.Event().wait()

    crashy = await worker("w1", node, hang)
    tally = Tally(1)

    async def quick(job: Job) -> None:
        tally.record(job.item_id)

    await publisher.publish(node, json_payload("a"), item_id="held")
    await asyncio.wait_for(started.wait(), TIMEOUT)
    await worker("w2", node, quick)
    crashy.abort()
    await tally.wait()  # far sooner than the 120 s lock timeout
    assert list(tally.done) == ["held"]


async def test_dead_letters_carry_their_origin_in_shim_headers(
    publisher: Publisher, worker: WorkerFactory
) -> None:
    node, dead = unique("q"), unique("dead")
    await publisher.create_queue(dead)
    await publisher.create_queue(node, lock_timeout=60, max_deliveries=1, dead_letter=dead)
    letters: list[Job] = []
    tally = Tally(1)

    async def always_fail(job: Job) -> None:
        raise ValueError("poison")

    async def collect(job: Job) -> None:
        letters.append(job)
        tally.record(job.item_id)

    await worker("w1", node, always_fail)
    await worker("w2", dead, collect)
    await publisher.publish(node, json_payload({"poison": True}), item_id="p1")
    await tally.wait()
    (letter,) = letters
    assert letter.json() == {"poison": True}
    assert letter.headers.get("origin-node") == node
    assert letter.headers.get("origin-item") == "p1"


async def test_delivery_is_the_service_s_count_as_an_int(
    publisher: Publisher, worker: WorkerFactory
) -> None:
    """Two workers: the item's second delivery goes to the other one, which must
    still read 2 (its own count would say 1)."""
    node = unique("q")
    await publisher.create_queue(node, lock_timeout=60)
    seen: list[tuple[str, object]] = []
    tally = Tally(1)

    def handler_for(name: str) -> Callable[[Job], Awaitable[None]]:
        async def handle(job: Job) -> None:
            seen.append((name, job.delivery))
            if job.delivery == 1:
                raise RuntimeError("first delivery fails")
            tally.record(job.item_id)

        return handle

    await worker("w1", node, handler_for("w1"))
    await worker("w2", node, handler_for("w2"))
    await publisher.publish(node, json_payload("x"))
    await tally.wait()
    assert [d for _, d in seen] == [1, 2]
    assert seen[0][0] != seen[1][0], "the unlocked item went to the other worker"
    assert all(type(d) is int for _, d in seen)


async def test_job_unlock_with_a_delay_holds_the_item_back(
    publisher: Publisher, worker: WorkerFactory
) -> None:
    node = unique("q")
    await publisher.create_queue(node, lock_timeout=60)
    times: list[float] = []
    tally = Tally(1)
    loop = asyncio.get_running_loop()

    async def later(job: Job) -> None:
        times.append(loop.time())
        if job.delivery == 1:
            await job.unlock(delay=2)
            return
        tally.record(job.item_id)

    w1 = await worker("w1", node, later)
    await publisher.publish(node, json_payload("x"))
    await tally.wait()
    assert times[1] - times[0] >= 1.9, "offered again only after the delay"
    await until(lambda: w1.stats.acked == 1)
    assert (w1.stats.unlocked, w1.stats.acked, w1.stats.failed) == (1, 1, 0)


async def test_job_dead_letter_moves_it_at_once_with_the_reason(
    publisher: Publisher, worker: WorkerFactory
) -> None:
    node, dead = unique("q"), unique("dead")
    await publisher.create_queue(dead)
    await publisher.create_queue(node, lock_timeout=60, max_deliveries=10, dead_letter=dead)
    letters: list[Job] = []
    tally = Tally(1)

    async def reject(job: Job) -> None:
        await job.dead_letter("schema v1 is not supported")

    async def collect(job: Job) -> None:
        letters.append(job)
        tally.record(job.item_id)

    w1 = await worker("w1", node, reject)
    await worker("w2", dead, collect)
    await publisher.publish(node, json_payload({"v": 1}), item_id="poison")
    await tally.wait()
    (letter,) = letters
    assert letter.headers.get("reason") == "schema v1 is not supported"
    assert letter.headers.get("origin-item") == "poison"
    assert letter.headers.get("deliveries") == "1", "one delivery, not ten"
    assert w1.stats.dead_lettered == 1
    assert await publisher.link.item_ids(node) == []


async def test_job_extend_keeps_the_lock_past_the_timeout(
    publisher: Publisher, worker: WorkerFactory
) -> None:
    node = unique("q")
    await publisher.create_queue(node, lock_timeout=1)
    tally = Tally(1)

    async def long_step(job: Job) -> None:
        await job.extend(5)
        await asyncio.sleep(1.5)  # past the node's 1 s lock timeout: the point
        tally.record(job.item_id)

    w1 = await worker("w1", node, long_step, lock_extend=0)  # job.extend alone keeps it
    await publisher.publish(node, json_payload("long"))
    await tally.wait()
    await until(lambda: w1.stats.acked == 1)
    assert (w1.stats.lost, w1.stats.extended) == (0, 1)
