"""A backlog bounded by disk: which waiting items stay whole in memory, and
how the others come back when a read needs them.

Waiting items are kept whole (an :class:`Item` in ``NodeState.items`` and the
ready index) while the store's estimate of the memory they take stays under
its budget (``[database] backlog_memory_mb``). Beyond it, a plain waiting item
committed by a batch moves to its node's cold tail (``tail``): its seq alone
stays in memory; a *delayed* one (a ``Start`` or retry delay still ahead) its
seq and due time (``schedule``), and the store's delayed-node heap is filed
under the earliest cold due time, so the timer wakes when one comes due and
moves it to the cold ready levels. Loading a database puts every plain
waiting item there at once, so a restart reads seqs and due times, not rows.

On an ordered queue a waiting item with an ordering key goes cold too, unless
it is its key's placed member (the one dispatch may offer, ``ordered``): its
seq stays in its key's fifo and in the tail's ``keyed`` level, its key string
(shared by the key's members) in the fifo's entry. A load puts every unlocked
member there, as (key, seqs) per node.

Reads bring cold items back through the backend (``ColdReader``):

- a dispatch first makes sure the head of each priority level is hot
  (:func:`ensure_heads`: the next *limit* items of the level, plus
  ``PREFETCH``, in one query by seq), and that every ordering key whose next
  member is cold has it back and placed (``ColdTail.cold_heads``);
- a read by id (:func:`find`) misses ``NodeState.items`` and, when the node
  has a tail, looks the row up; an item found there is brought back;
- paging, the newest items and a purge merge hot items and cold seqs in
  publish order (:func:`merged`) and read the cold ones' rows without keeping
  them (:func:`resolve`).

Nothing here is recorded in a transaction: a cold item is a committed row that
no operation has touched, and bringing it back changes memory's form, not its
content. An operation that then changes the item records it as usual.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Iterable, Iterator
from typing import Protocol

from xmpp_queue.core.model import Item
from xmpp_queue.storage.item_values import PREFETCH
from xmpp_queue.storage.node_state import NodeState
from xmpp_queue.storage.ready import HEAP_SLACK
from xmpp_queue.storage.schedule import to_us
from xmpp_queue.storage.state import MemoryState
from xmpp_queue.storage.tail import ColdTail

log = logging.getLogger("xmpp_queue.storage.backlog")

ITEM_COST = 400
"""Estimated bytes of memory one whole waiting item takes besides its payload
(the Item, its id, its times, its dict and index entries; measured with
``bench/backlog_memory.py``)."""

DEFAULT_BUDGET = 128 * 1024 * 1024
"""Default memory for whole waiting items: some 250,000 items of 130 bytes."""

REFRESH_SECONDS = 1.0
"""How often the estimate is recomputed from every node (O(nodes)); in between
it is not updated (a second of publishes is small against any budget)."""

READ_CHUNK = 10_000
"""Rows per query when many cold items are read at once (a purge, a long page)."""


class ColdReader(Protocol):
    """Reads committed item rows whole (payload and headers included)."""

    async def items_by_seq(self, node_id: str, seqs: list[int]) -> list[Item]: ...

    async def item_by_id(self, node_id: str, item_id: str) -> Item | None: ...

    async def tail_ids(self, node_id: str, after: int, upto: int) -> list[tuple[int, str]]: ...


def is_plain(item: Item) -> bool:
    """Whether a waiting item needs nothing in memory but its place in line
    (and its due and expiry times, if it has them): no lock, no ordering key,
    not retained."""
    return item.locked_by is None and item.ordering_key is None and item.acked_at is None


def is_keyed(item: Item) -> bool:
    """Whether a waiting item is a member of an ordering key (cold unless placed)."""
    return item.locked_by is None and item.ordering_key is not None and item.acked_at is None


def due_of(item: Item) -> int | None:
    """The due time a cold delayed *item* is filed under (``schedule``)."""
    return to_us(item.available_at) if item.available_at is not None else None


def expiry_of(item: Item) -> int | None:
    """The expiry time a cold *item* is filed under, if it has one."""
    return to_us(item.expires_at) if item.expires_at is not None else None


class BacklogBudget:
    """The store's budget for whole waiting items, and its running estimate."""

    def __init__(self, limit_bytes: int | None = DEFAULT_BUDGET) -> None:
        self.limit = limit_bytes  # None: no limit (every item stays whole)
        self._estimate = 0
        self._at = -REFRESH_SECONDS

    def spent(self, state: MemoryState) -> bool:
        """Whether items committed now should go cold. The estimate is refreshed
        at most once every ``REFRESH_SECONDS``; what is published in between is
        at most a second's worth of items, small against any budget."""
        if self.limit is None:
            return False
        if self.limit <= 0:
            return True
        now = time.monotonic()
        if now - self._at >= REFRESH_SECONDS:
            self._estimate, self._at = estimate(state), now
        return self._estimate > self.limit


