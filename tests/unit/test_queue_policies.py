"""The pure queue policies: dispatch choice, release rules, deadlines (no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from xmpp_queue.core.errors import Forbidden, ItemLockedByOther, ItemNotFound, NotLockHolder
from xmpp_queue.core.model import Item, NodeConfig
from xmpp_queue.core.queue.deadlines import (
    dead_letter_node,
    lock_deadline,
    must_dead_letter,
    retry_available_at,
)
from xmpp_queue.core.queue.dispatch import Candidate, QueueDispatcher
from xmpp_queue.core.queue.locks import Release, check_release

NOW = datetime(2026, 1, 1, tzinfo=UTC)
A, B, C = Candidate("a", 1), Candidate("b", 2), Candidate("c", 5)


def test_dispatch_prefers_fewest_in_flight() -> None:
    d = QueueDispatcher()
    assert d.choose([A, B, C], {"a": 0, "b": 1, "c": 3}) == A
    assert d.choose([A, B, C], {"a": 1, "b": 1, "c": 0}) == C


def test_dispatch_never_exceeds_a_window() -> None:
    d = QueueDispatcher()
    assert d.choose([A, B], {"a": 1, "b": 2}) is None
    assert d.choose([A, B], {"a": 1, "b": 1}) == B


def test_dispatch_breaks_ties_round_robin() -> None:
    d = QueueDispatcher()
    big = [Candidate("x", 9), Candidate("y", 9), Candidate("z", 9)]
    chosen = [d.choose(big, {}).subid for _ in range(6)]  # type: ignore[union-attr]
    assert chosen == ["x", "y", "z", "x", "y", "z"]


def test_returned_item_avoids_previous_holder_when_another_has_room() -> None:
    d = QueueDispatcher()
    assert d.choose([A, B], {}, avoid="a") == B
    # nobody else has room: the same subscriber gets it again
    assert d.choose([A, B], {"b": 2}, avoid="a") == A


def _item(locked_by: str | None = None, lock_jid: str | None = None) -> Item:
    return Item("q", "i1", 1, "pub@x", "<p/>", NOW, NOW, locked_by=locked_by, lock_jid=lock_jid)


def test_release_error_order_item_not_found_first() -> None:
    with pytest.raises(ItemNotFound):
        check_release("q", "i1", None, "w@x/r", False, False, "unlock")


def test_release_forbidden_without_subscription_or_privilege() -> None:
    with pytest.raises(Forbidden):
        check_release("q", "i1", _item("s1", "w@x"), "eve@x/r", False, False, "unlock")


def test_release_conflict_when_locked_by_other_subscriber() -> None:
    with pytest.raises(ItemLockedByOther):
        check_release("q", "i1", _item("s1", "w@x"), "v@x/r", True, False, "unlock")


def test_release_unexpected_when_no_longer_locked_by_requester() -> None:
    with pytest.raises(NotLockHolder):
        check_release("q", "i1", _item(), "w@x/r", True, False, "retract")


def test_bare_jid_lock_is_held_by_every_resource_full_jid_lock_by_one() -> None:
    bare_lock = _item("s1", "w@x")
    assert check_release("q", "i1", bare_lock, "w@x/any", True, False, "retract") is Release.HOLDER
    full_lock = _item("s1", "w@x/one")
    assert check_release("q", "i1", full_lock, "w@x/one", True, False, "retract") is Release.HOLDER
    with pytest.raises(ItemLockedByOther):
        check_release("q", "i1", full_lock, "w@x/two", True, False, "retract")


def test_publisher_may_retract_a_locked_item_but_not_unlock_it() -> None:
    locked = _item("s1", "w@x")
    assert check_release("q", "i1", locked, "p@x/r", False, True, "retract") is Release.PRIVILEGED
    with pytest.raises(ItemLockedByOther):
        check_release("q", "i1", locked, "p@x/r", False, True, "unlock")


def test_retry_delay_doubles_and_is_capped() -> None:
    cfg = NodeConfig(queue=True, queue_retry_delay=2, queue_retry_delay_max=10)
    delays = [retry_available_at(cfg, n, NOW) - NOW for n in (1, 2, 3, 4)]  # type: ignore[operator]
    assert delays == [timedelta(seconds=s) for s in (2, 4, 8, 10)]
    immediate = NodeConfig(queue=True, queue_retry_delay=0)  # XEP-0254's hand-over
    assert retry_available_at(immediate, 3, NOW) is None
    # The default backs off: 1 s after the first delivery, doubling.
    assert retry_available_at(NodeConfig(queue=True), 3, NOW) == NOW + timedelta(seconds=4)


def test_dead_letter_rule_and_default_node() -> None:
    cfg = NodeConfig(queue=True, queue_max_deliveries=3)
    assert not must_dead_letter(cfg, 2)
    assert must_dead_letter(cfg, 3)
    assert not must_dead_letter(NodeConfig(queue=True, queue_max_deliveries=0), 10_000)
    # The default limit dead-letters (never drops) after 10 deliveries.
    assert not must_dead_letter(NodeConfig(queue=True), 9)
    assert must_dead_letter(NodeConfig(queue=True), 10)
    assert dead_letter_node("jobs", cfg) == "jobs/dead-letter"
    assert lock_deadline(NodeConfig(queue_lock_timeout=30), NOW) == NOW + timedelta(seconds=30)
