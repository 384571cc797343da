"""QueueStream's fast lane and Worker's stop order, without a network.

The stream gets a fake transport (it records socket writes) and raw stanzas
are fed to ``_spawn_event`` the way slixmpp's parser hands them over.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Mapping, Sequence
from xml.etree import ElementTree as ET

import pytest

from xmpp_queue.client.connection import QueueStream
from xmpp_queue.client.errors import ConnectionLost, StanzaError
from xmpp_queue.client.jobs import Job
from xmpp_queue.client.link import PubSubLink
from xmpp_queue.client.wire import ItemEvent, SubscriptionResult, UnlockEvent
from xmpp_queue.client.worker import Worker


class FakeTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)


def stanza(xml: str) -> ET.Element:
    return ET.fromstring(f"<s xmlns='jabber:client'>{xml}</s>")[0]


@pytest.fixture
async def stream() -> QueueStream:
    s = QueueStream("bee@localhost/r", "pw", allow_plain=True)
    s.transport = FakeTransport()
    return s


async def test_writes_in_one_tick_leave_in_one_socket_write(stream: QueueStream) -> None:
    stream.write("<presence/>")
    stream.request("q", "<a xmlns='x'/>")
    stream.request("q", "<b xmlns='x'/>")
    await asyncio.sleep(0)
    (data,) = stream.transport.writes
    assert data.startswith(b"<presence/><iq type='set' id='q")
    assert data.count(b"<iq ") == 2


async def test_answers_resolve_their_futures_by_id(stream: QueueStream) -> None:
    ok_id, ok = stream.request("q", "<a xmlns='x'/>")
    bad_id, bad = stream.request("q", "<a xmlns='x'/>")
    stream._spawn_event(stanza(f"<iq type='result' id='{ok_id}' from='q'/>"))
    stream._spawn_event(
        stanza(
            f"<iq type='error' id='{bad_id}' from='q'><error type='cancel'>"
            "<item-not-found xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"
        )
    )
    assert (await ok).get("id") == ok_id
    with pytest.raises(StanzaError, match="item-not-found"):
        await bad
    assert stream.outstanding == 0


async def test_pubsub_events_go_to_the_callback(stream: QueueStream) -> None:
    got: list[ET.Element] = []
    stream.on_pubsub_event = got.append
    stream._spawn_event(
        stanza(
            "<message from='q'><event xmlns='http://jabber.org/protocol/pubsub#event'>"
            "<items node='n'><retract id='1'/></items></event></message>"
        )
    )
    assert len(got) == 1


async def test_a_closed_stream_fails_what_is_outstanding(stream: QueueStream) -> None:
    _, pending = stream.request("q", "<a xmlns='x'/>")
    closed: list[bool] = []
    stream.on_closed = lambda: closed.append(True)
    stream._on_disconnected("test")
    with pytest.raises(ConnectionLost):
        await pending
    assert closed == [True]


async def test_a_request_on_a_closed_stream_fails_at_once(stream: QueueStream) -> None:
    stream.transport = None
    with pytest.raises(ConnectionLost):
        stream.request("q", "<a xmlns='x'/>")


async def test_the_link_ignores_events_not_from_its_service(stream: QueueStream) -> None:
    link = PubSubLink(stream, "queue.localhost")
    got: list[object] = []
    link.on_events = got.extend
    event = (
        "<message from='{}'><event xmlns='http://jabber.org/protocol/pubsub#event'>"
        "<items node='n'><retract id='1'/></items></event></message>"
    )
    stream._spawn_event(stanza(event.format("mallory@localhost")))
    assert got == []
    stream._spawn_event(stanza(event.format("queue.localhost")))
    assert len(got) == 1


class FakeLink:
    """A PubSubLink stand-in that logs the order of what a worker asks."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.on_events = None
        self.on_closed = None
        self.connected = True
        self.reasons: dict[str, str] = {}
        self.node_lock_timeout: int | None = None

    async def lock_timeout(self, node: str) -> int | None:
        return self.node_lock_timeout

    def send_presence(self, available: bool = True) -> None:
        self.log.append("presence" if available else "unavailable")

    async def ping_service(self) -> None:
        return None

    async def subscribe_queue(
        self, node: str, queue_requests: int, max_batch: int = 1, batch_wait: float = 0.0
    ) -> SubscriptionResult:
        batch = f" batch {max_batch}" if max_batch > 1 else ""
        self.log.append(f"subscribe {node} {queue_requests}{batch}")
        return SubscriptionResult("sub-1", "subscribed")

    async def unsubscribe(self, node: str, subid: str | None = None) -> None:
        self.log.append(f"unsubscribe {subid}")

    async def retract(self, node: str, item_id: str) -> None:
        self.log.append(f"retract {item_id}")

    async def unlock(self, node: str, item_id: str, reason: str = "") -> None:
        self.log.append(f"unlock {item_id}")
        if reason:
            self.reasons[item_id] = reason

    async def retract_items(self, node: str, item_ids: Sequence[str]) -> None:
        self.log.append(f"retract {','.join(item_ids)}")

    async def unlock_items(
        self, node: str, item_ids: Sequence[str], reasons: Mapping[str, str] | None = None
    ) -> None:
        self.log.append(f"unlock {','.join(item_ids)}")
        self.reasons.update(reasons or {})

    async def extend(self, node: str, item_id: str, seconds: int) -> None:
        self.log.append(f"extend {item_id}")

    async def close(self) -> None:
        self.connected = False
        self.log.append("close")

    def kill(self) -> None:
        self.connected = False
        self.log.append("kill")


