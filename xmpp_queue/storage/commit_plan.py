"""The plan of a commit: the rows that make the database equal to memory.

Each recorded key is compared with its value now and only the difference is
written: a key created and deleted inside the transaction (an item published
and acked in one batch) costs nothing, and a key changed five times is written
once. A part of :class:`~xmpp_queue.storage.changes.ChangeSet`.
"""

from __future__ import annotations

from xmpp_queue.core.model import Item
from xmpp_queue.storage.change_records import ChangeRecords
from xmpp_queue.storage.flush import Flush, ItemKey


class CommitPlan(ChangeRecords):
    """Turns the records into a :class:`Flush` (see the module docstring)."""

    __slots__ = ()

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