def estimate(state: MemoryState) -> int:
    """Bytes the whole items of *state* take, by :data:`ITEM_COST` plus payloads."""
    total = 0
    for ns in state.nodes.values():
        tail = ns.queue.tail
        cold = tail.payload_bytes if tail is not None else 0
        total += len(ns.items) * ITEM_COST + ns.queue.payload_bytes - cold
    return total


def cool(state: MemoryState, items: Iterable[Item], budget: BacklogBudget) -> int:
    """After a commit: move the plain waiting items it wrote to their node's
    cold tail while the budget is spent (ready ones by seq, delayed ones by seq
    and due time). Returns how many moved."""
    if not budget.spent(state):  # once per commit: the plain path pays one call
        return 0
    moved = 0
    nodes = state.nodes
    compact: dict[str, NodeState] = {}
    expiring: dict[str, NodeState] = {}
    for item in items:
        plain = is_plain(item)
        if not plain and not is_keyed(item):
            continue
        ns = nodes.get(item.node)
        if ns is None or ns.items.get(item.item_id) is not item:
            continue
        q = ns.queue
        expires = expiry_of(item)
        if not plain:
            fifo = q.keys.get(item.ordering_key or "")
            if fifo is None or not fifo.cool(item.seq):
                continue  # its key's placed member, or on an unordered node: whole
            del ns.items[item.item_id]
            if q.tail is None:
                q.tail = ColdTail()
            q.tail.add_keyed(item.seq, item.payload_size, item.item_id, expires)
        elif q.ready.discard(item.seq, item.priority):
            del ns.items[item.item_id]
            if q.tail is None:
                q.tail = ColdTail()
            q.tail.add(item.seq, item.priority, item.payload_size, item.item_id, expires)
        elif item.available_at is not None:  # no key, not ready: in the delayed heap
            del ns.items[item.item_id]  # its heap entry is stale from now on
            q.delayed_live -= 1
            if q.tail is None:
                q.tail = ColdTail()
            due = to_us(item.available_at)
            q.tail.add_delayed(
                due, item.seq, item.priority, item.payload_size, item.item_id, expires
            )
            compact[item.node] = ns
        else:
            continue
        if expires is not None:  # its entry in the heap of whole items is stale now
            state.expiring_total -= 1
            expiring[item.node] = ns
        moved += 1
    for ns in compact.values():  # the node stays filed under the same earliest time
        if len(ns.queue.delayed) > 2 * ns.queue.delayed_live + HEAP_SLACK:
            state.rebuild_delayed(ns)
    for ns in expiring.values():
        state.file_cold_expiry(ns)
    if expiring:
        state.compact_expiry()
    return moved


