"""The push window: slow start, additive increase, halving on push-back (no I/O)."""

from __future__ import annotations

from xmpp_queue.push.window import PushWindow


def test_slow_start_then_additive_increase_up_to_the_ceiling() -> None:
    w = PushWindow(ceiling=8)
    assert w.size == 1
    for expected in (2, 3, 4, 5, 6, 7, 8, 8):
        w.answered(204)
        assert w.size == expected


def test_push_back_halves_never_below_one_and_growth_is_then_additive() -> None:
    w = PushWindow(ceiling=64, start=16)
    w.answered(503)
    assert (w.size, w.threshold) == (8, 8)
    for _ in range(9):  # about one window of successes (8, then 8.1 ...): one more
        w.answered(200)
    assert w.size == 9
    for _ in range(10):
        w.answered(429)
    assert w.size == 1


def test_errors_that_are_not_push_back_leave_the_window() -> None:
    w = PushWindow(ceiling=8, start=4)
    for status in (500, 404, None, 302):
        w.answered(status)
    assert w.size == 4
