"""Refusals are counted by condition and logged at most once per JID per interval
(issue 27, point 8). The same through Prosody: tests/integration/test_refusals_and_readiness.py."""

from __future__ import annotations

import logging

import pytest

from xmpp_queue.xmpp.refusals import RefusalLog


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "event=request_refused" in r.getMessage()]


def test_one_line_per_jid_per_interval_then_the_count_of_lines_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    refusals = RefusalLog(clock, interval=60.0)
    counted: list[str] = []
    refusals.on_refused = counted.append
    with caplog.at_level(logging.INFO, "xmpp_queue.xmpp.errors"):
        for n in range(1000):
            refusals.note(
                f"mallory@example.org/r{n}",
                "event=request_refused n=%d",
                n,
                condition="bad-request",
            )
        refusals.note("alice@example.org/a", "event=request_refused n=%d", 0, condition="forbidden")
        clock.now = 61.0
        refusals.note(
            "mallory@example.org/x", "event=request_refused n=%d", 1000, condition="bad-request"
        )
    assert lines(caplog) == [
        "event=request_refused n=0 suppressed=0",
        "event=request_refused n=0 suppressed=0",
        "event=request_refused n=1000 suppressed=999",
    ]
    assert refusals.counts == {"bad-request": 1001, "forbidden": 1}
    assert len(counted) == 1002


def test_the_memory_of_jids_is_bounded() -> None:
    clock = Clock()
    refusals = RefusalLog(clock, interval=60.0, max_jids=100)
    for n in range(1000):
        refusals.note(f"u{n}@example.org", "event=request_refused", condition="forbidden")
    assert len(refusals._seen) <= 100
