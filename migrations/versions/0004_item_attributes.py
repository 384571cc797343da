"""Item attributes: a priority level and an expiry time per item.

Revision ID: 0004_item_attributes
Revises: 0003_leader_lease
Create Date: 2026-11-25

``priority`` is the item's urgency (0 low, 1 medium, 2 high); every existing
item is medium, as it was dispatched before. ``expires_at`` is when a waiting
item stops being offered (NULL: never). The publisher's attributes themselves
live in the existing ``headers`` column; a delayed item uses ``available_at``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_item_attributes"
down_revision: str | Sequence[str] | None = "0003_leader_lease"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("items") as batch:
        batch.add_column(
            sa.Column("priority", sa.SmallInteger(), nullable=False, server_default="1")
        )
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("items") as batch:
        batch.drop_column("expires_at")
        batch.drop_column("priority")
