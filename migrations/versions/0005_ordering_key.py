"""Ordering keys: the key that groups an item with others of the same key.

Revision ID: 0005_ordering_key
Revises: 0004_item_attributes
Create Date: 2026-11-25

``ordering_key`` is the publisher's ``ordering-key`` attribute, kept as a
column so a restart rebuilds an ordered queue's per-key index from the rows
alone. Existing items get NULL (unordered): no node could be ordered before
this revision, and ordering can only be switched on while a queue is empty.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_ordering_key"
down_revision: str | Sequence[str] | None = "0004_item_attributes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("items") as batch:
        batch.add_column(sa.Column("ordering_key", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("items") as batch:
        batch.drop_column("ordering_key")