def make_worker(handler, link: FakeLink, **kw: object) -> Worker:  # type: ignore[no-untyped-def]
    async def factory() -> FakeLink:
        return link

    return Worker(
        "bee@localhost", "pw", "queue.localhost", "jobs", handler, link_factory=factory, **kw
    )


def deliver(link: FakeLink, item_id: str, headers: Mapping[str, str] | None = None) -> None:
    assert link.on_events is not None
    link.on_events([ItemEvent("jobs", item_id, None, headers or {})])


async def test_stop_unsubscribes_first_then_drains_then_leaves() -> None:
    link = FakeLink()
    release = asyncio.Event()

    async def handler(job: Job) -> None:
        await release.wait()

    worker = make_worker(handler, link, queue_requests=2)
    await worker.start()
    assert link.log == ["presence", "subscribe jobs 2"]
    deliver(link, "a")
    await asyncio.sleep(0)
    stopping = asyncio.ensure_future(worker.stop(grace=30))
    for _ in range(5):
        await asyncio.sleep(0)
    assert link.log[-1] == "unsubscribe sub-1"
    deliver(link, "late")
    release.set()
    await asyncio.wait_for(stopping, 1)
    assert link.log[2:] == ["unsubscribe sub-1", "unlock late", "retract a", "close"]
    assert worker.stats.acked == 1 and worker.stats.returned == 1


async def test_stop_after_the_grace_unlocks_unfinished_work() -> None:
    link = FakeLink()

    async def never(job: Job) -> None:
        await asyncio.Event().wait()

    worker = make_worker(never, link, queue_requests=1)
    await worker.start()
    deliver(link, "a")
    await asyncio.sleep(0)
    await asyncio.wait_for(worker.stop(grace=0), 1)
    assert link.log[2:] == ["unsubscribe sub-1", "unlock a", "close"]
    await asyncio.wait_for(worker.wait(), 1)


async def test_without_reconnect_a_server_side_close_ends_run_with_connection_lost() -> None:
    link = FakeLink()

    async def handler(job: Job) -> None:
        return None

    worker = make_worker(handler, link, reconnect=None)
    run = asyncio.ensure_future(worker.run(handle_signals=False))
    await asyncio.sleep(0)
    assert link.on_closed is not None
    link.on_closed()
    with pytest.raises(ConnectionLost):
        await asyncio.wait_for(run, 1)


async def test_abort_drops_the_connection_without_unsubscribing() -> None:
    link = FakeLink()

    async def handler(job: Job) -> None:
        await asyncio.Event().wait()

    worker = make_worker(handler, link)
    run = asyncio.ensure_future(worker.run(handle_signals=False))
    await asyncio.sleep(0)
    deliver(link, "a")
    worker.abort()
    assert await asyncio.wait_for(run, 1) is worker.stats
    assert link.log == ["presence", "subscribe jobs 1", "kill"]


async def test_unlock_events_for_other_nodes_are_ignored() -> None:
    link = FakeLink()
    started = asyncio.Event()

    async def handler(job: Job) -> None:
        started.set()
        await asyncio.Event().wait()

    worker = make_worker(handler, link)
    await worker.start()
    deliver(link, "a")
    await started.wait()
    assert link.on_events is not None
    link.on_events([UnlockEvent("other", "a")])
    assert worker.in_flight == 1
    link.on_events([UnlockEvent("jobs", "a")])
    assert worker.in_flight == 0
    worker.abort()


async def test_sigterm_drains_the_worker_and_run_returns() -> None:
    link = FakeLink()
    release = asyncio.Event()

    async def handler(job: Job) -> None:
        await release.wait()

    worker = make_worker(handler, link)
    run = asyncio.ensure_future(worker.run(handle_signals=True))
    for _ in range(5):
        await asyncio.sleep(0)
    deliver(link, "a")
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL, "handler not installed"
    signal.raise_signal(signal.SIGTERM)
    for _ in range(5):
        await asyncio.sleep(0)
    assert "unsubscribe sub-1" in link.log, "the signal started a drain"
    release.set()
    stats = await asyncio.wait_for(run, 1)
    assert stats.acked == 1
    assert link.log[-2:] == ["retract a", "close"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, "handlers are removed"
