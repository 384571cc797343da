"""Coalesced writes: what one event-loop tick sends leaves as one transport write."""

from __future__ import annotations

import asyncio

from tests.kit.stanzas import (
    ALICE,
    BOB,
    FakeTransport,
    Stream,
    local,
    make_queue,
    pubsub,
    subscribe_worker,
)
from xmpp_queue.xmpp.transport import CoalescingTransport


async def test_writes_in_one_tick_are_one_write() -> None:
    inner = FakeTransport()
    transport = CoalescingTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
    for n in range(5):
        transport.write(f"<s{n}/>".encode())
    assert inner.writes == []
    await asyncio.sleep(0)
    assert inner.writes == [b"<s0/><s1/><s2/><s3/><s4/>"]
    transport.write(b"<later/>")
    await asyncio.sleep(0)
    assert inner.writes[-1] == b"<later/>" and transport.flushes == 2


async def test_close_flushes_abort_drops_and_closed_transports_get_nothing() -> None:
    loop = asyncio.get_running_loop()
    inner = FakeTransport()
    transport = CoalescingTransport(inner, loop)  # type: ignore[arg-type]
    transport.write(b"<bye/>")
    transport.close()
    assert inner.writes == [b"<bye/>"] and inner.closed
    await asyncio.sleep(0)  # the scheduled flush finds nothing left
    assert inner.writes == [b"<bye/>"]

    inner = FakeTransport()
    transport = CoalescingTransport(inner, loop)  # type: ignore[arg-type]
    transport.write(b"<lost/>")
    transport.abort()
    await asyncio.sleep(0)
    assert inner.writes == []

    inner = FakeTransport()
    transport = CoalescingTransport(inner, loop)  # type: ignore[arg-type]
    transport.write(b"<late/>")
    inner.closed = True
    await asyncio.sleep(0)
    assert inner.writes == []
    assert transport.get_extra_info("peername", "none") == "none"  # delegated


async def test_a_reply_and_its_notifications_leave_in_one_write(stream: Stream) -> None:
    await make_queue(stream)
    await subscribe_worker(stream, ALICE, 5)
    await subscribe_worker(stream, BOB, 5)
    # a burst: five publishes arrive in one read from the socket
    burst = "".join(
        f"<iq type='set' id='p{n}' from='pub@example.org/engine' to='pubsub.example.org'>"
        + pubsub(f"<publish node='jobs'><item id='j{n}'><j xmlns='urn:j'/></item></publish>")
        + "</iq>"
        for n in range(5)
    )
    before = len(stream.transport.writes)
    out = await stream.send(burst)
    assert sorted(local(s) for s in out) == ["iq"] * 5 + ["message"] * 5
    # all ten stanzas in one write, not one write per stanza
    assert len(stream.transport.writes) - before == 1
    assert isinstance(stream.comp.transport, CoalescingTransport)
