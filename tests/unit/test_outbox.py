"""The outbox routes each effect to the sink of the subscriber it is for (issue 22, point 1)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest

from xmpp_queue.core.effects import Effect, ItemNotice, NoticeItem, RetractNotice, UnlockNotice
from xmpp_queue.runtime.outbox import Outbox


class Recorder:
    """A sink that keeps each call it gets, in order."""

    def __init__(self) -> None:
        self.calls: list[list[Effect]] = []

    def deliver(self, effects: Sequence[Effect]) -> None:
        self.calls.append(list(effects))

    @property
    def effects(self) -> list[Effect]:
        return [e for call in self.calls for e in call]


class Broken:
    def deliver(self, effects: Sequence[Effect]) -> None:
        raise RuntimeError("socket gone")


def notice(to: str, item_id: str) -> ItemNotice:
    return ItemNotice(to, "jobs", (NoticeItem(item_id, "<j/>"),))


def test_every_effect_goes_to_the_default_sink_when_nothing_is_routed() -> None:
    xmpp = Recorder()
    outbox = Outbox(xmpp)
    effects = (notice("a@x/1", "i1"), RetractNotice("b@x/1", "jobs", ("i0",)))
    outbox.send(effects)
    assert xmpp.calls == [list(effects)]  # one call: the hot path
    outbox.send(())
    assert len(xmpp.calls) == 1


def test_an_effect_for_a_routed_subscriber_goes_to_its_sink_in_order() -> None:
    xmpp, push = Recorder(), Recorder()
    outbox = Outbox(xmpp)
    outbox.route("hook@push", push)
    effects = (
        notice("a@x/1", "i1"),
        notice("hook@push", "i2"),
        UnlockNotice("hook@push", "jobs", "i0", "timeout"),
        notice("b@x/1", "i3"),
    )
    outbox.send(effects)
    assert xmpp.effects == [effects[0], effects[3]]
    assert push.effects == [effects[1], effects[2]]
    # consecutive effects of one sink go in one call; the global order is kept
    assert [len(c) for c in xmpp.calls] == [1, 1] and [len(c) for c in push.calls] == [2]
    assert outbox.sink_for("hook@push") is push and outbox.sink_for("a@x/1") is xmpp
    outbox.unroute("hook@push")
    outbox.send((notice("hook@push", "i4"),))
    assert xmpp.effects[-1].items[0].item_id == "i4"  # type: ignore[union-attr]


def test_a_failing_sink_is_logged_and_the_others_still_get_theirs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    xmpp = Recorder()
    outbox = Outbox(xmpp)
    outbox.route("hook@push", Broken())
    with caplog.at_level(logging.ERROR, logger="xmpp_queue"):
        outbox.send((notice("hook@push", "i1"), notice("a@x/1", "i2")))
    assert [e.to for e in xmpp.effects] == ["a@x/1"]
    assert len([r for r in caplog.records if r.exc_info]) == 1
