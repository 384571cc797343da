"""Where a SQLite commit runs (``storage/commit_place.py``): on the event loop while
commits stay quick, on the writer thread after a slow one, when another connection
holds the write lock, and while a read is on the thread.

The rule itself is tested as plain logic; the backend's use of it against a real
SQLite file, with another real connection taking the write lock."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.kit.stores import empty_database
from xmpp_queue.storage import commit_place
from xmpp_queue.storage.backend_sqlite import SqliteBackend
from xmpp_queue.storage.commit_place import (
    BACK_OFF,
    SLOW,
    STALL_BUDGET,
    STALL_WINDOW,
    CommitPlace,
)
from xmpp_queue.storage.store import StateStore

from .samples import item, node

TEST_SLOW = 0.25

# --- the rule -----------------------------------------------------------------------


def test_commits_stay_on_the_loop_while_they_are_quick() -> None:
    place = CommitPlace()
    for n in range(100):
        assert place.on_loop(float(n))
        place.took(SLOW / 2, float(n))
    assert (place.slow_commits, place.busy_commits) == (0, 0)


def test_a_lone_slow_commit_stays_on_the_loop() -> None:
    """One checkpoint, or a new file's first sync, is not a slow disk."""
    place = CommitPlace()
    place.took(SLOW * 2, 100.0)
    assert place.on_loop(100.0)
    assert place.slow_commits == 1


def test_slow_commits_past_the_budget_send_the_next_ones_to_the_thread_for_a_while() -> None:
    place = CommitPlace()
    each = STALL_BUDGET * 0.6  # two within the window are over the budget
    assert each > SLOW
    place.took(each, 100.0)
    assert place.on_loop(100.0)
    place.took(each, 100.0 + STALL_WINDOW / 2)
    end = 100.0 + STALL_WINDOW / 2
    assert not place.on_loop(end)
    assert not place.on_loop(end + BACK_OFF - 0.001)
    assert place.on_loop(end + BACK_OFF)
    assert place.slow_commits == 2


def test_slow_commits_further_apart_than_the_window_stay_on_the_loop() -> None:
    place = CommitPlace()
    each = STALL_BUDGET * 0.6
    for n in range(50):
        now = 10.0 + n * STALL_WINDOW * 1.01
        place.took(each, now)
        assert place.on_loop(now), n
    assert place.slow_commits == 50


def test_one_commit_over_the_budget_sends_the_next_ones_to_the_thread_at_once() -> None:
    place = CommitPlace()
    place.took(STALL_BUDGET * 1.5, 7.0)
    assert not place.on_loop(7.0)
    assert place.on_loop(7.0 + BACK_OFF)


def test_a_taken_lock_sends_the_next_commits_to_the_thread_for_a_while() -> None:
    place = CommitPlace()
    place.lock_taken(5.0)
    assert not place.on_loop(5.0 + BACK_OFF / 2)
    assert place.on_loop(5.0 + BACK_OFF)
    assert place.busy_commits == 1
    assert place.back_offs == {"slow_commits": 0, "write_lock_taken": 1}


def test_a_place_that_allows_no_loop_keeps_every_commit_on_the_thread() -> None:
    place = CommitPlace(loop_allowed=False)
    assert not any(place.on_loop(float(n)) for n in range(0, 1000, 7))


def test_one_log_line_per_back_off(caplog: pytest.LogCaptureFixture) -> None:
    place = CommitPlace()
    with caplog.at_level("INFO", "xmpp_queue"):
        place.took(STALL_BUDGET * 2, 1.0)
        place.lock_taken(2.0)  # within the back-off: extends it, says nothing new
        place.took(STALL_BUDGET * 2, 1.0 + 2 * BACK_OFF)
    lines = [r.getMessage() for r in caplog.records if "commits_on_thread" in r.getMessage()]
    assert len(lines) == 2, lines
    assert place.back_offs == {"slow_commits": 2, "write_lock_taken": 0}  # as many as lines
    assert f"reason=slow_commits count=1 ms={STALL_BUDGET * 2e3:.1f}" in lines[0]


# --- the SQLite backend -------------------------------------------------------------


@pytest.fixture
async def sqlite_url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """A store's database. These tests are about where commits go, not about the
    disk: on a busy machine an fsync alone took over ``SLOW`` (5 ms) and sent the
    commits after it to the thread, so here a commit counts as slow only past
    :data:`TEST_SLOW`."""
    monkeypatch.setattr(commit_place, "SLOW", TEST_SLOW)
    return await empty_database("sqlite", request, tmp_path)


