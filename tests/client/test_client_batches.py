"""The client's side of batches (issue 14): several items per notification, acks and
nacks coalesced into XEP-0060 §13.11 retracts and our batch ``<unlock/>``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from xml.etree import ElementTree as ET

import pytest

from tests.client.test_client_stream import FakeLink, deliver, make_worker
from xmpp_queue.client import wire, wire_locks
from xmpp_queue.client.acks import Coalescer
from xmpp_queue.client.errors import ConnectionLost, StanzaError
from xmpp_queue.client.jobs import Job
from xmpp_queue.client.wire import ItemEvent


def test_7_1_2_1_several_items_parse_with_their_own_headers() -> None:
    message = ET.fromstring(
        "<message xmlns='jabber:client' from='q'>"
        "<event xmlns='http://jabber.org/protocol/pubsub#event'><items node='jobs'>"
        "<item id='a'><job xmlns='urn:x'>1</job><headers xmlns='http://jabber.org/protocol/shim'>"
        "<header name='delivery-attempt'>2</header></headers></item>"
        "<item id='b'><headers xmlns='http://jabber.org/protocol/shim'>"
        "<header name='delivery-attempt'>1</header></headers></item>"
        "</items></event><headers xmlns='http://jabber.org/protocol/shim'>"
        "<header name='SubID'>s1</header></headers></message>"
    )
    a, b = wire.parse_event(message)
    assert isinstance(a, ItemEvent) and isinstance(b, ItemEvent)
    assert a.element is not None and a.element.tag == "{urn:x}job"
    assert a.headers == {"SubID": "s1", "delivery-attempt": "2"}
    assert b.element is None  # no payload: the headers are not mistaken for one
    assert b.headers == {"SubID": "s1", "delivery-attempt": "1"}


def test_13_11_retract_and_unlock_builders_name_every_item() -> None:
    retract = ET.fromstring(wire.retract("jobs", ["a", "b'"]))
    assert [i.get("id") for i in retract.iter(f"{{{wire.PUBSUB_NS}}}item")] == ["a", "b'"]
    unlock = ET.fromstring(wire_locks.unlock_items("jobs", ["a", "b"]))
    (el,) = list(unlock)
    assert el.tag == f"{{{wire.EXTEND_NS}}}unlock"
    assert [i.get("id") for i in el] == ["a", "b"]


class Recorder:
    def __init__(self, refuse: set[str] | None = None) -> None:
        self.sent: list[tuple[str, ...]] = []
        self.refuse = refuse or set()
        self.gate = asyncio.Event()
        self.gate.set()

    async def many(self, node: str, entries: Sequence[tuple[str, str]]) -> None:
        ids = [item_id for item_id, _ in entries]
        self.sent.append(tuple(ids))
        await self.gate.wait()
        bad = [i for i in ids if i in self.refuse]
        if bad:  # all or none: the first failure names the error
            raise StanzaError("unexpected-request", bad[0], "wait")

    async def one(self, node: str, entry: tuple[str, str]) -> None:
        await self.many(node, [entry])


async def test_acks_finished_together_share_one_request() -> None:
    rec = Recorder()
    acks = Coalescer(rec.many, rec.one, limit=10)
    await asyncio.gather(*(acks.submit("jobs", f"i{n}") for n in range(4)))
    assert rec.sent == [("i0", "i1", "i2", "i3")]


async def test_acks_arriving_during_a_request_go_in_the_next_one_up_to_the_limit() -> None:
    rec = Recorder()
    rec.gate.clear()
    acks = Coalescer(rec.many, rec.one, limit=2)
    first = asyncio.ensure_future(acks.submit("jobs", "a"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert rec.sent == [("a",)]  # the first ack leaves at once
    later = [asyncio.ensure_future(acks.submit("jobs", x)) for x in "bcd"]
    await asyncio.sleep(0)
    rec.gate.set()
    await asyncio.gather(first, *later)
    assert rec.sent == [("a",), ("b", "c"), ("d",)]


async def test_a_refused_batch_is_retried_item_by_item_so_each_gets_its_own_answer() -> None:
    rec = Recorder(refuse={"b"})
    acks = Coalescer(rec.many, rec.one, limit=10)
    results = await asyncio.gather(*(acks.submit("jobs", x) for x in "abc"), return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], StanzaError) and results[1].condition == "unexpected-request"
    assert rec.sent == [("a", "b", "c"), ("a",), ("b",), ("c",)]


async def test_a_lost_stream_fails_every_ack_of_the_batch() -> None:
    async def lost(node: str, entries: Sequence[tuple[str, str]]) -> None:
        raise ConnectionLost("gone")

    async def lost_one(node: str, entry: tuple[str, str]) -> None:
        raise ConnectionLost("gone")

    acks = Coalescer(lost, lost_one, limit=10)
    results = await asyncio.gather(*(acks.submit("jobs", x) for x in "ab"), return_exceptions=True)
    assert all(isinstance(r, ConnectionLost) for r in results)


async def test_worker_opting_in_subscribes_with_max_batch_and_batches_acks_and_nacks() -> None:
    link = FakeLink()

    async def handler(job: Job) -> None:
        if job.item_id.startswith("bad"):
            raise RuntimeError("no")

    worker = make_worker(handler, link, queue_requests=8, max_batch=4)
    await worker.start()
    assert link.log == ["presence", "subscribe jobs 8 batch 4"]
    assert link.on_events is not None
    link.on_events([ItemEvent("jobs", i, None, {}) for i in ("a", "b", "bad1", "c", "bad2")])
    for _ in range(10):
        await asyncio.sleep(0)
    assert sorted(link.log[2:]) == ["retract a,b,c", "unlock bad1,bad2"]
    assert worker.stats.acked == 3 and worker.stats.failed == 2
    await worker.stop(grace=1)


async def test_plain_worker_sends_one_ack_per_item() -> None:
    link = FakeLink()

    async def handler(job: Job) -> None:
        return None

    worker = make_worker(handler, link, queue_requests=4)
    await worker.start()
    assert link.log == ["presence", "subscribe jobs 4"]
    assert link.on_events is not None
    link.on_events([ItemEvent("jobs", i, None, {}) for i in "ab"])
    for _ in range(10):
        await asyncio.sleep(0)
    assert link.log[2:] == ["retract a", "retract b"]
    await worker.stop(grace=1)


def test_max_batch_is_checked_at_construction() -> None:
    async def handler(job: Job) -> None:
        return None

    with pytest.raises(ValueError):
        make_worker(handler, FakeLink(), max_batch=0)


async def test_a_lingering_ack_waits_for_others_and_they_share_one_request() -> None:
    rec = Recorder()
    acks = Coalescer(rec.many, rec.one, limit=10, linger=0.05)
    first = asyncio.ensure_future(acks.submit("jobs", "a"))
    await asyncio.sleep(0.01)
    assert rec.sent == []  # lingering, where a plain coalescer would have sent "a"
    second = asyncio.ensure_future(acks.submit("jobs", "b"))
    await asyncio.gather(first, second)
    assert rec.sent == [("a", "b")]


async def test_a_lingering_lane_leaves_at_once_when_the_limit_waits() -> None:
    rec = Recorder()
    acks = Coalescer(rec.many, rec.one, limit=3, linger=5.0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.gather(*(acks.submit("jobs", x) for x in "abc"))
    assert rec.sent == [("a", "b", "c")]
    assert loop.time() - started < 1.0  # not the 5 s linger


async def test_flush_sends_a_lingering_ack_now_and_ends_lingering() -> None:
    rec = Recorder()
    acks = Coalescer(rec.many, rec.one, limit=10, linger=5.0)
    first = asyncio.ensure_future(acks.submit("jobs", "a"))
    await asyncio.sleep(0.01)
    acks.flush()
    await asyncio.wait_for(first, 1.0)
    await asyncio.wait_for(acks.submit("jobs", "b"), 1.0)  # no linger after a flush
    assert rec.sent == [("a",), ("b",)]


async def test_a_worker_with_ack_linger_groups_a_trickle_of_acks() -> None:
    link = FakeLink()

    async def handler(job: Job) -> None:
        if job.item_id == "bad":
            raise RuntimeError("no")

    worker = make_worker(handler, link, queue_requests=8, ack_linger=0.2)
    await worker.start()
    assert link.log == ["presence", "subscribe jobs 8"]  # no batched notifications asked
    for item_id in ("a", "bad", "b"):  # one notification each, a trickle
        deliver(link, item_id)
        await asyncio.sleep(0.01)
    assert link.log[2:] == ["unlock bad"]  # a nack does not linger
    for item_id in ("c", "d"):  # the fourth waiting ack is half the window: it leaves now
        deliver(link, item_id)
        await asyncio.sleep(0.01)
    assert link.log[2:] == ["unlock bad", "retract a,b,c,d"]
    deliver(link, "e")
    await asyncio.sleep(0.01)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await worker.stop(grace=1)
    assert loop.time() - started < 0.15  # stopping flushed it: no 0.2 s linger
    assert link.log.count("retract e") == 1
    assert worker.stats.acked == 5 and worker.stats.failed == 1


def test_ack_linger_is_checked_at_construction() -> None:
    async def handler(job: Job) -> None:
        return None

    for bad in (-0.1, 11.0):
        with pytest.raises(ValueError, match="ack_linger"):
            make_worker(handler, FakeLink(), ack_linger=bad)


async def test_a_lingering_batch_worker_still_acks_a_whole_notification_in_one_retract() -> None:
    link = FakeLink()

    async def handler(job: Job) -> None:
        return None

    worker = make_worker(handler, link, queue_requests=8, max_batch=8, ack_linger=0.2)
    await worker.start()
    assert link.on_events is not None
    link.on_events([ItemEvent("jobs", i, None, {}) for i in "abcdefgh"])
    for _ in range(10):
        await asyncio.sleep(0)
    # Half the window waiting ends the linger; the request still takes all eight.
    assert link.log[2:] == ["retract a,b,c,d,e,f,g,h"]
    await worker.stop(grace=1)
