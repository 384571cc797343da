"""Commit marks: how a PostgreSQL commit whose answer was lost is looked up.

Revision ID: 0010_commit_marks
Revises: 0009_lean_item_indexes
Create Date: 2026-11-28

``commit_marks``: one row per writing process (``writer``: the lease's name, or
``store``, and a random id of the process's store). A steady-state commit on
PostgreSQL is a single statement sent without ``BEGIN`` or ``COMMIT`` (one round
trip); that statement also sets its writer's row to the commit's serial
number. When the connection dies before the statement's answer arrives, the
process waits until the dead session has ended and reads its row: the serial
it sent means the commit happened, an older one that it did not. A writer's row
is deleted when its store closes; rows a crashed process left behind are
deleted a day after their last commit. SQLite never writes the table (its
commits are local and cannot lose their answer).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_commit_marks"
down_revision: str | Sequence[str] | None = "0009_lean_item_indexes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UTC_TIME = sa.DateTime(timezone=True)  # a revision keeps its own copy of the type


def upgrade() -> None:
    op.create_table(
        "commit_marks",
        sa.Column("writer", sa.String(), nullable=False),
        sa.Column("serial", sa.BigInteger(), nullable=False),
        sa.Column("at", UTC_TIME, nullable=False),
        sa.PrimaryKeyConstraint("writer", name=op.f("pk_commit_marks")),
    )


def downgrade() -> None:
    op.drop_table("commit_marks")
