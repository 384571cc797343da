"""Loading a migrated database into :class:`MemoryState`, and the row layouts.

The write-behind store reads every node, affiliation, subscription and item
once, at open (and again after a commit whose outcome is unknown). The column
orders below are shared by the load queries and the write statements
(``sql_statements``, ``sql_rows``), so a row read and a row written line up.

Memory matters here: a queue may hold millions of items. Repeated strings
(node ids, publishers, lock holders, ordering keys) are shared, equal
timestamps of one row share one object, and items without headers share one
empty mapping. Waiting items are not read whole at all where their seqs are
enough (``backlog``): plain ones by priority level, and on ordered nodes the
unlocked members of each ordering key as (key, seqs).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from xmpp_queue.core.model import (
    Affiliation,
    Item,
    Node,
    Snapshot,
    Subscription,
    SubscriptionState,
)
from xmpp_queue.core.ordering_config import is_ordered
from xmpp_queue.storage import codec
from xmpp_queue.storage.item_values import COLD, EMPTY_HEADERS, frozen_headers
from xmpp_queue.storage.node_state import NodeState
from xmpp_queue.storage.ordered import KeyFifo
from xmpp_queue.storage.state import MemoryState
from xmpp_queue.storage.tail import ColdTail

NODE_FIELDS = ("node_id", "config", "creator", "created_at")  # the table's column order
AFFILIATION_FIELDS = ("node_id", "jid", "affiliation")
SUBSCRIPTION_FIELDS = (
    "id",
    "node_id",
    "subid",
    "jid",
    "state",
    "queue_requests",
    "options",
    "created_at",
    "last_activity",
)
ITEM_COLD_FIELDS = (  # an UPDATE of an item whose payload is not in memory
    "publisher",
    "payload_size",
    "published_at",
    "updated_at",
    "locked_by",
    "lock_jid",
    "locked_at",
    "lock_expires_at",
    "available_at",
    "deliveries",
    "headers",
    "priority",
    "expires_at",
    "ordering_key",
    "acked_at",
    "node_id",
    "item_id",
)
ITEM_FIELDS = (
    "seq",
    "node_id",
    "item_id",
    "publisher",
    "payload",
    "payload_size",
    "published_at",
    "updated_at",
    "locked_by",
    "lock_jid",
    "locked_at",
    "lock_expires_at",
    "available_at",
    "deliveries",
    "headers",
    "priority",
    "expires_at",
    "ordering_key",
    "acked_at",
)
SNAPSHOT_FIELDS = ("node_id", "name", "created_at", "mark_seq")
LEDGER_FIELDS = (
    "at",
    "kind",
    "node",
    "item_id",
    "subscriber",
    "deliveries",
    "payload_size",
    "attributes",
    "reason",
)

Row = Sequence[Any]
DateDecoder = Callable[[Any], datetime | None]


class StateBuilder:
    """Turns rows (in the orders above) into a :class:`MemoryState`.

    *when* turns a stored timestamp into an aware UTC datetime (SQLite keeps
    text, asyncpg returns datetimes). Feed nodes first, then the rest in id /
    seq order, then call :meth:`finish`.
    """

    def __init__(self, when: DateDecoder) -> None:
        self._when = when
        self._state = MemoryState()
        self._strings: dict[str, str] = {}
        self._max_seq = 0
        self._max_sub_id = 0
        self.orphans = 0  # child rows of a missing node (foreign keys were off)

    def _shared(self, text: str | None) -> str | None:
        if text is None:
            return None
        return self._strings.setdefault(text, text)

    def nodes(self, rows: Iterable[Row]) -> None:
        for node_id, config, creator, created_at in rows:
            when = self._when(created_at)
            assert when is not None
            node = Node(node_id, codec.decode_config(config), when, creator)
            self._strings[node_id] = node_id
            self._state.nodes[node_id] = NodeState(node)
            self._state.note_binding(node)

    def affiliations(self, rows: Iterable[Row]) -> None:
        nodes = self._state.nodes
        for node_id, jid, affiliation in rows:
            ns = nodes.get(node_id)
            if ns is None:
                self.orphans += 1
                continue
            ns.affiliations[jid] = Affiliation(affiliation)

    def subscriptions(self, rows: Iterable[Row]) -> None:
        nodes, when = self._state.nodes, self._when
        for sub_id, node_id, subid, jid, state, requests, options, created, last in rows:
            ns = nodes.get(node_id)
            if ns is None:
                self.orphans += 1
                continue
            created_at = when(created)
            assert created_at is not None
            ns.subs[subid] = Subscription(
                ns.node.node_id,
                jid,
                subid,
                SubscriptionState(state),
                created_at,
                requests,
                codec.decode_options(options),
                when(last),
            )
            ns.sub_ids[subid] = sub_id
            self._max_sub_id = max(self._max_sub_id, sub_id)

    def items(self, rows: Iterable[Row]) -> None:
        """Item rows whose ``payload`` column says only whether it is NULL: every
        other payload stays in the database until a read needs it (COLD)."""
        state, nodes, when, shared = self._state, self._state.nodes, self._when, self._shared
        last_text: Any = None
        last_when: datetime | None = None
        for (
            seq,
            node_id,
            item_id,
            publisher,
            payload_is_null,
            size,
            published,
            updated,
            locked_by,
            lock_jid,
            locked_at,
            expires,
            available,
            deliveries,
            headers,
            priority,
            item_expires,
            ordering_key,
            acked_at,
        ) in rows:
            ns = nodes.get(node_id)
            if ns is None:
                self.orphans += 1
                continue
            # published_at, updated_at and locked_at are often the same moment.
            if published != last_text:
                last_text, last_when = published, when(published)
            published_at = last_when
            updated_at = published_at if updated == published else when(updated)
            assert published_at is not None and updated_at is not None
            item = Item(
                ns.node.node_id,
                item_id,
                seq,
                shared(publisher) or "",
                None if payload_is_null else COLD,
                published_at,
                updated_at,
                size,
                shared(locked_by),
                shared(lock_jid),
                updated_at if locked_at == updated else when(locked_at),
                when(expires),
                when(available),
                deliveries,
                frozen_headers(codec.decode_headers(headers)) if headers else EMPTY_HEADERS,
                priority,
                when(item_expires),
                shared(ordering_key),
                when(acked_at),
            )
            if acked_at is None:
                state.set_item(ns, item_id, item)
            else:
                ns.retained[item_id] = item  # indexed by finish() (recount)
            self._max_seq = max(self._max_seq, seq)

    def tail(self, rows: Iterable[tuple[str, int, Sequence[int], int]]) -> None:
        """Plain waiting items as (node id, priority, their seqs, their payload
        bytes): each node's cold tail (``tail``), no item read whole."""
        nodes = self._state.nodes
        for node_id, priority, seqs, size in rows:
            ns = nodes.get(node_id)
            if ns is None:
                self.orphans += len(seqs)
                continue
            self._cold(ns, seqs, size).level(priority).extend_sorted(list(seqs))

    def delayed(self, rows: Iterable[tuple[str, int, Sequence[int], int]]) -> None:
        """Delayed plain waiting items as (node id, priority, their seqs, their
        payload bytes): the cold tails' delayed levels (``schedule`` their times)."""
        nodes = self._state.nodes
        for node_id, priority, seqs, size in rows:
            ns = nodes.get(node_id)
            if ns is None:
                continue  # counted as orphans by ``schedule``
            self._cold(ns, seqs, size).delayed_level(priority).extend_sorted(list(seqs))

    def ordered_nodes(self) -> list[str]:
        """The ordered nodes loaded so far: their keyed waiting items load as
        (key, seqs) (``keyed``), not whole (the ``ordered`` parameter)."""
        return [node_id for node_id, ns in self._state.nodes.items() if is_ordered(ns.node.config)]

    def keyed(self, rows: Iterable[tuple[str, str, Sequence[int], int]]) -> None:
        """Unlocked members of ordering keys of ordered nodes, as (node id, key,
        their seqs, their payload bytes), after ``items`` (a key's locked member,
        loaded whole, stays placed): cold in their key's fifo and their node's
        tail; a key without a locked member waits for a dispatch to read its head
        back (``ColdTail.cold_heads``)."""
        state, nodes = self._state, self._state.nodes
        by_node: dict[str, list[int]] = {}
        for node_id, key, seqs, size in rows:
            ns = nodes.get(node_id)
            if ns is None:
                self.orphans += len(seqs)
                continue
            key = self._shared(key) or ""
            members = list(seqs)
            self._cold(ns, members, size)
            fifo = ns.queue.keys.get(key)
            if fifo is None:
                fifo = ns.queue.keys[key] = KeyFifo()
            fifo.extend_cold(members)
            by_node.setdefault(node_id, []).extend(members)
            state.settle_key(ns, key)
        for node_id, members in by_node.items():
            tail = nodes[node_id].queue.tail
            assert tail is not None
            tail.keyed.extend_sorted(members)

    def _cold(self, ns: NodeState, seqs: Sequence[int], size: int | None) -> ColdTail:
        """The node's cold tail, counting one group of loaded seqs of *size* payload
        bytes (the caller files them in their level)."""
        q = ns.queue
        if q.tail is None:
            q.tail = ColdTail()
        q.tail.payload_bytes += int(size or 0)
        q.payload_bytes += int(size or 0)
        if seqs:
            top = max(seqs)
            self._max_seq = max(self._max_seq, top)
            q.tail.unknown_upto = max(q.tail.unknown_upto, top)  # ids not read
        return q.tail

    def schedule(
        self, rows: Iterable[tuple[str, Sequence[int], Sequence[int]]], expiry: bool = False
    ) -> None:
        """(node id, due times, seqs) of the delayed items ``delayed`` filed, in
        (due, seq) order: each node's ``DueIndex`` (*expiry*: expiry times of
        the items ``tail`` and ``delayed`` filed)."""
        nodes = self._state.nodes
        for node_id, dues, seqs in rows:
            ns = nodes.get(node_id)
            if ns is None or ns.queue.tail is None:
                self.orphans += 0 if expiry else len(seqs)
                continue
            index = ns.queue.tail.expiry if expiry else ns.queue.tail.due
            index.extend_sorted(array("q", dues), array("q", seqs))

    def snapshots(self, rows: Iterable[Row]) -> None:
        nodes, when = self._state.nodes, self._when
        for node_id, name, created, mark_seq in rows:
            ns = nodes.get(node_id)
            created_at = when(created)
            if ns is None or created_at is None:
                self.orphans += 1
                continue
            ns.snapshots[name] = Snapshot(ns.node.node_id, name, created_at, int(mark_seq))

    def dedup_nodes(self) -> list[tuple[str, int]]:
        """(node id, window seconds) of every node that keeps a dedup window."""
        return [
            (node_id, ns.node.config.queue_dedup_window)
            for node_id, ns in self._state.nodes.items()
            if ns.node.config.queue_dedup_window > 0
        ]

    def finished(self, node_id: str, rows: Iterable[Row]) -> None:
        """Acks and retracts of a dedup node's window, from the ledger, oldest first
        (rows of (item id, at)); the window is re-read, never stored twice."""
        ns = self._state.nodes[node_id]
        for item_id, at in rows:
            when = self._when(at)
            assert when is not None
            ns.finished.pop(item_id, None)
            ns.finished[item_id] = when

    def finish(self, seq_floor: int = 0, sub_id_floor: int = 0) -> MemoryState:
        """The state; new seqs and subscription ids start above every one seen
        and above the database's own counters (*seq_floor*, *sub_id_floor*)."""
        for ns in self._state.nodes.values():
            self._state.subscribers.index_node_subs(ns)
        self._state.retention.rebuild(self._state.nodes)
        self._state.unused.rebuild(self._state.nodes)
        for ns in self._state.nodes.values():
            if ns.queue.tail is not None:  # the timer sees the cold due and expiry times
                self._state.refile_delayed(ns)
                self._state.file_cold_expiry(ns)
        self._state.next_seq = max(self._max_seq, seq_floor) + 1
        self._state.next_sub_id = max(self._max_sub_id, sub_id_floor) + 1
        return self._state
