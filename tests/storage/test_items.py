"""Contract: items, publish order and XEP-0059 paging, on every store."""

from __future__ import annotations

from datetime import UTC, timedelta, timezone

import pytest

from xmpp_queue.core.errors import PageNotFound
from xmpp_queue.core.model import ItemPage, PageRequest
from xmpp_queue.core.ports import Store, Transaction

from .samples import T0, at, item, node


async def fill(tx: Transaction, node_id: str, count: int) -> None:
    await tx.nodes.add(node(node_id))
    for n in range(1, count + 1):
        await tx.items.put(item(node_id, f"i{n}"))


def ids(page: ItemPage) -> list[str]:
    return [i.item_id for i in page.items]


async def test_put_assigns_a_strictly_increasing_seq_across_the_store(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.nodes.add(node("a"))
        await tx.nodes.add(node("b"))
        seqs = [
            (await tx.items.put(item(node_id, f"i{n}"))).seq
            for n, node_id in enumerate(["a", "b", "a", "b"])
        ]
        assert seqs == sorted(seqs) and len(set(seqs)) == 4
        # Deleting the newest item does not let its seq be handed out again.
        assert await tx.items.remove("b", "i3")
        again = await tx.items.put(item("b", "i4"))
        assert again.seq > seqs[-1]
        await tx.commit()


async def test_item_round_trips_with_headers_and_aware_utc_times(store: Store) -> None:
    plus_five = timezone(timedelta(hours=5, minutes=30))
    published = at(1.5).astimezone(plus_five)
    async with store.transaction() as tx:
        await tx.nodes.add(node("jobs"))
        stored = await tx.items.put(
            item(
                "jobs",
                "i1",
                "<job xmlns='urn:x'>héllo</job>",
                published_at=published,
                updated_at=published,
                headers={"origin-node": "src", "reason": "max-deliveries"},
            )
        )
        await tx.items.put(item("jobs", "empty", None))
        await tx.commit()
    async with store.transaction() as tx:
        got = await tx.items.get("jobs", "i1")
        empty = await tx.items.get("jobs", "empty")
        assert await tx.items.get("jobs", "missing") is None
        assert await tx.items.get("other", "i1") is None
    assert got == stored
    assert got.payload == "<job xmlns='urn:x'>héllo</job>"
    assert got.published_at == at(1.5) and got.published_at.tzinfo == UTC
    assert got.updated_at.tzinfo == UTC
    assert dict(got.headers) == {"origin-node": "src", "reason": "max-deliveries"}
    assert got.locked_by is None and got.deliveries == 0
    assert empty is not None and empty.payload is None and dict(empty.headers) == {}


async def test_naive_datetimes_are_refused(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.nodes.add(node("jobs"))
        with pytest.raises(ValueError):
            await tx.items.put(item("jobs", "i1", published_at=T0.replace(tzinfo=None)))


async def test_replace_payload_keeps_position_lock_and_publish_time(store: Store) -> None:
    async with store.transaction() as tx:
        await fill(tx, "jobs", 2)
        before = await tx.items.get("jobs", "i1")
        assert before is not None
        assert await tx.items.lock("jobs", "i1", "s1", "w@example.org", at(1), at(31))
        await tx.items.replace_payload("jobs", "i1", "<new/>", 6, "other@example.org", at(5))
        after = await tx.items.get("jobs", "i1")
    assert after is not None
    assert (after.payload, after.payload_size, after.publisher) == (
        "<new/>",
        6,
        "other@example.org",
    )
    assert after.updated_at == at(5) and after.published_at == before.published_at
    assert after.seq == before.seq
    assert (after.locked_by, after.deliveries) == ("s1", 1)


async def test_remove_reports_whether_the_item_was_there(store: Store) -> None:
    async with store.transaction() as tx:
        await fill(tx, "jobs", 2)
        assert await tx.items.remove("jobs", "i1") is True
        assert await tx.items.remove("jobs", "i1") is False
        assert await tx.items.remove("nowhere", "i2") is False
        assert await tx.items.count("jobs") == 1


async def test_remove_all_purges_one_node_and_returns_its_items_in_order(store: Store) -> None:
    async with store.transaction() as tx:
        await fill(tx, "jobs", 3)
        await fill(tx, "other", 1)
        assert await tx.items.lock("jobs", "i2", "s1", "w@example.org", at(1), at(2))
        removed = await tx.items.remove_all("jobs")
        assert [i.item_id for i in removed] == ["i1", "i2", "i3"]
        assert removed[1].locked_by == "s1" and removed[1].lock_jid == "w@example.org"
        assert removed[1].deliveries == 1 and removed[0].payload_size == len("<job/>")
        assert await tx.items.count("jobs") == 0
        assert await tx.items.count_all() == 1
        assert await tx.items.remove_all("jobs") == []


async def test_latest_and_oldest_ids(store: Store) -> None:
    async with store.transaction() as tx:
        await fill(tx, "jobs", 5)
        assert [i.item_id for i in await tx.items.latest("jobs", 2)] == ["i4", "i5"]
        assert [i.item_id for i in await tx.items.latest("jobs", 9)] == [
            f"i{n}" for n in range(1, 6)
        ]
        assert await tx.items.latest("jobs", 0) == []
        assert await tx.items.oldest_ids("jobs", 2) == ["i1", "i2"]
        assert await tx.items.oldest_ids("jobs", 0) == []
        assert await tx.items.oldest_ids("empty", 3) == []


# --- XEP-0059 paging ------------------------------------------------------------------------


async def test_page_without_paging_fields_returns_everything_unpaged(store: Store) -> None:
    async with store.transaction() as tx:
        await fill(tx, "jobs", 3)
        page = await tx.items.page("jobs", PageRequest())
    assert ids(page) == ["i1", "i2", "i3"]
    assert (page.count, page.paged, page.first_index) == (3, False, None)


@pytest.mark.parametrize(
    ("request_", "expected", "first_index"),
    [
        (PageRequest(max=2), ["i1", "i2"], 0),  # §2.1 first page
        (PageRequest(max=2, after="i2"), ["i3", "i4"], 2),  # §2.2 next page
        (PageRequest(max=2, after="i4"), ["i5"], 4),  # short last page
        (PageRequest(max=2, after="i5"), [], None),  # past the end
        (PageRequest(after="i3"), ["i4", "i5"], 3),  # no max: the rest
        (PageRequest(max=2, before="i4"), ["i2", "i3"], 1),  # §2.3 previous page
        (PageRequest(max=2, before="i2"), ["i1"], 0),
        (PageRequest(max=2, before="i1"), [], None),
        (PageRequest(before="i3"), ["i1", "i2"], 0),  # no max: everything before
        (PageRequest(max=2, before=""), ["i4", "i5"], 3),  # §2.5 last page
        (PageRequest(max=9, before=""), ["i1", "i2", "i3", "i4", "i5"], 0),
        (PageRequest(max=2, index=1), ["i2", "i3"], 1),  # §2.6 out of order
        (PageRequest(index=3), ["i4", "i5"], 3),
        (PageRequest(max=2, index=7), [], None),
        (PageRequest(max=0), [], None),  # §2.7 count only
        (PageRequest(max=1, after="i1", before="i4"), ["i3"], 2),  # both bounds: backwards
        (PageRequest(after="i1", before="i4"), ["i2", "i3"], 1),
    ],
)
async def test_page_follows_xep_0059(
    store: Store, request_: PageRequest, expected: list[str], first_index: int | None
) -> None:
    async with store.transaction() as tx:
        await fill(tx, "jobs", 5)
        await fill(tx, "other", 2)  # interleaved seqs must not disturb positions
        await tx.items.put(item("jobs", "late"))
        await tx.items.remove("jobs", "late")
        page = await tx.items.page("jobs", request_)
    assert ids(page) == expected
    assert page.count == 5
    assert page.paged is True
    assert page.first_index == first_index


async def test_page_positions_count_only_the_nodes_own_items(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.nodes.add(node("a"))
        await tx.nodes.add(node("b"))
        for n in range(4):
            await tx.items.put(item("b", f"b{n}"))
            await tx.items.put(item("a", f"a{n}"))
        page = await tx.items.page("a", PageRequest(max=1, after="a1"))
    assert ids(page) == ["a2"] and page.first_index == 2 and page.count == 4


@pytest.mark.parametrize(
    "request_", [PageRequest(max=2, after="gone"), PageRequest(max=2, before="gone")]
)
async def test_paging_from_an_unknown_item_raises_page_not_found(
    store: Store, request_: PageRequest
) -> None:
    async with store.transaction() as tx:
        await fill(tx, "jobs", 2)
        await tx.nodes.add(node("other"))
        await tx.items.put(item("other", "gone"))  # another node's id is unknown here too
        with pytest.raises(PageNotFound):
            await tx.items.page("jobs", request_)


async def test_page_of_an_empty_node(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.nodes.add(node("empty"))
        page = await tx.items.page("empty", PageRequest(max=10, before=""))
    assert (ids(page), page.count, page.first_index, page.paged) == ([], 0, None, True)
