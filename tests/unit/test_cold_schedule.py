"""Cold delayed items' time index (``storage/schedule.py``) and their levels in the
cold tail (``storage/tail.py``), against plain sorted models.

The index keeps (due, seq) pairs in blocks of arrays; every operation must answer
as a sorted list of pairs would, across block splits, removals and loads. The
tail files a delayed seq apart from the ready ones until it comes due.
"""

from __future__ import annotations

import tracemalloc
from array import array
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from xmpp_queue.storage import schedule
from xmpp_queue.storage import tail as tail_module
from xmpp_queue.storage.schedule import DueIndex, from_us, to_us
from xmpp_queue.storage.tail import BULK_PROMOTE, ColdTail

pairs = st.tuples(st.integers(0, 40), st.integers(1, 400))
steps = st.lists(
    st.tuples(st.sampled_from(["add", "add", "remove", "pop", "load"]), pairs), max_size=150
)


@settings(max_examples=200, deadline=None)
@given(steps)
def test_the_index_answers_as_a_sorted_list_would(ops: list[tuple[str, tuple[int, int]]]) -> None:
    schedule.BLOCK, saved = 2, schedule.BLOCK  # tiny blocks: splits and empty blocks happen
    try:
        index, model = DueIndex(), set[tuple[int, int]]()
        for op, (due, seq) in ops:
            if op == "add" and (due, seq) not in model:
                index.add(due, seq)
                model.add((due, seq))
            elif op == "remove":
                assert index.remove(due, seq) == ((due, seq) in model)
                model.discard((due, seq))
            elif op == "pop":
                taken = index.pop_until(due)
                expected = sorted(p for p in model if p[0] <= due)
                assert taken == [s for _, s in expected]
                model -= set(expected)
            elif op == "load" and not model:
                loaded = [(due, seq), (due + 1, seq), (due + 1, seq + 1)]
                index.extend_sorted(
                    array("q", [d for d, _ in loaded]), array("q", [s for _, s in loaded])
                )
                model.update(loaded)
            assert len(index) == len(model)
            assert index.pairs() == sorted(model)
            assert index.first() == (min(model) if model else None)
    finally:
        schedule.BLOCK = saved


def test_due_times_convert_exactly() -> None:
    moment = datetime(2026, 11, 25, 9, 40, 0, 123457, tzinfo=UTC)
    assert from_us(to_us(moment)) == moment
    assert to_us(moment + timedelta(microseconds=1)) == to_us(moment) + 1


def test_a_delayed_seq_waits_apart_and_joins_its_level_in_publish_order_when_due() -> None:
    tail = ColdTail()
    tail.add(10, 1, 5, "plain-10")
    tail.add(30, 1, 5, "plain-30")
    tail.add_delayed(2_000, 20, 1, 5, "later-20")
    tail.add_delayed(1_000, 40, 2, 5, "later-40")
    tail.add_delayed(3_000, 5, 1, 5, "later-5")
    assert len(tail) == 5 and tail.delayed_count() == 3
    assert list(tail.seqs()) == [5, 10, 20, 30, 40]  # paging sees every one
    assert tail.count_below(25) == 3 and tail.holds(40, 2) and not tail.holds_ready(40, 2)
    assert tail.earliest_due() == 1_000 and tail.first_delayed() == 5
    assert tail.promote(2_500) == 2  # seqs 40 (due 1000) and 20 (due 2000)
    assert list(tail.levels[1].live()) == [10, 20, 30] and list(tail.levels[2].live()) == [40]
    assert tail.earliest_due() == 3_000 and tail.delayed_count() == 1
    assert not tail.remove(5, 1, 5)  # a delayed one is taken out by its due time too
    assert tail.remove(5, 1, 5, due=3_000) and tail.earliest_due() is None
    assert tail.payload_bytes == 20 and len(tail.due) == 0


def test_a_head_that_was_taken_leaves_room_for_an_older_seq() -> None:
    tail = ColdTail()
    for seq in range(100, 110):
        tail.add(seq, 1, 1, f"i{seq}")
    level = tail.levels[1]
    assert level.remove(100) and level.remove(101)
    tail.add_delayed(1, 50, 1, 1, "old")
    assert tail.promote(1) == 1
    assert level.first(3) == [50, 102, 103] and len(level) == 9
    assert list(level.live_reversed())[-2:] == [102, 50]


def test_many_due_at_once_are_promoted_in_one_pass_per_level() -> None:
    tail = ColdTail()
    count = BULK_PROMOTE + 10
    for seq in range(1, 2 * count, 2):  # odd seqs ready
        tail.add(seq, 1, 1, f"r{seq}")
    for n, seq in enumerate(range(2, 2 * count + 2, 2)):  # even seqs delayed, due scattered
        tail.add_delayed((n * 7919) % count, seq, 1 + n % 2, 1, f"d{seq}")
    assert tail.promote(count - 11) == count - 10  # due 0 .. count-11: all but 10
    assert tail.delayed_count() == 10 and len(tail.due) == 10
    ready = sorted(list(tail.levels[1].live()) + list(tail.levels[2].live()))
    assert len(ready) == 2 * count - 10 and len(tail) == 2 * count
    assert list(tail.levels[1].live()) == sorted(tail.levels[1].live())
    assert set(tail.delayed[1].live()) | set(tail.delayed[2].live()) == {
        2 * (n + 1) for n in range(count) if (n * 7919) % count > count - 11
    }


def test_a_cold_delayed_item_costs_a_few_dozen_bytes() -> None:
    """Its seq in a level, (due, seq) in the index and its id's bits in the filter:
    no object per item, whatever order the due times come in."""
    count = 100_000
    tracemalloc.start()
    try:
        tail = ColdTail()
        for seq in range(1, count + 1):
            tail.add_delayed((seq * 7919) % count, seq, 1, 130, f"{seq:032x}")
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(tail) == count and len(tail.due) == count
    assert held / count < 48, held / count


def test_seqs_taken_out_of_order_do_not_pile_up() -> None:
    level = ColdTail().delayed_level(1)
    level.extend_sorted(list(range(1, 40_001)))
    for seq in range(40_000, 1, -2):  # the even ones, newest first: never the head
        assert level.remove(seq)
    assert len(level.gone) <= 40_000 // 16 and len(level) == 20_000
    assert level.first(3) == [1, 3, 5] and level.count_below(11) == 5
    assert list(level.live_reversed())[:2] == [39_999, 39_997]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 80)), max_size=150))
def test_a_level_rewritten_without_its_gone_seqs_still_answers_as_a_set(
    ops: list[tuple[bool, int]],
) -> None:
    tail_module.GONE_SLACK, saved = 2, tail_module.GONE_SLACK
    try:
        level, model = ColdTail().level(1), set[int]()
        for add, seq in ops:
            if add:
                level.add(seq)
                model.add(seq)
            else:
                assert level.remove(seq) == (seq in model)
                model.discard(seq)
            assert list(level.live()) == sorted(model) and len(level) == len(model)
            assert level.count_below(seq) == sum(1 for s in model if s < seq)
    finally:
        tail_module.GONE_SLACK = saved
