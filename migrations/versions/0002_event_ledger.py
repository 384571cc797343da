"""Event ledger: one row per state change of a queue item (input of the Spark pipeline).

Revision ID: 0002_event_ledger
Revises: 0001_initial
Create Date: 2026-01-01

The names are literal copies of ``xmpp_queue/ledger_names.py`` at the time of
writing (a revision must not change when that module does). No foreign key to
nodes: the history outlives the nodes it describes.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_event_ledger"
down_revision: str | Sequence[str] | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "queue_events",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("item_id", sa.String(), nullable=False),
        sa.Column("subscriber", sa.String(), nullable=True),
        sa.Column("deliveries", sa.Integer(), nullable=False),
        sa.Column("payload_size", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queue_events")),
        # ids are the pipeline's cursor: never reuse one (SQLite's AUTOINCREMENT).
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_queue_events_at"), "queue_events", ["at"])
    op.create_index(op.f("ix_queue_events_node_at"), "queue_events", ["node", "at"])


def downgrade() -> None:
    op.drop_table("queue_events")
