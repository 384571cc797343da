"""Lean indexes: drop the two global deadline indexes of ``items``; a BRIN time index
for the ledger on PostgreSQL.

Revision ID: 0009_lean_item_indexes
Revises: 0008_node_placement
Create Date: 2026-11-28

``ix_items_lock_expires_at`` and ``ix_items_available_at`` were made when
lock timeouts and retry delays were found by SQL. The component has long kept
those deadlines in memory (loaded with the items at start), and no statement
filters or orders on either column across nodes any more: the per-node counts
of the placement view read them through ``(node_id, ...)``. Yet every item
paid for them twice on the hot path: its insert and its lock (an update of
both columns) each wrote an entry into both. Dropping them leaves four
indexes on ``items``, each serving a query the service runs.

On PostgreSQL the ledger's time index ``ix_queue_events_at`` becomes a BRIN
index: ledger rows are appended in time order, the index serves the
pipeline's time ranges, and a block-range summary costs next to nothing per
appended row where the B-tree took an insert for each of an item's three or
so events. SQLite has no such index type and keeps its B-tree.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0009_lean_item_indexes"
down_revision: str | Sequence[str] | None = "0008_node_placement"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index(op.f("ix_items_lock_expires_at"), table_name="items")
    op.drop_index(op.f("ix_items_available_at"), table_name="items")
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index(op.f("ix_queue_events_at"), table_name="queue_events")
        op.create_index(op.f("ix_queue_events_at"), "queue_events", ["at"], postgresql_using="brin")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index(op.f("ix_queue_events_at"), table_name="queue_events")
        op.create_index(op.f("ix_queue_events_at"), "queue_events", ["at"])
    op.create_index(op.f("ix_items_available_at"), "items", ["available_at"])
    op.create_index(op.f("ix_items_lock_expires_at"), "items", ["lock_expires_at"])
