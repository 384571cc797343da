"""WriteHealth: whether the database takes the store's commits.

Three users, one record:

- the store's write loop asks :meth:`WriteHealth.failed` whether a failed write
  is worth repeating: only an outage (``StorageUnavailable``: the connection was
  lost, the disk is full, the file is locked) whose write the database surely
  did not commit, and only for ``retry_for`` seconds from the start of that
  outage, so a dropped connection costs the batch in flight a reconnect, while
  a full disk does not make every request wait;
- the log gets one line when an outage begins (``event=database_unavailable``)
  and one when a write succeeds again (``event=database_back``, with how long
  it lasted and how many writes failed meanwhile), not a line per request;
- ``/readyz`` reports :attr:`WriteHealth.ok`: False from a failed write until a
  write succeeds again (a read-only request proves nothing about the disk).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from xmpp_queue.core.errors import NotActive, StorageUnavailable

log = logging.getLogger("xmpp_queue.storage.store")

OUTAGE_RETRY_FOR = 10.0  # seconds from an outage's start during which writes are repeated
FIRST_RETRY_DELAY = 0.05
MAX_RETRY_DELAY = 1.0


class WriteHealth:
    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        retry_for: float = OUTAGE_RETRY_FOR,
    ) -> None:
        self._clock = clock
        self.retry_for = retry_for
        self.ok = True  # the last write committed (or none was tried yet)
        self.error = ""  # why the last write failed, while not ok
        self.outages = 0
        self.failed_writes = 0  # writes that failed in the current outage
        self.retries = 0  # writes repeated in the current outage
        self._since: float | None = None  # start of the current outage

    @property
    def outage_seconds(self) -> float:
        return 0.0 if self._since is None else self._clock() - self._since

    def failed(self, error: BaseException, maybe_committed: bool) -> bool:
        """Record a failed write; True if it should be written again now."""
        self.ok = False
        self.error = f"{type(error).__name__}: {error}"
        outage = isinstance(error, StorageUnavailable) and not isinstance(error, NotActive)
        if not outage:
            return False
        now = self._clock()
        if self._since is None:
            self._since = now
            self.outages += 1
            self.failed_writes = self.retries = 0
            log.warning(
                "event=database_unavailable error=%s action=%s",
                type(error.__cause__ or error).__name__,
                "reload" if maybe_committed else "reconnect_and_retry",
            )
        if maybe_committed or now - self._since >= self.retry_for:
            self.failed_writes += 1
            return False
        self.retries += 1
        return True

    def retry_delay(self) -> float:
        """The first repeat at once (a new connection), then 50 ms doubling to 1 s."""
        if self.retries <= 1:
            return 0.0
        return min(MAX_RETRY_DELAY, FIRST_RETRY_DELAY * 2.0 ** (self.retries - 2))

    def written(self) -> None:
        """A write committed: the outage, if any, is over."""
        if self._since is not None:
            log.info(
                "event=database_back after=%.1fs retried=%d failed_writes=%d",
                self._clock() - self._since,
                self.retries,
                self.failed_writes,
            )
            self._since = None
        self.ok = True
        self.error = ""
