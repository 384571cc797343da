"""SQLite's log is checkpointed by a thread of its own, never by a commit
(``storage/wal_checkpoints.py``). Real SQLite files in a temporary directory."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from xmpp_queue.storage.backend_sqlite import SqliteBackend
from xmpp_queue.storage.flush import Flush
from xmpp_queue.storage.migrations import upgrade_async
from xmpp_queue.storage.wal_checkpoints import WalCheckpoints

from .samples import item, node


def _wal_db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")  # as the backend's writer
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
    return conn


def _left_to_copy(path: Path) -> int:
    """Frames of the log not yet in the database file (read by a checkpoint that
    copies nothing more: the thread's are done by then)."""
    conn = sqlite3.connect(path)
    try:
        _, log, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(log - copied)
    finally:
        conn.close()


def _wait_for(condition: object, what: str) -> None:
    for _ in range(500):
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


def test_the_thread_copies_the_log_the_writer_leaves(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    writer = _wal_db(path)
    checkpoints = WalCheckpoints(lambda: sqlite3.connect(path), interval=0.01)
    try:
        for n in range(50):
            writer.execute("INSERT INTO t VALUES (?, ?)", (n, "x" * 500))
        frames = writer.execute("PRAGMA wal_checkpoint(NOOP)").fetchone()
        before = checkpoints.checkpoints
        checkpoints.start()
        _wait_for(lambda: checkpoints.checkpoints > before + 1, "two checkpoints")
        assert frames[1] > 0  # the writer left its frames in the log
        assert _left_to_copy(path) == 0
    finally:
        checkpoints.stop()
        writer.close()
    assert checkpoints.failures == 0


def test_a_failing_checkpoint_is_logged_once_and_its_recovery_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "q.db"
    _wal_db(path).close()
    attempts = {"n": 0}

    def connect() -> sqlite3.Connection:
        attempts["n"] += 1
        if attempts["n"] <= 3:
            raise sqlite3.OperationalError("disk I/O error")
        return sqlite3.connect(path)

    checkpoints = WalCheckpoints(connect, interval=0.01)
    with caplog.at_level(logging.INFO, logger="xmpp_queue.storage.store"):
        checkpoints.start()
        try:
            _wait_for(lambda: checkpoints.checkpoints >= 3, "checkpoints after the failures")
        finally:
            checkpoints.stop()
    lines = [r.getMessage() for r in caplog.records if "checkpoint" in r.getMessage()]
    assert lines == ["event=checkpoint_failed error=disk I/O error", "event=checkpoint_recovered"]
    assert checkpoints.failures == 3


async def test_the_backend_s_writer_never_checkpoints_and_its_thread_ends_with_it(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    await upgrade_async(url)
    backend = SqliteBackend(url)
    await backend.load()
    try:
        writer = backend._connection()
        assert writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        await backend.write(Flush(node_upserts=[node("jobs")]))
        published = [item("jobs", f"i{n}", seq=n) for n in range(1, 30)]
        await backend.write(Flush(item_upserts=published, max_seq=29))
        _wait_for(lambda: _left_to_copy(tmp_path / "store.db") == 0, "the log copied")
    finally:
        await backend.close()
    assert not [t for t in threading.enumerate() if t.name == "xmpp-queue-checkpoints"]
