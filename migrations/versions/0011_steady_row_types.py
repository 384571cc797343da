"""Row types for PostgreSQL's steady commit: one array of rows per part, not per column.

Revision ID: 0011_steady_row_types
Revises: 0010_commit_marks
Create Date: 2026-11-28

A steady-state commit on PostgreSQL is one statement whose data-modifying parts
read their rows from arrays. It bound one array per column (49 of them); these
composite types let each part bind one array of rows instead (``unnest($1::
steady_item[])``). asyncpg then checks each row once, where it checked every
value of every column array, about a third of the client's CPU per commit; the
server binds four parameters instead of 49. Each type lists the
columns the statement writes, in the order the store's code sends them, with the
columns' own types. A migration that adds a column to ``items`` or
``queue_events`` that the steady commit writes alters the matching type too
(``tests/storage/test_pg_steady.py`` compares them). SQLite has no such types and
needs none.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0011_steady_row_types"
down_revision: str | Sequence[str] | None = "0010_commit_marks"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A revision keeps its own copy of the definitions.
_ITEM = (
    "publisher varchar, payload_size integer, published_at timestamptz,"
    " updated_at timestamptz, locked_by varchar, lock_jid varchar, locked_at timestamptz,"
    " lock_expires_at timestamptz, available_at timestamptz, deliveries integer,"
    " headers text, priority smallint, expires_at timestamptz, ordering_key varchar,"
    " acked_at timestamptz"
)
TYPES = {
    "steady_key": "node_id varchar, item_id varchar",
    "steady_item": (
        "seq bigint, node_id varchar, item_id varchar, publisher varchar, payload text,"
        " payload_size integer, published_at timestamptz, updated_at timestamptz,"
        " locked_by varchar, lock_jid varchar, locked_at timestamptz,"
        " lock_expires_at timestamptz, available_at timestamptz, deliveries integer,"
        " headers text, priority smallint, expires_at timestamptz, ordering_key varchar,"
        " acked_at timestamptz"
    ),
    "steady_cold": f"{_ITEM}, node_id varchar, item_id varchar",
    "steady_event": (
        "at timestamptz, kind varchar, node varchar, item_id varchar, subscriber varchar,"
        " deliveries integer, payload_size integer, attributes text, reason text"
    ),
}


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name, attributes in TYPES.items():
            op.execute(f"CREATE TYPE {name} AS ({attributes})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name in TYPES:
            op.execute(f"DROP TYPE {name}")
