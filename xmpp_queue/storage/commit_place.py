"""Where a SQLite commit runs: on the event loop itself, or on the writer thread.

Why: a commit handed to the writer thread pays for two hand-overs (the thread's
wake-up, then the loop's), and while the loop is busy the two take the GIL from
each other at every row the statements bind. Where the disk syncs in a fraction
of a millisecond, running the whole commit on the loop costs less than those
hand-overs: at window 32 with every batch on, 20 % more items/s and a tenth less
CPU per item at 500/s on the benchmark machine (docs/benchmarks.md, "Commits on
the loop"). But a commit on the loop stalls every stanza for as long as it takes,
so it is kept there only while commits stay quick:

- commits on the loop that took longer than ``SLOW`` (a slow disk, a checkpoint
  copying the write-ahead log into the database) and together held the loop for
  more than ``STALL_BUDGET`` within ``STALL_WINDOW`` seconds send the commits of
  the next ``BACK_OFF`` seconds to the thread; then the loop tries again. A lone
  slow commit (a new database file's first sync, one checkpoint now and then)
  stays on the loop: sending every commit of the next 10 s to the thread for it
  cost more than it saved (docs/benchmarks.md, "A lone slow commit");
- a commit that finds the database's write lock taken by another connection does
  not wait for it on the loop: it goes to the thread, which waits with the busy
  timeout, and so do the commits of the next ``BACK_OFF`` seconds;
- the backend never commits on the loop while a call it handed to the thread (a
  read of cold items, a load) is still there, so the one connection is used by one
  of them at a time (``backend_sqlite``).

Everything else about a commit is the same in both places: the same statements,
the same ``synchronous=FULL`` fsync before anyone is answered, the same errors.
Plain logic with the time passed in, so it is tested without a disk.
"""

from __future__ import annotations

import logging
from collections import deque

log = logging.getLogger("xmpp_queue.storage.store")

SLOW = 0.005
"""A commit on the loop longer than this (seconds) counts as slow."""
STALL_WINDOW = 2.0
"""Seconds over which the time of slow commits on the loop is summed."""
STALL_BUDGET = 0.020
"""Slow commits may hold the loop this long (seconds) within ``STALL_WINDOW``, 1 %
of its time; past that the next commits go to the thread. One commit longer than
this goes there at once."""
BACK_OFF = 10.0
"""Seconds the commits stay on the thread after slow commits past the budget or a
taken lock."""


class CommitPlace:
    """Decides, commit by commit, whether it runs on the loop (see the module docstring)."""

    __slots__ = (
        "_stalls",
        "_thread_until",
        "back_offs",
        "busy_commits",
        "loop_allowed",
        "loop_commits",
        "slow_commits",
        "thread_commits",
    )

    def __init__(self, loop_allowed: bool = True) -> None:
        self.loop_allowed = loop_allowed  # False: every commit on the thread
        self._thread_until = 0.0
        self._stalls: deque[tuple[float, float]] = deque()  # (ended, seconds) of slow ones
        self.slow_commits = 0  # commits on the loop that took longer than SLOW
        self.busy_commits = 0  # commits that found the write lock taken
        # What operators see (``/metrics``): commits made in each place (the backend
        # counts them) and back-offs begun, by reason.
        self.loop_commits = 0
        self.thread_commits = 0
        self.back_offs = {"slow_commits": 0, "write_lock_taken": 0}

    def on_loop(self, now: float) -> bool:
        """Whether the commit starting at *now* (monotonic seconds) runs on the loop."""
        return self.loop_allowed and now >= self._thread_until

    def took(self, seconds: float, now: float) -> None:
        """A commit on the loop ended at *now* after *seconds*."""
        if seconds <= SLOW:
            return
        self.slow_commits += 1
        stalls = self._stalls
        stalls.append((now, seconds))
        while stalls[0][0] <= now - STALL_WINDOW:
            stalls.popleft()
        held = sum(s for _, s in stalls)
        if held > STALL_BUDGET:
            detail = f" count={len(stalls)} ms={held * 1e3:.1f} in_s={STALL_WINDOW:g}"
            stalls.clear()
            self._back_off(now, "slow_commits", detail)

    def lock_taken(self, now: float) -> None:
        """A commit on the loop found the write lock taken; it goes to the thread."""
        self.busy_commits += 1
        self._back_off(now, "write_lock_taken")

    def _back_off(self, now: float, reason: str, detail: str = "") -> None:
        if now >= self._thread_until:  # one line per back-off, not per commit
            self.back_offs[reason] += 1
            log.info("event=commits_on_thread reason=%s%s for_s=%g", reason, detail, BACK_OFF)
        self._thread_until = now + BACK_OFF
