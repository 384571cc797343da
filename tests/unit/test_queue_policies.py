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
from xmpp_queue.core.queue.dispatch import RoomIndex
from xmpp_queue.core.queue.locks import Release, check_release

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Queue:
    """Subscriptions with windows and loads, and the RoomIndex kept as the store keeps it."""

    def __init__(self, **windows: int) -> None:
        self.windows = dict(windows)
        self.loads = dict.fromkeys(windows, 0)
        self.order = {s: n for n, s in enumerate(windows)}
        self.index = RoomIndex()
        for s in windows:
            self.index.offer(s, 0, self.windows[s], self.order[s])

    def truth(self, subid: str) -> tuple[int, int, int] | None:
        if subid not in self.windows:
            return None
        return self.loads[subid], self.windows[subid], self.order[subid]

    def load(self, subid: str, n: int) -> None:
        self.loads[subid] = n
        self.index.offer(subid, n, self.windows[subid], self.order[subid])

    def give(self, avoid: str | None = None) -> str | None:
        """Choose, then lock one item to the chosen one (as dispatch does)."""
        chosen = self.index.best(self.truth, avoid)
        if chosen is not None:
            self.index.served(chosen)
            self.load(chosen, self.loads[chosen] + 1)
        return chosen


def test_dispatch_prefers_fewest_in_flight() -> None:
    q = Queue(a=1, b=2, c=5)
    q.load("b", 1)
    q.load("c", 3)
    assert q.index.best(q.truth) == "a"
    q.load("a", 1)
    q.load("c", 0)
    assert q.index.best(q.truth) == "c"


def test_dispatch_never_exceeds_a_window() -> None:
    q = Queue(a=1, b=2)
    q.load("a", 1)
    q.load("b", 2)
    assert q.index.best(q.truth) is None
    q.load("b", 1)
    assert q.index.best(q.truth) == "b"


def test_dispatch_breaks_ties_round_robin() -> None:
    q = Queue(x=9, y=9, z=9)
    chosen = []
    for _ in range(6):
        subid = q.give()
        assert subid is not None
        chosen.append(subid)
        q.load(subid, 0)  # acked at once: loads stay tied
    assert chosen == ["x", "y", "z", "x", "y", "z"]


def test_returned_item_avoids_previous_holder_when_another_has_room() -> None:
    q = Queue(a=1, b=2)
    assert q.index.best(q.truth, avoid="a") == "b"
    # nobody else has room: the same subscriber gets it again
    q.load("b", 2)
    assert q.index.best(q.truth, avoid="a") == "a"


def test_a_departed_subscription_is_never_chosen_and_stale_entries_are_bounded() -> None:
    q = Queue(**{f"s{n}": 3 for n in range(50)})
    for _ in range(2000):
        q.give()
        for s in q.loads:
            if q.loads[s] == 3:
                q.load(s, 0)
    del q.windows["s0"]  # gone: its entries are stale
    assert all(q.give() != "s0" for _ in range(100))
    assert len(q.index) <= 2 * 50 + 64 + 1


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
