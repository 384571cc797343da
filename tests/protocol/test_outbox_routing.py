"""Through the real component: effects leave by the outbox, to the subscriber's sink.

A worker routed to another sink (as an HTTP push subscription will be) gets its
notifications there; the XMPP stream carries the publisher's answer and nothing
for that worker. The admin commands and the timer use the same outbox.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from tests.kit.stanzas import (
    ALICE,
    BOB,
    Stream,
    local,
    make_queue,
    messages,
    publish,
    subscribe_worker,
)
from xmpp_queue.core.effects import Effect, ItemNotice, UnlockNotice


class Recorder:
    def __init__(self) -> None:
        self.effects: list[Effect] = []

    def deliver(self, effects: Sequence[Effect]) -> None:
        self.effects.extend(effects)


async def test_a_routed_subscriber_gets_its_notices_at_its_sink(stream: Stream) -> None:
    other = Recorder()
    stream.comp.outbox.route(ALICE, other)
    await make_queue(stream, pubsub__queue_lock_timeout="30", pubsub__queue_retry_delay="0")
    await subscribe_worker(stream, ALICE, 1)
    reply, out = await publish(stream, "jobs", "job1")
    assert reply.get("type") == "result"
    assert messages(out) == []  # nothing on the XMPP stream for ALICE
    [delivered] = other.effects
    assert isinstance(delivered, ItemNotice) and delivered.items[0].item_id == "job1"

    # The timer's unlock goes the same way; the item then goes to BOB over XMPP.
    await subscribe_worker(stream, BOB, 1)
    stream.clock.advance(31)
    await stream.deadlines.sweep()
    await stream.settle()
    notes = messages(stream.take())
    assert [(local(m), m.get("to")) for m in notes] == [("message", BOB)]
    assert isinstance(other.effects[-1], UnlockNotice)
    assert other.effects[-1].reason == "timeout"
    assert stream.deadlines.armed_for == stream.clock() + timedelta(seconds=30)
