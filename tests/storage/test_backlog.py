"""A backlog bounded by disk (``storage/backlog.py``): what goes cold, and when
the database is read for it.

The contract and property suites run every path over cold items too (the
``-cold`` backends, no memory for whole waiting items); these tests pin the
policy itself: the budget decides what a commit leaves whole, a load keeps
plain waiting items as seqs, and the id filter spares a publish of a new id
its database read, also for items loaded cold once the background fill ended.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit.stores import SQL_BACKENDS, empty_database
from tests.storage.samples import T0, at, item, node
from xmpp_queue.storage.store import StateStore


@pytest.fixture(params=SQL_BACKENDS)
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await empty_database(request.param, request, tmp_path)


async def _fill(store: StateStore, count: int, first: int = 0) -> None:
    async with store.transaction() as tx:
        if await tx.nodes.get("jobs") is None:
            await tx.nodes.add(node("jobs", queue=True))
        for n in range(first, first + count):
            await tx.items.put(item("jobs", f"i{n}", f"<job n='{n}'/>"))
        await tx.commit()


def _shape(store: StateStore) -> tuple[int, int]:
    """(whole items, cold items) of node jobs."""
    ns = store.state.nodes["jobs"]
    return len(ns.items), len(ns.queue.tail) if ns.queue.tail is not None else 0


async def test_the_budget_decides_what_a_commit_leaves_whole(url: str) -> None:
    roomy = await StateStore.open(url)
    try:
        await _fill(roomy, 5)
        assert _shape(roomy) == (5, 0)
    finally:
        await roomy.close()
    tight = await StateStore.open(url, backlog_bytes=0)
    try:
        assert _shape(tight) == (0, 5)  # a load keeps plain waiting items as seqs
        await _fill(tight, 3, first=5)
        assert _shape(tight) == (0, 8)
        async with tight.transaction() as tx:
            head = await tx.items.next_ready("jobs", T0, 2)
            assert [i.payload for i in head] == ["<job n='0'/>", "<job n='1'/>"]
            assert await tx.items.lock("jobs", "i0", "s1", "w@example.org/a", T0, at(30))
            await tx.commit()
        whole, cold = _shape(tight)
        assert cold < 8 and whole + cold == 8  # the head came back, with a prefetch
        async with tight.transaction() as tx:
            stats = await tx.items.queue_stats("jobs")
            assert (stats.backlog, stats.in_flight) == (7, 1)
            assert stats.oldest_waiting == at(0)
    finally:
        await tight.close()


async def test_a_new_id_reads_nothing_once_the_loaded_ids_are_filled_in(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await StateStore.open(url)
    try:
        await _fill(store, 5)
    finally:
        await store.close()
    store = await StateStore.open(url)
    reads: list[str] = []
    backend = type(store.backend)
    real = backend.item_by_id

    async def spy(self: object, node_id: str, item_id: str) -> object:
        reads.append(item_id)
        return await real(self, node_id, item_id)  # type: ignore[arg-type]

    monkeypatch.setattr(backend, "item_by_id", spy)
    try:
        await store.id_filters_filled()
        async with store.transaction() as tx:
            assert await tx.items.get("jobs", "new") is None
            got = await tx.items.get("jobs", "i3")
            assert got is not None and got.payload == "<job n='3'/>"
            assert await tx.items.count("jobs") == 5
        assert reads == ["i3"]  # the cold one read by id; the new id not at all
    finally:
        await store.close()
