"""ChangeSet: what one write-behind transaction changed, to write it or undo it.

Writes apply to :class:`~xmpp_queue.storage.state.MemoryState` at
once (later operations of the same batch must see them). Before the first
change of a key, the transaction records the key's value as it was when the
transaction began; that one record serves both ends:

- **commit** (:meth:`ChangeSet.plan`) compares each recorded key with its value
  now and writes only the difference: a key created and deleted inside the
  transaction (an item published and acked in one batch) costs nothing, and a
  key changed five times is written once;
- **rollback** (:meth:`ChangeSet.rollback`) puts every recorded value back, so
  memory equals the database again.

Node-level changes (add, reconfigure, remove, purge) record the whole node: a
shallow copy of its :class:`NodeState`, whose containers a purge or a removal
replaces rather than empties, so the copy keeps what the database holds and
rollback is O(1) per node. A key first touched after such a snapshot takes its
original value from the snapshot's containers, not from the live ones.

Ledger events are only buffered here; they are written with the rest at commit.

**Savepoints** give each operation of a batch its own undo (all or nothing per
operation while the batch shares one commit). :meth:`ChangeSet.savepoint`
starts a fresh level of records; the keys an operation touches are recorded
there with their values as the *operation* found them. Rolling the savepoint
back is the same undo as a whole rollback, applied to that level only (plus
dropping the operation's ledger rows); releasing it merges the level into the
one below, where a key keeps its older record: the value as the *transaction*
found it, taken from the lower level's node snapshot when that level had
snapshotted the node (a purge or removal replaced the live containers since).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from xmpp_queue.core.ledger import FINISHED, LedgerEvent
from xmpp_queue.core.model import Affiliation, Item, Node, Snapshot, Subscription
from xmpp_queue.storage.state import MemoryState, NodeState

ItemKey = tuple[str, str]  # (node_id, item_id)
SubKey = tuple[str, str]  # (node_id, subid)
AffKey = tuple[str, str]  # (node_id, jid)


@dataclass(slots=True)
class Flush:
    """The rows one commit writes, grouped in the order foreign keys need.

    Deletes of children, then of nodes; then upserts of nodes, then of their
    children; then the ledger rows. ``max_seq``/``max_sub_id`` are the highest
    ids handed out so far (PostgreSQL moves its sequences past them).
    """

    clear_nodes: list[str] = field(default_factory=list)  # every child row goes
    clear_items: list[str] = field(default_factory=list)  # purge: item rows go
    item_deletes: list[ItemKey] = field(default_factory=list)
    sub_deletes: list[SubKey] = field(default_factory=list)
    aff_deletes: list[AffKey] = field(default_factory=list)
    node_deletes: list[str] = field(default_factory=list)
    node_upserts: list[Node] = field(default_factory=list)
    aff_upserts: list[tuple[str, str, Affiliation]] = field(default_factory=list)
    sub_upserts: list[tuple[int, Subscription]] = field(default_factory=list)
    item_upserts: list[Item] = field(default_factory=list)
    # Nodes whose snapshots changed: their rows are replaced by these.
    snapshot_nodes: list[tuple[str, list[Snapshot]]] = field(default_factory=list)
    events: list[LedgerEvent] = field(default_factory=list)
    max_seq: int = 0
    max_sub_id: int = 0

    def empty(self) -> bool:
        return not (
            self.clear_nodes
            or self.clear_items
            or self.item_deletes
            or self.sub_deletes
            or self.aff_deletes
            or self.node_deletes
            or self.node_upserts
            or self.aff_upserts
            or self.sub_upserts
            or self.item_upserts
            or self.snapshot_nodes
            or self.events
        )


@dataclass(slots=True)
class _Level:
    """The records of the levels below an open savepoint."""

    nodes: dict[str, NodeState | None]
    dropped: set[str]
    purged: set[str]
    items: dict[ItemKey, Item | None]
    subs: dict[SubKey, tuple[Subscription, int] | None]
    affiliations: dict[AffKey, Affiliation | None]
    retained: dict[ItemKey, Item | None]
    events: int  # how many ledger rows were buffered when the savepoint began


class Savepoint:
    """One operation's mark in a :class:`ChangeSet`: roll back to it, or release it."""

    __slots__ = ("_changes", "_depth")

    def __init__(self, changes: ChangeSet, depth: int) -> None:
        self._changes = changes
        self._depth = depth

    def rollback(self) -> None:
        """Undo every change made since the savepoint began (memory and ledger rows)."""
        self._changes._end(self._depth, keep=False)

    def release(self) -> None:
        """Keep the changes: they become part of the enclosing transaction."""
        self._changes._end(self._depth, keep=True)


