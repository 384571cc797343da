"""Event details: the publisher's attributes and the reasons, on ledger rows.

Revision ID: 0006_event_details
Revises: 0005_ordering_key
Create Date: 2026-11-25

Two nullable text columns on ``queue_events`` (names copied from
``xmpp_queue/ledger_names.py`` as it is now; a revision must not change when
that module does): ``attributes``, the JSON object of a published item's
attributes (the service's own headers left out), and ``reason``, why an item
was unlocked, expired, dead-lettered or dropped. Rows written before this
revision keep NULL in both: their details were never recorded, and the
report counts them without a reason.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_event_details"
down_revision: str | Sequence[str] | None = "0005_ordering_key"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("queue_events") as batch:
        batch.add_column(sa.Column("attributes", sa.Text(), nullable=True))
        batch.add_column(sa.Column("reason", sa.Text(), nullable=True))


def downgrade() -> None:
    # SQLite drops a column by copying the table: keep AUTOINCREMENT on the copy,
    # since ids are the pipeline's export cursor and must never be reused.
    with op.batch_alter_table("queue_events", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("reason")
        batch.drop_column("attributes")
