"""SQLite's log copied into the database by a thread of its own, not by a commit.

Why: in WAL mode SQLite checkpoints (copies the log's pages into the database
file and syncs that file) inside the commit that takes the log past 1,000 pages.
On the benchmark machine's disk that commit took 5-90 ms where the others take
under one. The backend commits on the event loop while commits stay quick
(``commit_place``), so each such checkpoint stalled every stanza and then sent
the next ten seconds of commits to the writer thread, which at window 32 costs
about a quarter of the rate (docs/benchmarks.md, "Checkpoints off the commit
path").

Here the writer's connection never checkpoints (``wal_autocheckpoint = 0``) and a
daemon thread with a connection of its own runs a ``PASSIVE`` checkpoint every
``INTERVAL``: it copies what no reader still needs, never takes the write lock and
never makes a commit wait (SQLite lets a commit append to the log while a
checkpoint copies its older pages). After a checkpoint that copied the whole
log, the next commit writes the log from its start again, so the log stays at
about an interval's worth of commits. The last connection to close checkpoints
what is left, as before. A failed checkpoint (a full disk) is logged once, tried
again at the next interval and its recovery logged once: the commits themselves
report their own errors.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable

log = logging.getLogger("xmpp_queue.storage.store")

INTERVAL = 0.1
"""Seconds between two checkpoints."""


class WalCheckpoints:
    """A thread that checkpoints the log of the database *connect* opens."""

    def __init__(
        self, connect: Callable[[], sqlite3.Connection], interval: float = INTERVAL
    ) -> None:
        self._connect = connect
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.checkpoints = 0  # checkpoints run (each copies what it can)
        self.failures = 0

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="xmpp-queue-checkpoints", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for it (a checkpoint under way ends first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        failing = False
        while not self._stop.wait(self._interval):
            try:
                if conn is None:
                    conn = self._connect()
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                self.checkpoints += 1
                if failing:
                    failing = False
                    log.info("event=checkpoint_recovered")
            except sqlite3.Error as exc:
                self.failures += 1
                if not failing:
                    failing = True
                    log.warning("event=checkpoint_failed error=%s", exc)
        if conn is not None:
            conn.close()
