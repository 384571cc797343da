"""Leader lease and members: one active process per component, standbys waiting.

Revision ID: 0003_leader_lease
Revises: 0002_event_ledger
Create Date: 2026-11-24

``leader_leases``: who holds the component (one row per component JID), its
term's fencing token (checked by every commit of the holder), its database
session and when the lease runs out. ``service_members``: every running process
of a component and its role, for ``xmpp-queue status``. Only PostgreSQL
deployments use them (SQLite runs one process, guarded by a file lock); they
exist on both so one schema serves both.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_leader_lease"
down_revision: str | Sequence[str] | None = "0002_event_ledger"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "leader_leases",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("holder", sa.String(), nullable=False),
        sa.Column("backend_pid", sa.Integer(), nullable=True),
        sa.Column("token", sa.BigInteger(), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_commit_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_leader_leases")),
    )
    op.create_table(
        "service_members",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("holder", sa.String(), nullable=False),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", "holder", name=op.f("pk_service_members")),
    )


def downgrade() -> None:
    op.drop_table("service_members")
    op.drop_table("leader_leases")