def bring_back(state: MemoryState, ns: NodeState, item: Item) -> bool:
    """Make the cold *item* (read from its row) whole again; whether it was cold."""
    tail = ns.queue.tail
    if tail is None:
        return False
    was_ready = tail.holds_ready(item.seq, item.priority)
    first_expiry = tail.earliest_expiry()
    expires = expiry_of(item)
    keyed = item.ordering_key is not None and tail.remove_keyed(
        item.seq, item.payload_size, expires
    )
    if not keyed and not tail.remove(
        item.seq, item.priority, item.payload_size, due_of(item), expires
    ):
        return False
    if expires is not None and tail.earliest_expiry() != first_expiry:
        state.file_cold_expiry(ns)
    ns.queue.payload_bytes -= item.payload_size  # set_item counts it again
    items = ns.items
    newest = next(reversed(items.values()), None) if items else None
    state.set_item(ns, item.item_id, item)
    if was_ready:
        state.promoted_while_cold(ns, item)
    if newest is not None and newest.seq > item.seq:
        ns.ordered = False  # an older seq at the end of the dict: sorted on demand
    return True


async def bring_back_seqs(
    state: MemoryState, ns: NodeState, reader: ColdReader, seqs: list[int]
) -> dict[int, Item]:
    """Read the rows of cold *seqs* and make them whole (one query); by seq."""
    back: dict[int, Item] = {}
    if not seqs:
        return back
    tail = ns.queue.tail
    for item in await reader.items_by_seq(ns.node.node_id, seqs):
        if bring_back(state, ns, item):
            back[item.seq] = item
    if tail is not None:  # a seq without a row would be asked for forever: drop it
        missing = [seq for seq in seqs if seq not in back and tail.forget(seq)]
        for seq in missing:
            log.warning("event=cold_item_missing node=%s seq=%d", ns.node.node_id, seq)
            state.forget_cold_member(ns, seq)
        if missing:
            state.file_cold_expiry(ns)
    return back