class ChangeSet:
    """Original values of every key one transaction touched (see the module docstring)."""

    __slots__ = (
        "_below",
        "affiliations",
        "dropped",
        "earlier",
        "events",
        "items",
        "nodes",
        "purged",
        "retained",
        "state",
        "subs",
    )

    def __init__(self, state: MemoryState) -> None:
        self.state = state
        # node id -> snapshot taken before the first node-level change (None: absent)
        self.nodes: dict[str, NodeState | None] = {}
        self.dropped: set[str] = set()
        self.purged: set[str] = set()
        self.items: dict[ItemKey, Item | None] = {}
        self.subs: dict[SubKey, tuple[Subscription, int] | None] = {}
        self.affiliations: dict[AffKey, Affiliation | None] = {}
        # Retained items (``NodeState.retained``), recorded like ``items``.
        self.retained: dict[ItemKey, Item | None] = {}
        self.events: list[LedgerEvent] = []
        # The ledger rows of the commit still in flight below this one (the
        # commit pipeline, ``inflight.py``): pending too, for the dedup window.
        self.earlier: list[LedgerEvent] = []
        self._below: list[_Level] = []

    def __bool__(self) -> bool:
        if self._below:
            return True  # an open savepoint: something may have changed below it
        return bool(
            self.nodes
            or self.items
            or self.subs
            or self.affiliations
            or self.retained
            or self.events
        )

    def finished_pending(self, node_id: str, item_id: str, since: datetime) -> bool:
        """Whether this transaction's (not yet committed) ledger rows ack or retract
        *item_id* at or after *since*: the dedup window before the commit (this
        transaction's rows and those of the commit in flight before it)."""
        for event in (*reversed(self.events), *reversed(self.earlier)):
            if (
                event.item_id == item_id
                and event.node == node_id
                and event.kind in FINISHED
                and event.at >= since
            ):
                return True
        return False

    def detach(self) -> ChangeSet:
        """Hand the records to a new change set (a commit in flight keeps them
        to undo itself) and start afresh, as after a commit."""
        if self._below:
            raise RuntimeError("a savepoint is still open")
        handed = ChangeSet(self.state)
        handed.nodes, handed.dropped, handed.purged = self.nodes, self.dropped, self.purged
        handed.items, handed.subs, handed.affiliations = self.items, self.subs, self.affiliations
        handed.retained, handed.events = self.retained, self.events
        self.clear()
        return handed

    # --- savepoints ----------------------------------------------------------------------

    def savepoint(self) -> Savepoint:
        """Begin a level of records for one operation (see the module docstring)."""
        self._below.append(
            _Level(
                self.nodes,
                self.dropped,
                self.purged,
                self.items,
                self.subs,
                self.affiliations,
                self.retained,
                len(self.events),
            )
        )
        self.nodes, self.dropped, self.purged = {}, set(), set()
        self.items, self.subs, self.affiliations = {}, {}, {}
        self.retained = {}
        return Savepoint(self, len(self._below))

    def _end(self, depth: int, keep: bool) -> None:
        if depth != len(self._below):
            raise RuntimeError("savepoints must end innermost first, once each")
        below = self._below.pop()
        if keep:
            if not (
                below.nodes or below.items or below.subs or below.affiliations or below.retained
            ):
                # Nothing recorded below (the batch's first operation, or a batch of
                # one): this level's records are the transaction's as they stand.
                self.dropped |= below.dropped
                self.purged |= below.purged
                return
            self._merge_into(below)
        else:
            self._undo()
            del self.events[below.events :]
        self.nodes, self.dropped, self.purged = below.nodes, below.dropped, below.purged
        self.items, self.subs, self.affiliations = below.items, below.subs, below.affiliations
        self.retained = below.retained

    def _merge_into(self, below: _Level) -> None:
        """Add this level's records to *below*, keeping *below*'s where it has one."""
        snapshotted = below.nodes  # the nodes *below* took a snapshot of, before merging
        if not snapshotted and not self.nodes:
            # The common case: no node-level change anywhere, so every record here is
            # the value as the transaction found it unless *below* has an older one.
            setdefault = below.items.setdefault
            for key, orig in self.items.items():
                setdefault(key, orig)
            for skey, was in self.subs.items():
                below.subs.setdefault(skey, was)
            for akey, aff in self.affiliations.items():
                below.affiliations.setdefault(akey, aff)
            for rkey, kept in self.retained.items():
                below.retained.setdefault(rkey, kept)
            return
        for (node_id, item_id), orig in self.items.items():
            if (node_id, item_id) in below.items:
                continue
            if node_id in snapshotted:
                snap = snapshotted[node_id]
                orig = snap.items.get(item_id) if snap is not None else None
            below.items[(node_id, item_id)] = orig
        for (node_id, item_id), kept in self.retained.items():
            if (node_id, item_id) in below.retained:
                continue
            if node_id in snapshotted:
                snap = snapshotted[node_id]
                kept = snap.retained.get(item_id) if snap is not None else None
            below.retained[(node_id, item_id)] = kept
        for (node_id, subid), was in self.subs.items():
            if (node_id, subid) in below.subs:
                continue
            if node_id in snapshotted:
                snap = snapshotted[node_id]
                has = snap is not None and subid in snap.subs
                was = (snap.subs[subid], snap.sub_ids[subid]) if has else None  # type: ignore[union-attr]
            below.subs[(node_id, subid)] = was
        for (node_id, jid), aff in self.affiliations.items():
            if (node_id, jid) in below.affiliations:
                continue
            if node_id in snapshotted:
                snap = snapshotted[node_id]
                aff = snap.affiliations.get(jid) if snap is not None else None
            below.affiliations[(node_id, jid)] = aff
        for node_id, snap_here in self.nodes.items():
            if node_id not in snapshotted:
                snapshotted[node_id] = snap_here
        below.dropped |= self.dropped
        below.purged |= self.purged

    # --- recording: call before the change --------------------------------------------

    def _origin(self, node_id: str) -> NodeState | None:
        """The node as the transaction found it, for keys not touched yet."""
        if node_id in self.nodes:
            return self.nodes[node_id]
        return self.state.nodes.get(node_id)

    def touch_node(self, node_id: str) -> None:
        if node_id not in self.nodes:
            ns = self.state.nodes.get(node_id)
            self.nodes[node_id] = ns.copy() if ns is not None else None

    def touch_item(self, node_id: str, item_id: str) -> None:
        key = (node_id, item_id)
        if key not in self.items:
            # _origin() inlined: this runs for every item write.
            nodes = self.nodes
            origin = nodes[node_id] if node_id in nodes else self.state.nodes.get(node_id)
            self.items[key] = origin.items.get(item_id) if origin is not None else None

    def touch_retained(self, node_id: str, item_id: str) -> None:
        key = (node_id, item_id)
        if key not in self.retained:
            origin = self._origin(node_id)
            self.retained[key] = origin.retained.get(item_id) if origin is not None else None

    def touch_sub(self, node_id: str, subid: str) -> None:
        key = (node_id, subid)
        if key not in self.subs:
            origin = self._origin(node_id)
            if origin is None or subid not in origin.subs:
                self.subs[key] = None
            else:
                self.subs[key] = (origin.subs[subid], origin.sub_ids[subid])

    def touch_affiliation(self, node_id: str, jid: str) -> None:
        key = (node_id, jid)
        if key not in self.affiliations:
            origin = self._origin(node_id)
            self.affiliations[key] = origin.affiliations.get(jid) if origin is not None else None

    # --- commit --------------------------------------------------------------------------

    def plan(self) -> Flush:
        """The rows that make the database equal to memory (see :class:`Flush`)."""
        if self._below:
            raise RuntimeError("a savepoint is still open")
        st = self.state
        f = Flush(max_seq=st.next_seq - 1, max_sub_id=st.next_sub_id - 1, events=self.events)
        cleared: set[str] = set()  # nodes whose child rows are all deleted
        items_cleared: set[str] = set()
        for node_id, snap in self.nodes.items():
            ns = st.nodes.get(node_id)
            if snap is not None and (ns is None or node_id in self.dropped):
                f.clear_nodes.append(node_id)
                cleared.add(node_id)
                items_cleared.add(node_id)
            elif snap is not None and node_id in self.purged:
                f.clear_items.append(node_id)
                items_cleared.add(node_id)
            if ns is None:
                if snap is not None:
                    f.node_deletes.append(node_id)
            elif snap is None or ns.node is not snap.node or node_id in self.dropped:
                f.node_upserts.append(ns.node)
            if ns is not None and ns.snapshots is not (snap.snapshots if snap else None):
                if snap is not None or ns.snapshots:
                    f.snapshot_nodes.append((node_id, list(ns.snapshots.values())))
        nodes = st.nodes
        self._plan_items(f, self.items, items_cleared, retained=False)
        self._plan_items(f, self.retained, items_cleared, retained=True)
        for key, was in self.subs.items():
            ns = nodes.get(key[0])
            sub = ns.subs.get(key[1]) if ns is not None else None
            in_db = was is not None and key[0] not in cleared
            if sub is None:
                if in_db:
                    f.sub_deletes.append(key)
                continue
            sub_id = ns.sub_ids[key[1]]  # type: ignore[union-attr]
            if was is not None and was[0] is sub and was[1] == sub_id and in_db:
                continue
            if in_db and was[1] != sub_id:  # type: ignore[index]
                f.sub_deletes.append(key)
            f.sub_upserts.append((sub_id, sub))
        for key, aff in self.affiliations.items():
            ns = nodes.get(key[0])
            now = ns.affiliations.get(key[1]) if ns is not None else None
            in_db = aff is not None and key[0] not in cleared
            if now is None:
                if in_db:
                    f.aff_deletes.append(key)
            elif now is not aff or not in_db:
                f.aff_upserts.append((key[0], key[1], now))
        return f

    def _plan_items(
        self,
        f: Flush,
        records: dict[ItemKey, Item | None],
        items_cleared: set[str],
        retained: bool,
    ) -> None:
        """Rows of one item key space (queue items or retained ones). One row
        holds an item in either space (``acked_at`` tells which), so a key that
        left one space for the other with the same seq is updated, not deleted."""
        nodes = self.state.nodes
        for key, orig in records.items():
            ns = nodes.get(key[0])
            if ns is None:
                final = other = None
            elif retained:
                final, other = ns.retained.get(key[1]), ns.items.get(key[1])
            else:
                final, other = ns.items.get(key[1]), ns.retained.get(key[1])
            if final is orig:
                continue
            in_db = orig is not None and key[0] not in items_cleared
            if final is None:
                if in_db and (other is None or other.seq != orig.seq):  # type: ignore[union-attr]
                    f.item_deletes.append(key)
                continue
            if in_db and orig.seq != final.seq:  # type: ignore[union-attr]
                f.item_deletes.append(key)  # removed and published again: a new row
            f.item_upserts.append(final)

    # --- rollback ------------------------------------------------------------------------

    def rollback(self) -> None:
        """Put every touched key back as the transaction found it."""
        while self._below:
            self._end(len(self._below), keep=False)
        self._undo()
        self.clear()

    def _undo(self) -> None:
        """Put every key recorded at the current level back as that level found it."""
        st = self.state
        for node_id, snap in self.nodes.items():
            if snap is None:
                st.nodes.pop(node_id, None)
            else:
                st.nodes[node_id] = snap
        for (node_id, item_id), orig in self.items.items():
            ns = st.nodes.get(node_id)
            if ns is None or ns.items.get(item_id) is orig:
                continue
            if st.set_item(ns, item_id, orig) is None and orig is not None:
                ns.ordered = False  # put back at the end of the dict; sorted on demand
        for (node_id, item_id), kept in self.retained.items():
            ns = st.nodes.get(node_id)
            if ns is None or ns.retained.get(item_id) is kept:
                continue
            st.set_retained(ns, item_id, kept)
        resort: set[str] = set()
        for (node_id, subid), was in self.subs.items():
            ns = st.nodes.get(node_id)
            if ns is None:
                continue
            if was is None:
                ns.subs.pop(subid, None)
                ns.sub_ids.pop(subid, None)
                continue
            if ns.sub_ids.get(subid) != was[1]:
                resort.add(node_id)
            ns.subs[subid], ns.sub_ids[subid] = was
            st.subscribers.index_sub(ns, was[0])
        for node_id in resort:
            st.nodes[node_id].subs_in_order()
        for snap in self.nodes.values():
            if snap is not None:
                st.subscribers.index_node_subs(
                    snap
                )  # a node put back whole: find its subscriptions
        for (node_id, jid), aff in self.affiliations.items():
            ns = st.nodes.get(node_id)
            if ns is None:
                continue
            if aff is None:
                ns.affiliations.pop(jid, None)
            else:
                ns.affiliations[jid] = aff
        if self.nodes:
            st.recount()

    def clear(self) -> None:
        self.nodes = {}
        self.dropped = set()
        self.purged = set()
        self.items = {}
        self.subs = {}
        self.affiliations = {}
        self.retained = {}
        self.events = []
        self._below = []
