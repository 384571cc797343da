"""Node placement: which shard (component domain) serves each node.

Revision ID: 0008_node_placement
Revises: 0007_retention
Create Date: 2026-11-25

``node_placement``: one row per node of a sharded deployment (several component
domains on one PostgreSQL, docs/scaling.md). ``shard`` is the component domain
that serves the node; a node is on exactly one shard (the primary key). The
directory on the public name writes a row when it places a new node (a claim:
the node may not exist yet); a shard writes the rows of the nodes it creates
(dead-letter nodes too) in the commit that creates them and deletes them with
the node. ``epoch`` counts the node's placements (a later move between shards
raises it under the old shard's fence); ``partition_of`` names the logical
queue a partition node belongs to (partitioned queues, not built yet). No
foreign key to ``nodes``: a claim comes before its node. An unsharded
deployment leaves the table empty.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_node_placement"
down_revision: str | Sequence[str] | None = "0007_retention"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UTC_TIME = sa.DateTime(timezone=True)  # a revision keeps its own copy of the type


def upgrade() -> None:
    op.create_table(
        "node_placement",
        sa.Column("node_id", sa.String(), nullable=False),
        sa.Column("shard", sa.String(), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False, server_default="1"),
        sa.Column("placed_at", UTC_TIME, nullable=False),
        sa.Column("partition_of", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("node_id", name=op.f("pk_node_placement")),
    )
    op.create_index(op.f("ix_node_placement_shard"), "node_placement", ["shard"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_node_placement_shard"), table_name="node_placement")
    op.drop_table("node_placement")