async def place_cold_heads(state: MemoryState, ns: NodeState, reader: ColdReader) -> None:
    """Read back the cold member each key of ``ColdTail.cold_heads`` should place
    (one query per ``READ_CHUNK`` keys): bringing it back places it. With few
    such keys, the members after it come along (``PREFETCH`` shared among the
    keys), so a queue of one key is not read one row per hand-out."""
    tail = ns.queue.tail
    asked: set[int] = set()
    while tail is not None and tail.cold_heads:
        seqs: list[int] = []
        ahead = max(1, PREFETCH // len(tail.cold_heads))
        for key in list(tail.cold_heads):
            fifo = ns.queue.keys.get(key)
            want = fifo.wanted() if fifo is not None else None
            if fifo is None or want is None or not fifo.is_cold(want) or want in asked:
                tail.cold_heads.discard(key)  # placed meanwhile (a rollback), or gone
                continue
            # The wanted member is cold, so no member is locked: it is the cold head.
            for seq in fifo.cold_first(ahead):
                seqs.append(seq)
                asked.add(seq)
            if len(seqs) >= READ_CHUNK:
                break
        if not seqs:
            return
        await bring_back_seqs(state, ns, reader, seqs)
        if ns.queue.tail is not tail:
            return  # purged meanwhile


async def ensure_heads(state: MemoryState, ns: NodeState, reader: ColdReader, limit: int) -> None:
    """Make the first *limit* ready items of every priority level whole, so the
    ready index alone answers a dispatch (cold items join with a prefetch), and
    place every ordering key's cold head (:func:`place_cold_heads`)."""
    tail = ns.queue.tail
    if tail is None or limit <= 0:
        return
    if tail.cold_heads:
        await place_cold_heads(state, ns, reader)
    for priority, level in list(tail.levels.items()):
        while len(level):
            head = level.first(1)[0]
            have = ns.queue.ready.count_below(priority, head, limit)
            if have >= limit:
                break
            await bring_back_seqs(state, ns, reader, level.first(limit - have + PREFETCH))


async def find(state: MemoryState, ns: NodeState, reader: ColdReader, item_id: str) -> Item | None:
    """The waiting or locked item *item_id* of *ns*, brought back if it was cold."""
    found = ns.items.get(item_id)
    tail = ns.queue.tail
    if found is not None or not tail or not tail.may_hold(item_id):
        return found
    row = await reader.item_by_id(ns.node.node_id, item_id)
    if row is None or row.acked_at is not None or not bring_back(state, ns, row):
        return None  # not there, retained, or removed in this transaction
    return ns.items.get(item_id)


def count(ns: NodeState) -> int:
    """Waiting and locked items of *ns*, whole and cold."""
    tail = ns.queue.tail
    return len(ns.items) + (len(tail) if tail is not None else 0)


def _seq(entry: Item | int) -> int:
    return entry if isinstance(entry, int) else entry.seq


def merged(ns: NodeState, newest_first: bool = False) -> Iterator[Item | int]:
    """Every item of *ns* in publish order: whole ones as items, cold ones as seqs."""
    hot = ns.in_order().values()
    tail = ns.queue.tail
    if newest_first:
        if not tail:
            return iter(reversed(hot))
        return heapq.merge(reversed(hot), tail.seqs_reversed(), key=_seq, reverse=True)
    if not tail:
        return iter(hot)
    return heapq.merge(hot, tail.seqs(), key=_seq)


def window(ns: NodeState, start: int, stop: int) -> list[Item | int]:
    """Entries ``start:stop`` in publish order, walking from the nearer end."""
    if not ns.queue.tail:
        return list(ns.window(start, stop))
    total = count(ns)
    stop = min(stop, total)
    if start >= stop:
        return []
    if start <= total - stop:
        return list(itertools.islice(merged(ns), start, stop))
    tail = list(itertools.islice(merged(ns, newest_first=True), total - stop, total - start))
    tail.reverse()
    return tail


async def resolve(ns: NodeState, reader: ColdReader, entries: list[Item | int]) -> list[Item]:
    """*entries* as items: cold seqs read from their rows (not kept)."""
    seqs = [e for e in entries if isinstance(e, int)]
    if not seqs:
        return entries  # type: ignore[return-value]
    rows: dict[int, Item] = {}
    for at in range(0, len(seqs), READ_CHUNK):
        for item in await reader.items_by_seq(ns.node.node_id, seqs[at : at + READ_CHUNK]):
            rows[item.seq] = item
    return [
        rows[e] if isinstance(e, int) else e for e in entries if not isinstance(e, int) or e in rows
    ]


async def position(ns: NodeState, reader: ColdReader, item_id: str) -> int | None:
    """Offset of *item_id* in publish order, hot or cold (XEP-0059 paging)."""
    tail = ns.queue.tail
    if not tail:
        return ns.position(item_id)
    item = ns.items.get(item_id)
    if item is None:
        if not tail.may_hold(item_id):
            return None
        row = await reader.item_by_id(ns.node.node_id, item_id)
        if row is None or not tail.holds(row.seq, row.priority):
            return None
        seq = row.seq
        hot_below = sum(1 for i in ns.items.values() if i.seq < seq)
    else:
        seq = item.seq
        hot_below = ns.position(item_id) or 0
    return hot_below + tail.count_below(seq)


async def oldest(
    state: MemoryState, ns: NodeState, reader: ColdReader, limit: int, waiting: bool
) -> list[Item]:
    """The *limit* oldest items (only unlocked ones if *waiting*), brought back
    whole: the caller is about to remove them (overflow, ``max_items``)."""
    chosen = list(
        itertools.islice(
            (e for e in merged(ns) if not waiting or isinstance(e, int) or e.locked_by is None),
            limit,
        )
    )
    back = await bring_back_seqs(state, ns, reader, [e for e in chosen if isinstance(e, int)])
    return [
        back[e] if isinstance(e, int) else e for e in chosen if not isinstance(e, int) or e in back
    ]
