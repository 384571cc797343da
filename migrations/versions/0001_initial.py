"""Initial schema: nodes, affiliations, subscriptions, items.

Revision ID: 0001_initial
Revises:
Create Date: 2026-01-01

Types are spelled out here rather than imported from ``schema.py``: a revision
must keep describing the schema as it was when written, whatever the models
become later.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001_initial"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# SQLite autoincrements only an INTEGER PRIMARY KEY; PostgreSQL gets BIGINT.
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
UTC_TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "nodes",
        sa.Column("node_id", sa.String(), nullable=False),
        sa.Column("config", sa.Text(), nullable=False),
        sa.Column("creator", sa.String(), nullable=False),
        sa.Column("created_at", UTC_TIME, nullable=False),
        sa.PrimaryKeyConstraint("node_id", name=op.f("pk_nodes")),
    )
    op.create_table(
        "affiliations",
        sa.Column("node_id", sa.String(), nullable=False),
        sa.Column("jid", sa.String(), nullable=False),
        sa.Column("affiliation", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(
            ["node_id"],
            ["nodes.node_id"],
            name=op.f("fk_affiliations_node_id_nodes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("node_id", "jid", name=op.f("pk_affiliations")),
    )
    op.create_index(op.f("ix_affiliations_jid"), "affiliations", ["jid"])
    op.create_table(
        "subscriptions",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("node_id", sa.String(), nullable=False),
        sa.Column("subid", sa.String(), nullable=False),
        sa.Column("jid", sa.String(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("queue_requests", sa.Integer(), nullable=True),
        sa.Column("options", sa.Text(), nullable=True),
        sa.Column("created_at", UTC_TIME, nullable=False),
        sa.Column("last_activity", UTC_TIME, nullable=True),
        sa.ForeignKeyConstraint(
            ["node_id"],
            ["nodes.node_id"],
            name=op.f("fk_subscriptions_node_id_nodes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subscriptions")),
        sa.UniqueConstraint("node_id", "subid", name=op.f("uq_subscriptions_node_id_subid")),
    )
    op.create_index(op.f("ix_subscriptions_jid"), "subscriptions", ["jid"])
    op.create_table(
        "items",
        sa.Column("seq", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("node_id", sa.String(), nullable=False),
        sa.Column("item_id", sa.String(), nullable=False),
        sa.Column("publisher", sa.String(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=True),
        sa.Column("payload_size", sa.Integer(), nullable=False),
        sa.Column("published_at", UTC_TIME, nullable=False),
        sa.Column("updated_at", UTC_TIME, nullable=False),
        sa.Column("locked_by", sa.String(), nullable=True),
        sa.Column("lock_jid", sa.String(), nullable=True),
        sa.Column("locked_at", UTC_TIME, nullable=True),
        sa.Column("lock_expires_at", UTC_TIME, nullable=True),
        sa.Column("available_at", UTC_TIME, nullable=True),
        sa.Column("deliveries", sa.Integer(), nullable=False),
        sa.Column("headers", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["node_id"],
            ["nodes.node_id"],
            name=op.f("fk_items_node_id_nodes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_items")),
        sa.UniqueConstraint("node_id", "item_id", name=op.f("uq_items_node_id_item_id")),
        # seq is publish order and must never be reused (SQLite's AUTOINCREMENT).
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_items_node_id_seq"), "items", ["node_id", "seq"])
    op.create_index(
        op.f("ix_items_node_id_locked_by_seq"), "items", ["node_id", "locked_by", "seq"]
    )
    op.create_index(op.f("ix_items_lock_expires_at"), "items", ["lock_expires_at"])
    op.create_index(op.f("ix_items_available_at"), "items", ["available_at"])


def downgrade() -> None:
    op.drop_table("items")
    op.drop_table("subscriptions")
    op.drop_table("affiliations")
    op.drop_table("nodes")
