"""Retention and replay: acked items kept for a seek, and named snapshots.

Revision ID: 0007_retention
Revises: 0006_event_details
Create Date: 2026-11-28

``items.acked_at`` (nullable): set on an item a retaining queue
(``pubsub#queue_retain_acked``) keeps after its ack, so its owner can seek
back; NULL on every queue item, so rows written before this revision are
what they were. ``queue_snapshots``: a queue's named snapshots (the moment
and the first seq not yet handed out), deleted with their node.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_retention"
down_revision: str | Sequence[str] | None = "0006_event_details"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UTC_TIME = sa.DateTime(timezone=True)  # a revision keeps its own copy of the type


def upgrade() -> None:
    with op.batch_alter_table("items") as batch:
        batch.add_column(sa.Column("acked_at", UTC_TIME, nullable=True))
    op.create_table(
        "queue_snapshots",
        sa.Column("node_id", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("created_at", UTC_TIME, nullable=False),
        sa.Column("mark_seq", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["node_id"],
            ["nodes.node_id"],
            name=op.f("fk_queue_snapshots_node_id_nodes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("node_id", "name", name=op.f("pk_queue_snapshots")),
    )


def downgrade() -> None:
    op.drop_table("queue_snapshots")
    # SQLite drops a column by copying the table: keep AUTOINCREMENT (seqs are
    # publish order and must never be reused).
    with op.batch_alter_table("items", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("acked_at")
