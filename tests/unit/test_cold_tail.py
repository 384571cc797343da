"""The cold tail's seq index (``storage/tail.py``) against a sorted-set model.

The tail keeps a node's cold items as seqs per priority level, with a head
offset and a set of gone seqs instead of deleting from the array; every
operation must still answer as a plain sorted set of live seqs would.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from xmpp_queue.storage.id_filter import IdFilter
from xmpp_queue.storage.tail import ColdTail, TailLevel

Step = tuple[str, int]

steps = st.lists(
    st.tuples(st.sampled_from(["add", "remove", "remove_head", "load"]), st.integers(1, 60)),
    max_size=120,
)


@settings(max_examples=200, deadline=None)
@given(steps)
def test_a_level_answers_as_a_sorted_set_would(ops: list[Step]) -> None:
    level, model = TailLevel(), set[int]()
    for op, seq in ops:
        if op == "add":
            level.add(seq)
            model.add(seq)
        elif op == "remove":
            assert level.remove(seq) == (seq in model)
            model.discard(seq)
        elif op == "remove_head" and model:
            head = min(model)
            assert level.first(1) == [head]
            assert level.remove(head)
            model.discard(head)
        elif op == "load":
            level.extend_sorted([seq, seq + 100])
            model.update((seq, seq + 100))
        ordered = sorted(model)
        assert len(level) == len(model)
        assert list(level.live()) == ordered
        assert list(level.live_reversed()) == ordered[::-1]
        assert level.first(3) == ordered[:3]
        assert (seq in level) == (seq in model)
        assert level.count_below(seq) == sum(1 for s in model if s < seq)


def test_a_long_head_is_compacted_and_stays_correct() -> None:
    level = TailLevel()
    level.extend_sorted(list(range(1, 20_001)))
    for seq in range(1, 15_001):
        assert level.remove(seq)
    assert level.head < 15_000  # compacted on the way
    assert len(level) == 5_000 and level.first(2) == [15_001, 15_002]
    assert level.count_below(15_010) == 9


def test_levels_merge_in_publish_order_and_count_their_bytes() -> None:
    tail = ColdTail()
    for seq, priority in ((5, 1), (2, 2), (9, 1), (7, 0)):
        tail.add(seq, priority, 10, f"id{seq}")
    assert list(tail.seqs()) == [2, 5, 7, 9]
    assert list(tail.seqs_reversed()) == [9, 7, 5, 2]
    assert tail.payload_bytes == 40 and len(tail) == 4
    assert tail.holds(7, 0) and not tail.holds(7, 1)
    assert not tail.remove(7, 1, 10)  # wrong level: not there
    assert tail.remove(7, 0, 10) and tail.payload_bytes == 30
    assert tail.count_below(9) == 2


def test_the_id_filter_never_forgets_and_rarely_guesses() -> None:
    ids = IdFilter()
    added = [f"item-{n}" for n in range(20_000)]  # several parts
    for item_id in added:
        ids.add(item_id)
    assert all(item_id in ids for item_id in added)  # no false negatives
    strangers = sum(f"other-{n}" in ids for n in range(20_000))
    assert strangers < 20_000 * 0.02  # a few false positives, each a database read


def test_a_loaded_tail_asks_the_database_until_its_loaded_items_are_gone() -> None:
    tail = ColdTail()
    tail.level(1).extend_sorted([1, 2, 3])
    tail.unknown_upto = 3  # loaded: ids unknown
    tail.add(10, 1, 0, "new")
    assert tail.may_hold("anything")  # a loaded one might be it
    for seq in (1, 2, 3):
        tail.remove(seq, 1, 0)
    assert not tail.may_hold("anything") and tail.may_hold("new")
