"""The database schema: SQLAlchemy 2 typed tables, the single source for alembic.

Only alembic revisions in ``migrations/`` change a live database; these models
are what autogenerate compares against (``tests/storage/test_migrations.py``
checks that the revisions and the models agree). The SQL backends
(``sql_statements.py``) compile their statements from these tables once; nothing
uses the ORM unit of work.

Choices worth knowing:

- A naming convention on the metadata makes constraint and index names the same
  on SQLite and PostgreSQL, so a later revision can drop them by name.
- Every timestamp is :class:`UtcDateTime`: stored as UTC, returned as an aware
  UTC datetime on both dialects (SQLite keeps no time zone; its values are
  fixed-width UTC strings, so SQL comparisons on them stay correct).
- ``items.seq`` is a surrogate autoincrement key: publish order, strictly
  increasing and never reused (``AUTOINCREMENT`` on SQLite), which is what
  dispatch orders by. ``subscriptions.id`` does the same for creation order
  (dispatch's round-robin order), with (node_id, subid) unique.
- A node's configuration is one JSON text column: new config fields need no
  migration, and a stored config missing a field gets the field's default.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from xmpp_queue import ledger_names as L

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite makes only an ``INTEGER PRIMARY KEY`` column an alias of the rowid
# (autoincrementing); ``BIGINT PRIMARY KEY`` would not be. PostgreSQL gets BIGINT.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every dialect.

    Binds refuse naive datetimes (a naive value is a bug: the core's clock is
    aware UTC) and convert aware ones to UTC; results come back aware UTC
    (SQLite returns naive values, PostgreSQL the session's zone).
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: storage needs aware UTC datetimes")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UtcDateTime()}


class NodeRow(Base):
    """A pubsub node; ``config`` is the NodeConfig as JSON (see ``sql.encode_config``)."""

    __tablename__ = "nodes"

    node_id: Mapped[str] = mapped_column(String(), primary_key=True)
    config: Mapped[str] = mapped_column(Text)
    creator: Mapped[str] = mapped_column(String(), default="")
    created_at: Mapped[datetime]


class AffiliationRow(Base):
    """A bare JID's affiliation with a node (rows with ``none`` are not stored)."""

    __tablename__ = "affiliations"

    node_id: Mapped[str] = mapped_column(
        String(), ForeignKey("nodes.node_id", ondelete="CASCADE"), primary_key=True
    )
    jid: Mapped[str] = mapped_column(String(), primary_key=True, index=True)
    affiliation: Mapped[str] = mapped_column(String())


