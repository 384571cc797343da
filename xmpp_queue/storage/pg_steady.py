"""The steady-state PostgreSQL commit: one statement over arrays, one round trip.

Why: at steady state a commit of a queue only deletes acked items, upserts
published and locked ones and appends ledger rows. Written the general way
(``write_plan``) that is a fencing check and three ``executemany`` calls, four
round trips besides BEGIN and COMMIT, and the server executes the prepared
statement once per row. Here the same rows go as one array of rows per part
(item keys to delete, items, cold items, ledger rows; each of a composite type,
``ROW_TYPES``) into a single statement whose data-modifying CTEs do all of it,
with, under a lease, the fencing check. Arrays of rows, not one array per column
(49 of them): asyncpg checks every value of a column array on its own, which was
about a third of the client's CPU per commit, and the server bound 49
parameters. The statement is sent on its own, without BEGIN and COMMIT: the
server runs it as a transaction of its own and commits it before answering, so
the whole commit is one round trip (it was three with BEGIN and COMMIT).

A commit whose answer is lost (the connection died meanwhile) is looked up by
its **commit mark**: the statement also sets its writer's row of
``commit_marks`` to the commit's serial number, so once the dead session has
ended that row says whether the commit happened (``backend_postgres``).

What keeps the meaning of the general path:

- The sub-statements of one statement see one snapshot and run in no fixed
  order, so a commit takes this path only when no item key is both deleted and
  upserted (an item removed and published again: delete, then insert a new row)
  and no key is upserted twice (``ON CONFLICT DO UPDATE`` may touch a row once).
  Anything else (nodes, subscriptions, affiliations, snapshots, purges: the
  tables with foreign keys between them) takes the general path.
- With a lease the check comes first: every other sub-statement (the commit
  mark too) reads the check's row (``EXISTS (SELECT FROM fence)``) and writes
  nothing unless the lease row was ours, so a fenced-out process touches no
  row and holds no item lock.
- Ledger rows get their ids in array order (a function scan keeps it).

An item row to delete or update is found by one probe of the unique index per
key (its ``ctid``), never by a join the planner might make a scan of the table
(``SESSION_PLANNER``). A ``ctid`` read in the statement's snapshot names the row the
statement then changes because nobody else writes that row meanwhile: an item
row is written only by the process holding its node's lease, one commit at a
time (the lease row's lock, taken by the fencing check), and readers never move
rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xmpp_queue.storage import schema
from xmpp_queue.storage.flush import Flush
from xmpp_queue.storage.lease import FENCE_CHECK
from xmpp_queue.storage.load import ITEM_COLD_FIELDS, ITEM_FIELDS, LEDGER_FIELDS
from xmpp_queue.storage.sql_rows import Encode, cold_item_rows, event_rows, item_rows

_ITEM_KEY = ("node_id", "item_id")
ROW_TYPES = ("steady_key", "steady_item", "steady_cold", "steady_event")
"""The composite types of the statement's four arrays, whose attributes are
``_ITEM_KEY``, ``ITEM_FIELDS``, ``ITEM_COLD_FIELDS`` and ``LEDGER_FIELDS`` in order."""


class _Params:
    """Positional parameters ``$1``, ``$2``, … handed out in order."""

    def __init__(self) -> None:
        self.count = 0

    def rows(self, row_type: str) -> str:
        """``unnest($n::row_type[]) AS v``: one parameter, an array of rows of one of
        the ``steady_*`` types (migration ``0011_steady_row_types``)."""
        self.count += 1
        return f"unnest(${self.count}::{row_type}[]) AS v"


def _statement(fenced: bool) -> str:
    """The statement. After the arrays come the writer and serial of the commit
    mark; with *fenced*, then the lease's name and token (``FENCE_CHECK``). Its
    columns say whether the lease was ours (always true without a lease) and
    whether the mark was set (false when the writer's row was missing)."""
    items, ledger = schema.items, schema.ledger
    p = _Params()
    gate = " AND EXISTS (SELECT FROM fence)" if fenced else ""
    where = " WHERE EXISTS (SELECT FROM fence)" if fenced else ""
    # The row of key v, found through the unique index (one probe per key).
    row_of_v = (
        f"(SELECT ctid FROM {items.name} AS i WHERE "
        + " AND ".join(f"i.{k} = v.{k}" for k in _ITEM_KEY)
        + ")"
    )
    changing = [f for f in ITEM_FIELDS if f not in _ITEM_KEY and f != "seq"]
    cold_set = ", ".join(f"{f} = v.{f}" for f in ITEM_COLD_FIELDS if f not in _ITEM_KEY)
    parts = [
        f"deleted AS (DELETE FROM {items.name} WHERE ctid = ANY (ARRAY(SELECT {row_of_v}"
        f" FROM {p.rows(ROW_TYPES[0])})){gate})",
        f"upserted AS (INSERT INTO {items.name} ({', '.join(ITEM_FIELDS)})"
        f" SELECT * FROM {p.rows(ROW_TYPES[1])}{where}"
        f" ON CONFLICT ({', '.join(_ITEM_KEY)}) DO UPDATE SET "
        + ", ".join(f"{f} = excluded.{f}" for f in changing)
        + ")",
        f"cold AS (UPDATE {items.name} SET {cold_set}"
        f" FROM (SELECT *, {row_of_v} AS row_id FROM {p.rows(ROW_TYPES[2])}) AS v"
        f" WHERE {items.name}.ctid = v.row_id{gate})",
        f"events AS (INSERT INTO {ledger.name} ({', '.join(LEDGER_FIELDS)})"
        f" SELECT * FROM {p.rows(ROW_TYPES[3])}{where})",
    ]
    # An UPDATE of the row the backend makes when it connects (MARK_ROW): as an
    # upsert (ON CONFLICT) the mark cost the server a quarter more per commit of 20
    # operations.
    marks, writer, serial = schema.commit_marks.name, p.count + 1, p.count + 2
    parts.append(
        f"marked AS (UPDATE {marks} SET serial = ${serial}::BIGINT, at = now()"
        f" WHERE writer = ${writer}::VARCHAR{gate} RETURNING 1)"
    )
    marked = "EXISTS (SELECT FROM marked)"
    if not fenced:
        return "WITH " + ", ".join(parts) + f" SELECT true, {marked}"
    check = FENCE_CHECK.replace("$1", f"${serial + 1}").replace("$2", f"${serial + 2}")
    fence = f"fence AS ({check} RETURNING 1)"
    return "WITH " + ", ".join([fence, *parts]) + f" SELECT EXISTS (SELECT FROM fence), {marked}"


# The backend's session plans every statement once (a generic plan, kept with the
# prepared statement: a plan for each commit's array lengths would cost the server
# more than the steady statement) and with sequential scans off. The items table
# churns (a row inserted, updated and deleted per item), so between two autovacuum
# runs it holds many dead rows, which a scan reads at every commit, while the
# planner, going by the last statistics, believes the table small and would rather
# scan it than probe its index. The general path's statements and the reads name
# rows by key too; a statement with no usable index still scans (this only makes
# a scan the last resort). Set for the session, not per transaction, because the
# steady statement runs outside any BEGIN.
#
# JIT compilation is off for the session: with scans priced out, a statement that
# must scan (the stale commit marks' delete, on a table of a few rows) looks to
# the planner like 10^10 cost units, far above every JIT threshold, and the server
# compiled it with LLVM at every execution: 40 ms on a slow machine, 150 ms for a
# session's first, at every load and so in every takeover. The session's
# statements each touch a few rows, where compiling never pays. Loads keep it off
# too: asyncpg's type lookup saves and restores ``jit`` for the session
# (``set_config(..., false)``), so a ``SET LOCAL jit`` in a load's transaction
# would outlive it.
SESSION_PLANNER = (
    "SET enable_seqscan = off; SET plan_cache_mode = force_generic_plan; SET jit = off"
)
# A load reads whole tables once: there a scan is the right plan, planned for the
# values at hand.
LOAD_PLANNER = "SET LOCAL enable_seqscan = on; SET LOCAL plan_cache_mode = auto"
MARK_ROW = (
    "INSERT INTO commit_marks (writer, serial, at) VALUES ($1, $2, now())"
    " ON CONFLICT (writer) DO NOTHING"
)
"""The writer's row of ``commit_marks``, made when its connection opens."""
STEADY = _statement(fenced=False)
STEADY_FENCED = _statement(fenced=True)

_GENERAL_ONLY = (
    "clear_nodes",
    "clear_items",
    "sub_deletes",
    "aff_deletes",
    "node_deletes",
    "node_upserts",
    "aff_upserts",
    "sub_upserts",
    "snapshot_nodes",
)


def steady_arguments(flush: Flush, t: Encode) -> list[Sequence[tuple[Any, ...]]] | None:
    """The arrays of rows of :data:`STEADY` (before the writer, serial, lease name
    and token) for *flush*: item keys to delete, items to upsert, cold items to
    update, ledger rows; or None when *flush* needs the general path (module
    docstring)."""
    for name in _GENERAL_ONLY:
        if getattr(flush, name):
            return None
    upserts = flush.item_upserts
    if upserts:
        keys = {(i.node, i.item_id) for i in upserts}
        if len(keys) != len(upserts) or not keys.isdisjoint(flush.item_deletes):
            return None
    return [
        flush.item_deletes,
        item_rows(upserts, t),
        cold_item_rows(upserts, t),
        event_rows(flush.events, t),
    ]