def _record_threads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The thread of every ``SqliteBackend._write`` call from now on."""
    threads: list[int] = []
    real = SqliteBackend._write

    def recorded(self: SqliteBackend, plan: Any) -> None:
        threads.append(threading.get_ident())
        real(self, plan)

    monkeypatch.setattr(SqliteBackend, "_write", recorded)
    return threads


async def _publish(store: StateStore, item_id: str) -> None:
    async with store.transaction() as tx:
        await tx.items.put(item("jobs", item_id))
        await tx.commit()


async def _stored_ids(url: str) -> list[str]:
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT item_id FROM items ORDER BY item_id").fetchall()
    return [r[0] for r in rows]


async def _open_with_node(url: str) -> tuple[StateStore, SqliteBackend]:
    store = await StateStore.open(url)
    async with store.transaction() as tx:
        await tx.nodes.add(node("jobs", queue=True))
        await tx.commit()
    assert isinstance(store.backend, SqliteBackend)
    return store, store.backend


async def test_a_quick_commit_runs_on_the_loop_and_is_durable(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, backend = await _open_with_node(sqlite_url)
    try:
        threads = _record_threads(monkeypatch)
        on_loop = backend.place.loop_commits  # the node's commit counted too
        await _publish(store, "a")
        await _publish(store, "b")
        assert threads == [threading.get_ident()] * 2
        assert await _stored_ids(sqlite_url) == ["a", "b"]  # seen by another connection
        assert (backend.place.loop_commits - on_loop, backend.place.thread_commits) == (2, 0)
    finally:
        await store.close()


async def test_a_taken_write_lock_does_not_stall_the_loop(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another connection holds the write lock: the commit waits for it on the
    thread (the busy timeout), the loop goes on meanwhile, and the commit lands
    once the lock is let go; the commits after it stay on the thread a while."""
    store, backend = await _open_with_node(sqlite_url)
    other = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        threads = _record_threads(monkeypatch)
        other.execute("BEGIN IMMEDIATE")  # the write lock, held
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.create_task(tick())
        publishing = asyncio.create_task(_publish(store, "a"))
        await asyncio.sleep(0.3)
        assert not publishing.done()  # waiting for the lock, not failed
        assert ticks >= 10, "the loop went on while the commit waited"
        other.execute("ROLLBACK")
        await asyncio.wait_for(publishing, 10)
        ticker.cancel()
        loop_thread = threading.get_ident()
        assert threads[0] == loop_thread  # tried on the loop, found the lock taken
        assert threads[1] != loop_thread  # then written on the thread
        assert backend.place.busy_commits == 1
        assert not backend.place.on_loop(time.monotonic())
        await _publish(store, "b")
        assert threads[2] != loop_thread  # still on the thread: the back-off
        assert await _stored_ids(sqlite_url) == ["a", "b"]
    finally:
        other.close()
        await store.close()


async def test_a_slow_commit_on_the_loop_sends_the_next_to_the_thread(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, backend = await _open_with_node(sqlite_url)
    try:
        threads: list[int] = []
        real = SqliteBackend._write

        def slow_first(self: SqliteBackend, plan: Any) -> None:
            threads.append(threading.get_ident())
            if len(threads) == 1:
                time.sleep(TEST_SLOW * 2)  # a slow disk, once
            real(self, plan)

        monkeypatch.setattr(SqliteBackend, "_write", slow_first)
        await _publish(store, "a")
        await _publish(store, "b")
        loop_thread = threading.get_ident()
        assert threads[0] == loop_thread and threads[1] != loop_thread
        assert backend.place.slow_commits == 1
        assert await _stored_ids(sqlite_url) == ["a", "b"]
    finally:
        await store.close()


async def test_no_commit_on_the_loop_while_a_read_is_on_the_thread(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection serves one caller at a time: a commit while a read is still on
    the thread is handed to the thread too, behind the read."""
    store, backend = await _open_with_node(sqlite_url)
    try:
        threads = _record_threads(monkeypatch)
        entered, release = threading.Event(), threading.Event()
        real_ids = SqliteBackend.tail_ids

        async def held_read(self: SqliteBackend, node_id: str, after: int, upto: int) -> Any:
            def wait() -> None:
                entered.set()
                release.wait(10)

            await self._run(wait)
            return await real_ids(self, node_id, after, upto)

        monkeypatch.setattr(SqliteBackend, "tail_ids", held_read)
        reading = asyncio.create_task(backend.tail_ids("jobs", 0, 10))
        await asyncio.to_thread(entered.wait, 10)
        publishing = asyncio.create_task(_publish(store, "a"))
        await asyncio.sleep(0.05)
        assert not publishing.done()  # queued behind the read on the thread
        release.set()
        await asyncio.wait_for(asyncio.gather(reading, publishing), 10)
        assert threads == [threads[0]] and threads[0] != threading.get_ident()
        assert await _stored_ids(sqlite_url) == ["a"]
        assert backend.place.thread_commits == 1
    finally:
        release.set()
        await store.close()


async def test_a_commit_on_the_loop_is_durable_when_the_hand_off_returns(
    sqlite_url: str,
) -> None:
    """``write_now``: the batch's future is resolved by the hand-off itself, so no
    write task, shield or callback turn stands between the commit and the answers."""
    store, _ = await _open_with_node(sqlite_url)
    try:
        async with store.transaction() as tx:
            await tx.items.put(item("jobs", "a"))
            durable = await tx.hand_off()
            assert durable.done() and durable.exception() is None
            assert await _stored_ids(sqlite_url) == ["a"]  # already in the file
    finally:
        await store.close()


async def test_a_commit_sent_to_the_thread_is_durable_only_when_its_write_ends(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, backend = await _open_with_node(sqlite_url)
    try:
        threads = _record_threads(monkeypatch)
        backend.place.lock_taken(time.monotonic())  # the next commits go to the thread
        async with store.transaction() as tx:
            await tx.items.put(item("jobs", "a"))
            durable = await tx.hand_off()
            assert not durable.done()  # handed to the writer thread
        await asyncio.wait_for(durable, 10)
        assert threads and threads[0] != threading.get_ident()
        assert await _stored_ids(sqlite_url) == ["a"]
    finally:
        await store.close()
