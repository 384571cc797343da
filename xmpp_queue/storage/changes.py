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

The parts, one module each: ``change_records`` (the records and the ``touch_*``
calls that make them), ``undo`` (rollback and savepoints), ``commit_plan`` (the
rows a commit writes) and ``flush`` (those rows, as a backend gets them).
"""

from __future__ import annotations

from xmpp_queue.storage.commit_plan import CommitPlan
from xmpp_queue.storage.undo import Undo

__all__ = ["ChangeSet"]


class ChangeSet(Undo, CommitPlan):
    """Original values of every key one transaction touched (see the module docstring)."""

    __slots__ = ()
