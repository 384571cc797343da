"""RefusalLog: requests the component answered with an error, counted and logged sparingly.

Why: a refusal is the client's business (a bad request, a lock that moved, a
stranger knocking), and one client can send thousands a second. A log line
each made 20,000 refused stanzas write 3.4 MB of log, drowning the lines an
operator needs and costing I/O under attack. So:

- every refusal is counted by its condition (``on_refused``: the metrics'
  ``xmpp_queue_requests_refused_total{condition=...}``), so nothing is lost to
  the rate limit;
- per bare JID, at most one line per ``interval`` seconds; the next line that
  JID gets says how many were left out since (``suppressed=N``). The JIDs
  remembered are bounded (``max_jids``): past it, those whose interval has
  passed are forgotten, and if all are recent, the oldest half.

Unmapped errors (bugs: ``request_failed`` with a trace) are not refusals and
are not limited here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("xmpp_queue.xmpp.errors")

INTERVAL = 60.0
MAX_JIDS = 10_000


@dataclass(slots=True)
class _Seen:
    logged_at: float
    suppressed: int = 0


class RefusalLog:
    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        interval: float = INTERVAL,
        max_jids: int = MAX_JIDS,
    ) -> None:
        self._clock = clock
        self.interval = interval
        self.max_jids = max_jids
        self._seen: dict[str, _Seen] = {}
        self.on_refused: Callable[[str], None] | None = None
        self.counts: dict[str, int] = {}

    def note(self, sender: str, line: str, *args: object, condition: str) -> None:
        """Count one refusal of *condition* to *sender*; log ``line % args`` unless
        this sender had a line within the interval."""
        self.counts[condition] = self.counts.get(condition, 0) + 1
        if self.on_refused is not None:
            self.on_refused(condition)
        key = sender.split("/", 1)[0]
        now = self._clock()
        seen = self._seen.get(key)
        if seen is not None and now - seen.logged_at < self.interval:
            seen.suppressed += 1
            return
        suppressed = 0 if seen is None else seen.suppressed
        if seen is None and len(self._seen) >= self.max_jids:
            self._forget(now)
        self._seen[key] = _Seen(now)
        log.info(line + " suppressed=%d", *args, suppressed)

    def clear(self) -> None:
        """Forget every JID and count (tests: each starts with a fresh budget)."""
        self._seen.clear()
        self.counts.clear()

    def _forget(self, now: float) -> None:
        stale = [k for k, s in self._seen.items() if now - s.logged_at >= self.interval]
        if not stale:
            stale = list(self._seen)[: len(self._seen) // 2]
        for key in stale:
            del self._seen[key]


REFUSALS = RefusalLog()
"""The component's one refusal log (``errors.py`` writes to it; ``app/term.py`` connects
its counts to the metrics)."""
