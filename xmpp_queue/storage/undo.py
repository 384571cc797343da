"""Undoing a transaction's changes: a whole rollback, or one operation's savepoint.

Rollback puts every recorded value back, so memory equals the database again.
:meth:`Undo.savepoint` starts a fresh level of records; the keys an operation
touches are recorded there with their values as the *operation* found them.
Rolling the savepoint back is the same undo as a whole rollback, applied to that
level only (plus dropping the operation's ledger rows); releasing it merges the
level into the one below, where a key keeps its older record (see ``changes``).
A part of :class:`~xmpp_queue.storage.changes.ChangeSet`.
"""

from __future__ import annotations

from xmpp_queue.storage.change_records import ChangeRecords, Level


class Savepoint:
    """One operation's mark in a :class:`ChangeSet`: roll back to it, or release it."""

    __slots__ = ("_changes", "_depth")

    def __init__(self, changes: Undo, depth: int) -> None:
        self._changes = changes
        self._depth = depth

    def rollback(self) -> None:
        """Undo every change made since the savepoint began (memory and ledger rows)."""
        self._changes._end(self._depth, keep=False)

    def release(self) -> None:
        """Keep the changes: they become part of the enclosing transaction."""
        self._changes._end(self._depth, keep=True)


class Undo(ChangeRecords):
    """Rollback and savepoints over the records of :class:`ChangeRecords`."""

    __slots__ = ()

    def savepoint(self) -> Savepoint:
        """Begin a level of records for one operation (see the module docstring)."""
        self._below.append(
            Level(
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

    def _merge_into(self, below: Level) -> None:
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
