"""PushWindow: how many POSTs one push subscription may have in flight right now.

Google Cloud Pub/Sub's push delivery, which users of push endpoints expect: the
window starts small and grows while the endpoint answers (slow start: +1 per
success, so it doubles per round, up to the threshold; then +1 per full window,
additive increase); a push-back answer (429, 503) halves it (multiplicative
decrease, never below 1) and sets the threshold there. It never exceeds the
subscription's ``queue_requests``, which already bounds what the queue hands out.
Errors that are not push-back (500, a timeout) leave the window alone: they say
the item failed, not that the endpoint is overloaded. Pure arithmetic, no I/O.
"""

from __future__ import annotations

PUSH_BACK = frozenset({429, 503})


class PushWindow:
    def __init__(self, ceiling: int, start: int = 1) -> None:
        self.ceiling = max(1, ceiling)
        self._size = float(min(max(1, start), self.ceiling))
        self.threshold = float(self.ceiling)

    @property
    def size(self) -> int:
        return int(self._size)

    def answered(self, status: int | None) -> None:
        """Adjust to one answer (None: no answer, a timeout or connection error)."""
        if status is not None and 200 <= status < 300:
            if self._size < self.threshold:
                self._size += 1  # slow start: one more per success
            else:
                self._size += 1 / self._size  # one more per window of successes
            self._size = min(self._size, float(self.ceiling))
        elif status in PUSH_BACK:
            self._size = max(1.0, self._size / 2)
            self.threshold = self._size
