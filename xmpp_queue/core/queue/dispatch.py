"""RoomIndex: which subscriber gets the next item (docs/queueing.md, "Dispatch").

The rule: only subscriptions that take work (subscribed, delivering, with a
``queue_requests`` window) and have room under their window; the fewest items in
flight first; ties round-robin (the one served least recently, then subscription
order). An item that comes back (unlocked or expired) avoids its previous holder
while anybody else has room.

Why an index and not a scan: dispatch runs at the end of every operation that
touches a queue (an ack, a subscribe, a departure). Scanning the subscribers
there made each of those O(subscribers): 10,000 workers leaving at once took
minutes. The store keeps one :class:`RoomIndex` per queue and *offers* it a
subscription whenever what the rule reads changes (its load, its window, its
state); the index is a heap with lazy deletion, each entry checked against the
store's truth when it surfaces, so the next choice costs O(log n) and a change
costs one push. Pure: no I/O, the truth comes through a callable.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable

from xmpp_queue.core.model import Subscription, SubscriptionState

# (load, served ticket, subscription order, subid)
Entry = tuple[int, int, int, str]
# subid -> (load, window, order) while it takes work, else None
Truth = Callable[[str], tuple[int, int, int] | None]

_SLACK = 64  # a heap is rebuilt once it holds twice its live entries plus this


def takes_work(sub: Subscription) -> bool:
    """A subscription that can be handed items: subscribed, with a window, delivering."""
    return (
        sub.state is SubscriptionState.SUBSCRIBED
        and sub.queue_requests is not None
        and sub.options.get("pubsub#deliver", ("1",))[0] not in ("0", "false")
    )


class RoomIndex:
    """The subscriptions of one queue with room, in the order they get work."""

    __slots__ = ("_heap", "_served", "_tickets")

    def __init__(self) -> None:
        self._heap: list[Entry] = []
        self._served: dict[str, int] = {}
        self._tickets = itertools.count(1)

    def served(self, subid: str) -> None:
        """*subid* was just handed an item: it goes behind its ties (round robin)."""
        self._served[subid] = next(self._tickets)

    def offer(self, subid: str, load: int, window: int, order: int) -> None:
        """What the rule reads of *subid* changed (call after the change)."""
        if load < window:
            heapq.heappush(self._heap, (load, self._served.get(subid, 0), order, subid))

    def oversized(self, live: int) -> bool:
        """Whether stale entries outnumber the *live* subscriptions (then :meth:`rebuild`)."""
        return len(self._heap) > 2 * live + _SLACK

    def rebuild(self, everyone: Iterable[str], truth: Truth) -> None:
        """Keep one entry per subscription with room (amortised over the pushes)."""
        self._heap = []
        for subid in everyone:
            now = truth(subid)
            if now is not None:
                self.offer(subid, *now)

    def _current(self, entry: Entry, truth: Truth) -> bool:
        load, served, order, subid = entry
        now = truth(subid)
        return (
            now is not None
            and now[0] == load
            and load < now[1]
            and now[2] == order
            and self._served.get(subid, 0) == served
        )

    def best(self, truth: Truth, avoid: str | None = None) -> str | None:
        """The subid the next item goes to, or None when nobody has room."""
        heap = self._heap
        while heap and not self._current(heap[0], truth):
            heapq.heappop(heap)
        if not heap:
            return None
        first = heap[0][3]
        if first != avoid:
            return first
        # The previous holder is first: anybody else with room comes before it.
        parked: list[Entry] = []
        other: str | None = None
        while heap:
            entry = heapq.heappop(heap)
            if not self._current(entry, truth):
                continue
            parked.append(entry)
            if entry[3] != avoid:
                other = entry[3]
                break
        for entry in parked:
            heapq.heappush(heap, entry)
        return other if other is not None else first

    def __len__(self) -> int:
        """Entries held, stale ones included (for the rebuild rule and tests)."""
        return len(self._heap)