class SubscriptionRow(Base):
    """A subscription; ``id`` gives creation order, ``options`` is JSON (field -> values)."""

    __tablename__ = "subscriptions"
    __table_args__ = (UniqueConstraint("node_id", "subid"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    node_id: Mapped[str] = mapped_column(String(), ForeignKey("nodes.node_id", ondelete="CASCADE"))
    subid: Mapped[str] = mapped_column(String())
    jid: Mapped[str] = mapped_column(String(), index=True)
    state: Mapped[str] = mapped_column(String())
    queue_requests: Mapped[int | None]
    options: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    last_activity: Mapped[datetime | None]


class ItemRow(Base):
    """A stored item with its queue state.

    Memory answers the queue's questions, so the indexes serve the loads, the reads
    of cold rows and the readers: (node_id, seq) paging, trimming and cold tails, the
    unique key reads by id. Deadlines (lock timeouts, retry delays) live in memory and
    have no index: each index here is paid by every insert. No index holds a lock
    column, so PostgreSQL writes a lock in place, touching no index (migration
    ``0012_locks_in_place``).
    """

    __tablename__ = "items"
    __table_args__ = (
        UniqueConstraint("node_id", "item_id"),
        Index(None, "node_id", "seq"),
        {"sqlite_autoincrement": True},
    )

    seq: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    node_id: Mapped[str] = mapped_column(String(), ForeignKey("nodes.node_id", ondelete="CASCADE"))
    item_id: Mapped[str] = mapped_column(String())
    publisher: Mapped[str] = mapped_column(String(), default="")
    payload: Mapped[str | None] = mapped_column(Text)
    payload_size: Mapped[int] = mapped_column(Integer, default=0)
    published_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    locked_by: Mapped[str | None] = mapped_column(String())
    lock_jid: Mapped[str | None] = mapped_column(String())
    locked_at: Mapped[datetime | None]
    lock_expires_at: Mapped[datetime | None]
    available_at: Mapped[datetime | None]
    deliveries: Mapped[int] = mapped_column(Integer, default=0)
    headers: Mapped[str | None] = mapped_column(Text)
    priority: Mapped[int] = mapped_column(SmallInteger, default=1, server_default="1")
    expires_at: Mapped[datetime | None]
    ordering_key: Mapped[str | None] = mapped_column(String())
    # Set on a retained item: acked, kept for a seek (pubsub#queue_retain_acked).
    acked_at: Mapped[datetime | None]


class SnapshotRow(Base):
    """A queue's named snapshot: seek back to it later (docs/queueing.md)."""

    __tablename__ = "queue_snapshots"

    node_id: Mapped[str] = mapped_column(
        String(), ForeignKey("nodes.node_id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(), primary_key=True)
    created_at: Mapped[datetime]
    mark_seq: Mapped[int] = mapped_column(BigInteger)


class LedgerRow(Base):
    """One queue event (``xmpp_queue/ledger_names.py`` names it for the pipeline too).

    No foreign key to nodes: the history outlives the nodes it describes.
    """

    __tablename__ = L.TABLE
    __table_args__ = (
        Index(None, L.NODE, L.AT),
        # Rows arrive in time order, so on PostgreSQL a block-range index answers the
        # pipeline's time ranges at almost no cost per appended row (a B-tree took an
        # insert per event, three per queue item).
        Index(None, L.AT, postgresql_using="brin"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(L.ID, BigId, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(L.AT)
    kind: Mapped[str] = mapped_column(L.KIND, String())
    node: Mapped[str] = mapped_column(L.NODE, String())
    item_id: Mapped[str] = mapped_column(L.ITEM_ID, String())
    subscriber: Mapped[str | None] = mapped_column(L.SUBSCRIBER, String())
    deliveries: Mapped[int] = mapped_column(L.DELIVERIES, Integer, default=0)
    payload_size: Mapped[int] = mapped_column(L.PAYLOAD_SIZE, Integer, default=0)
    attributes: Mapped[str | None] = mapped_column(L.ATTRIBUTES, Text())
    reason: Mapped[str | None] = mapped_column(L.REASON, Text())


class LeaseRow(Base):
    """Who is the active process of a component, and the fencing token of its term.

    One row per component JID. ``token`` grows by one with every new holder;
    every commit of the holder checks it in the same transaction, so a process
    that lost its lease can never commit again. ``backend_pid`` is the holder's
    database session: when it is gone (the process died), a standby need not
    wait for ``expires_at``.
    """

    __tablename__ = "leader_leases"

    name: Mapped[str] = mapped_column(String(), primary_key=True)
    holder: Mapped[str] = mapped_column(String(), default="")
    backend_pid: Mapped[int | None] = mapped_column(Integer)
    token: Mapped[int] = mapped_column(BigInteger, default=0)
    acquired_at: Mapped[datetime | None]
    expires_at: Mapped[datetime | None]
    last_commit_at: Mapped[datetime | None]


class CommitMarkRow(Base):
    """The serial number of a writing process's last steady-state PostgreSQL commit.

    That commit is one statement sent without ``BEGIN`` and ``COMMIT``; when the
    connection dies before its answer arrives, this row says whether it happened
    (``backend_postgres``). One row per writing process (lease name or ``store``,
    then a random id); SQLite never writes it.
    """

    __tablename__ = "commit_marks"

    writer: Mapped[str] = mapped_column(String(), primary_key=True)
    serial: Mapped[int] = mapped_column(BigInteger)
    at: Mapped[datetime]


class MemberRow(Base):
    """Every running process of a component, active or standing by, for ``status``."""

    __tablename__ = "service_members"

    name: Mapped[str] = mapped_column(String(), primary_key=True)
    holder: Mapped[str] = mapped_column(String(), primary_key=True)
    role: Mapped[str] = mapped_column(String())
    since: Mapped[datetime]
    seen_at: Mapped[datetime]


class PlacementRow(Base):
    """Which shard (component domain) serves a node, in a sharded deployment.

    Written by the directory when it places a new node (before the node exists)
    and by the shard in the commit that creates or deletes the node. ``epoch``
    and ``partition_of`` are there for moves and partitioned queues
    (docs/scaling.md, not built yet).
    """

    __tablename__ = "node_placement"

    node_id: Mapped[str] = mapped_column(String(), primary_key=True)
    shard: Mapped[str] = mapped_column(String(), index=True)
    epoch: Mapped[int] = mapped_column(BigInteger, default=1, server_default="1")
    placed_at: Mapped[datetime]
    partition_of: Mapped[str | None] = mapped_column(String())


metadata = Base.metadata

nodes = cast(Table, NodeRow.__table__)
affiliations = cast(Table, AffiliationRow.__table__)
subscriptions = cast(Table, SubscriptionRow.__table__)
items = cast(Table, ItemRow.__table__)
ledger = cast(Table, LedgerRow.__table__)
leases = cast(Table, LeaseRow.__table__)
members = cast(Table, MemberRow.__table__)
snapshots = cast(Table, SnapshotRow.__table__)
placements = cast(Table, PlacementRow.__table__)
commit_marks = cast(Table, CommitMarkRow.__table__)
