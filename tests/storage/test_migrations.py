"""Migrations: upgrade an empty database to head, and the result equals the models.

Runs on SQLite (a temporary file) and PostgreSQL (a database the test creates on
the server ``XMPP_QUEUE_TEST_PG_URL`` names, and drops after it: ``pg_database``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from tests.kit.pg import in_thread
from xmpp_queue import ledger_names
from xmpp_queue.storage import migrations, schema
from xmpp_queue.storage.engine import make_engine


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def empty_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'empty.db'}"
    url: str = request.getfixturevalue("pg_database")
    return url


def _inspect(url: str, fn: Any) -> Any:
    async def run() -> Any:
        engine = make_engine(url)
        try:
            async with engine.connect() as conn:
                return await conn.run_sync(fn)
        finally:
            await engine.dispose()

    return in_thread(run())


def _model_diff(conn: Connection) -> list[Any]:
    context = MigrationContext.configure(conn, opts={"compare_type": True})
    return list(compare_metadata(context, schema.metadata))


def _tables(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names())


def test_upgrade_head_on_an_empty_database_matches_the_models(empty_db: str) -> None:
    assert migrations.current_revision(empty_db) is None
    assert migrations.is_up_to_date(empty_db) is False

    migrations.upgrade(empty_db)

    assert migrations.current_revision(empty_db) == migrations.head_revision()
    assert migrations.is_up_to_date(empty_db) is True
    assert _inspect(empty_db, _model_diff) == []


def _index_columns(conn: Connection) -> dict[str, list[list[str]]]:
    found = inspect(conn)
    return {
        table: sorted(
            [str(c) for c in ix["column_names"]]
            for ix in found.get_indexes(table)
            if not ix.get("unique")
        )
        for table in ("items", ledger_names.TABLE)
    }


def _ledger_time_index(conn: Connection) -> str:
    from sqlalchemy import text

    row = conn.execute(
        text("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_queue_events_at'")
    ).one()
    return str(row[0])


def test_each_item_index_serves_a_query_and_no_deadline_index_is_left(empty_db: str) -> None:
    """Every index of ``items`` is paid by each insert (and by a lock, where one of its
    columns changes): three are left (seq, the item key, node order), none on a
    deadline nor on the lock."""
    migrations.upgrade(empty_db)
    indexes = _inspect(empty_db, _index_columns)
    assert indexes["items"] == [["node_id", "seq"]]
    # (and the primary key, seq, and the unique key, node_id and item_id)
    assert indexes[ledger_names.TABLE] == [["at"], ["node", "at"]]
    if empty_db.startswith("postgresql"):
        assert "USING brin" in _inspect(empty_db, _ledger_time_index)
    migrations.downgrade(empty_db, "0011_steady_row_types")
    before = _inspect(empty_db, _index_columns)
    assert before["items"] == [["node_id", "locked_by", "seq"], ["node_id", "seq"]]
    migrations.downgrade(empty_db, "0008_node_placement")
    again = _inspect(empty_db, _index_columns)
    assert ["lock_expires_at"] in again["items"] and ["available_at"] in again["items"]
    if empty_db.startswith("postgresql"):
        assert "USING btree" in _inspect(empty_db, _ledger_time_index)


def test_revisions_step_by_step_and_back_down(empty_db: str) -> None:
    migrations.upgrade(empty_db, "0001_initial")
    assert migrations.current_revision(empty_db) == "0001_initial"
    assert migrations.is_up_to_date(empty_db) is False
    assert ledger_names.TABLE not in _inspect(empty_db, _tables)

    migrations.upgrade(empty_db)
    assert ledger_names.TABLE in _inspect(empty_db, _tables)

    migrations.downgrade(empty_db, "base")
    assert migrations.current_revision(empty_db) is None
    assert _inspect(empty_db, _tables) <= {"alembic_version"}


def test_locks_in_place_is_the_revision_at_head() -> None:
    assert migrations.head_revision() == "0012_locks_in_place"


async def test_migrations_run_from_inside_a_running_event_loop(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'in-loop.db'}"
    migrations.upgrade(url)  # the sync API, called from a coroutine
    assert migrations.is_up_to_date(url)
    assert await migrations.is_up_to_date_async(url)
    other = f"sqlite:///{tmp_path / 'async.db'}"
    await migrations.upgrade_async(other)
    assert await migrations.current_revision_async(other) == migrations.head_revision()


def test_migrations_dir_is_found_from_the_source_tree_or_the_override(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = migrations.migrations_dir()
    assert (found / "env.py").is_file() and (found / "versions" / "0001_initial.py").is_file()

    copy = tmp_path / "packaged"
    shutil.copytree(found, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("XMPP_QUEUE_MIGRATIONS", str(copy))
    assert migrations.migrations_dir() == copy


def test_a_failing_revision_leaves_nothing_behind(
    empty_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each revision is one transaction, on SQLite too (transactional DDL)."""
    scripts = tmp_path / "scripts"
    shutil.copytree(
        migrations.migrations_dir(), scripts, ignore=shutil.ignore_patterns("__pycache__")
    )
    (scripts / "versions" / "0099_broken.py").write_text(
        '"""A revision that fails half-way."""\n'
        "import sqlalchemy as sa\n"
        "from alembic import op\n\n"
        'revision = "0099_broken"\n'
        'down_revision = "0012_locks_in_place"\n'
        "branch_labels = None\n"
        "depends_on = None\n\n\n"
        "def upgrade() -> None:\n"
        '    op.create_table("half_done", sa.Column("id", sa.Integer(), primary_key=True))\n'
        '    op.execute("SELECT * FROM no_such_table")\n\n\n'
        "def downgrade() -> None:\n"
        "    pass\n"
    )
    monkeypatch.setenv("XMPP_QUEUE_MIGRATIONS", str(scripts))
    with pytest.raises(Exception, match="no_such_table"):
        migrations.upgrade(empty_db)
    assert migrations.current_revision(empty_db) == "0012_locks_in_place"
    tables = _inspect(empty_db, _tables)
    assert "half_done" not in tables and ledger_names.TABLE in tables


def _write_rows(url: str, rows: list[str]) -> None:
    """Run *rows* (SQL statements) in one transaction on the database at *url*: the
    data an older revision's deployment left, for an upgrade test to carry over."""
    from sqlalchemy import text

    def write(conn: Connection) -> None:
        for sql in rows:
            conn.execute(text(sql))

    async def fill() -> None:
        engine = make_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(write)
        finally:
            await engine.dispose()

    in_thread(fill())


def test_upgrading_to_item_attributes_keeps_items_locks_and_dead_letters(empty_db: str) -> None:
    """Rows written under 0003 (a waiting item, a locked one with its deadline, a dead
    letter with headers) load unchanged after the upgrade, as medium items that
    never expire."""

    from xmpp_queue.storage.store import StateStore

    migrations.upgrade(empty_db, "0003_leader_lease")
    config = '{"queue": true}'
    rows = [
        "INSERT INTO nodes (node_id, config, creator, created_at) VALUES "
        f"('jobs', '{config}', 'o@x', '2026-01-01 12:00:00+00:00'), "
        "('jobs/dead-letter', '{}', '', '2026-01-01 12:00:00+00:00')",
        "INSERT INTO subscriptions (node_id, subid, jid, state, queue_requests, created_at)"
        " VALUES ('jobs', 's1', 'w@x/r', 'subscribed', 2, '2026-01-01 12:00:00+00:00')",
        "INSERT INTO items (node_id, item_id, publisher, payload, payload_size, published_at,"
        " updated_at, deliveries) VALUES ('jobs', 'waiting', 'p@x', '<a/>', 4,"
        " '2026-01-01 12:00:00+00:00', '2026-01-01 12:00:00+00:00', 0)",
        "INSERT INTO items (node_id, item_id, publisher, payload, payload_size, published_at,"
        " updated_at, locked_by, lock_jid, locked_at, lock_expires_at, deliveries) VALUES"
        " ('jobs', 'held', 'p@x', '<b/>', 4, '2026-01-01 12:00:01+00:00',"
        " '2026-01-01 12:00:01+00:00', 's1', 'w@x/r', '2026-01-01 12:00:01+00:00',"
        " '2026-01-01 12:05:01+00:00', 1)",
        "INSERT INTO items (node_id, item_id, publisher, payload, payload_size, published_at,"
        " updated_at, deliveries, headers) VALUES ('jobs/dead-letter', 'dead', 'p@x', '<c/>',"
        " 4, '2026-01-01 12:00:02+00:00', '2026-01-01 12:00:02+00:00', 0,"
        """ '{"reason":"max-deliveries","origin-node":"jobs"}')""",
    ]

    _write_rows(empty_db, rows)
    migrations.upgrade(empty_db)

    async def read() -> dict[str, Any]:
        store = await StateStore.open(empty_db)
        try:
            async with store.transaction() as tx:
                found = {i.item_id: i for i in await tx.items.locked("jobs")}
                found |= {i.item_id: i for i in await tx.items.next_ready("jobs", _NOW, 10)}
                found |= {i.item_id: i for i in await tx.items.latest("jobs/dead-letter", 10)}
                return found
        finally:
            await store.close()

    items = in_thread(read())
    assert set(items) == {"waiting", "held", "dead"}
    assert items["held"].locked_by == "s1" and items["held"].lock_expires_at is not None
    assert items["dead"].headers["reason"] == "max-deliveries"
    assert items["waiting"].payload == "<a/>"
    assert {i.priority for i in items.values()} == {1}
    assert {i.expires_at for i in items.values()} == {None}


def test_upgrading_to_ordering_key_keeps_items_unordered(empty_db: str) -> None:
    """Rows written under 0004 (one carrying an ``ordering-key`` header, one
    locked) load after the upgrade with no ordering key: they stay as they were."""

    from xmpp_queue.storage.store import StateStore

    migrations.upgrade(empty_db, "0004_item_attributes")
    rows = [
        "INSERT INTO nodes (node_id, config, creator, created_at) VALUES "
        """('jobs', '{"queue": true}', 'o@x', '2026-01-01 12:00:00+00:00')""",
        "INSERT INTO subscriptions (node_id, subid, jid, state, queue_requests, created_at)"
        " VALUES ('jobs', 's1', 'w@x/r', 'subscribed', 2, '2026-01-01 12:00:00+00:00')",
        "INSERT INTO items (node_id, item_id, publisher, payload, payload_size, published_at,"
        " updated_at, deliveries, headers, priority) VALUES ('jobs', 'keyed', 'p@x', '<a/>', 4,"
        " '2026-01-01 12:00:00+00:00', '2026-01-01 12:00:00+00:00', 0,"
        """ '{"ordering-key":"A"}', 2)""",
        "INSERT INTO items (node_id, item_id, publisher, payload, payload_size, published_at,"
        " updated_at, locked_by, lock_jid, locked_at, lock_expires_at, deliveries) VALUES"
        " ('jobs', 'held', 'p@x', '<b/>', 4, '2026-01-01 12:00:01+00:00',"
        " '2026-01-01 12:00:01+00:00', 's1', 'w@x/r', '2026-01-01 12:00:01+00:00',"
        " '2026-01-01 12:05:01+00:00', 1)",
    ]

    _write_rows(empty_db, rows)
    migrations.upgrade(empty_db)
    assert migrations.current_revision(empty_db) == migrations.head_revision()

    async def read() -> dict[str, Any]:
        store = await StateStore.open(empty_db)
        try:
            async with store.transaction() as tx:
                found = {i.item_id: i for i in await tx.items.locked("jobs")}
                found |= {i.item_id: i for i in await tx.items.next_ready("jobs", _NOW, 10)}
                node = await tx.nodes.get("jobs")
                assert node is not None and not node.config.queue_ordered
                return found
        finally:
            await store.close()

    items = in_thread(read())
    assert set(items) == {"keyed", "held"}
    assert {i.ordering_key for i in items.values()} == {None}
    assert items["keyed"].headers == {"ordering-key": "A"} and items["keyed"].priority == 2
    assert items["held"].locked_by == "s1"


def test_upgrading_to_event_details_keeps_ledger_rows_without_details(empty_db: str) -> None:
    """Ledger rows written under 0005 read back unchanged after the upgrade, with
    no attributes and no reason; a row appended after it keeps both, and the id
    sequence goes on where it was (ids are the export cursor)."""
    from sqlalchemy import text

    from xmpp_queue.core.ledger import EventKind, LedgerEvent
    from xmpp_queue.storage.store import StateStore

    migrations.upgrade(empty_db, "0005_ordering_key")
    rows = [
        "INSERT INTO queue_events (at, kind, node, item_id, subscriber, deliveries,"
        " payload_size) VALUES ('2026-01-01 12:00:00+00:00', 'published', 'jobs', 'a',"
        " NULL, 0, 4)",
        "INSERT INTO queue_events (at, kind, node, item_id, subscriber, deliveries,"
        " payload_size) VALUES ('2026-01-01 12:00:01+00:00', 'unlocked', 'jobs', 'a',"
        " 'w@x/r', 1, 4)",
    ]

    _write_rows(empty_db, rows)
    migrations.upgrade(empty_db)
    assert migrations.current_revision(empty_db) == migrations.head_revision()
    later = LedgerEvent(
        _NOW, EventKind.DEAD_LETTERED, "jobs", "a", "w@x/r", 2, 4, None, "max-deliveries"
    )

    async def read() -> list[LedgerEvent]:
        store = await StateStore.open(empty_db)
        try:
            async with store.transaction() as tx:
                tx.ledger.append(later)
                await tx.commit()
            async with store.transaction() as tx:
                return await tx.ledger.events("jobs")
        finally:
            await store.close()

    events = in_thread(read())
    assert [(e.kind, e.subscriber, e.deliveries) for e in events[:2]] == [
        (EventKind.PUBLISHED, None, 0),
        (EventKind.UNLOCKED, "w@x/r", 1),
    ]
    assert {(e.attributes, e.reason) for e in events[:2]} == {(None, None)}
    assert events[2] == later

    def ids(conn: Connection) -> list[int]:
        return [int(r[0]) for r in conn.execute(text("SELECT id FROM queue_events ORDER BY id"))]

    assert _inspect(empty_db, ids) == [1, 2, 3]


_NOW = __import__("datetime").datetime(2026, 1, 1, 13, tzinfo=__import__("datetime").UTC)


def test_upgrading_to_retention_keeps_items_waiting_and_locked(empty_db: str) -> None:
    """Rows written under 0006 (a waiting item, a locked one) load after the
    upgrade as queue items (``acked_at`` NULL: nothing is taken for retained),
    with no snapshots; a downgrade to 0006 drops the column and the table."""

    from xmpp_queue.storage.store import StateStore

    migrations.upgrade(empty_db, "0006_event_details")
    rows = [
        "INSERT INTO nodes (node_id, config, creator, created_at) VALUES "
        """('jobs', '{"queue": true, "queue_retain_acked": 60}', 'o@x',"""
        " '2026-01-01 12:00:00+00:00')",
        "INSERT INTO subscriptions (node_id, subid, jid, state, queue_requests, created_at)"
        " VALUES ('jobs', 's1', 'w@x/r', 'subscribed', 2, '2026-01-01 12:00:00+00:00')",
        "INSERT INTO items (node_id, item_id, publisher, payload, payload_size, published_at,"
        " updated_at, deliveries, priority) VALUES ('jobs', 'waiting', 'p@x', '<a/>', 4,"
        " '2026-01-01 12:00:00+00:00', '2026-01-01 12:00:00+00:00', 0, 1)",
        "INSERT INTO items (node_id, item_id, publisher, payload, payload_size, published_at,"
        " updated_at, locked_by, lock_jid, locked_at, lock_expires_at, deliveries, priority)"
        " VALUES ('jobs', 'held', 'p@x', '<b/>', 4, '2026-01-01 12:00:01+00:00',"
        " '2026-01-01 12:00:01+00:00', 's1', 'w@x/r', '2026-01-01 12:00:01+00:00',"
        " '2026-01-01 12:05:01+00:00', 1, 1)",
    ]

    _write_rows(empty_db, rows)
    migrations.upgrade(empty_db)
    assert migrations.current_revision(empty_db) == migrations.head_revision()

    async def read() -> tuple[dict[str, Any], int, list[Any]]:
        store = await StateStore.open(empty_db)
        try:
            async with store.transaction() as tx:
                found = {i.item_id: i for i in await tx.items.locked("jobs")}
                found |= {i.item_id: i for i in await tx.items.next_ready("jobs", _NOW, 10)}
                retained = await tx.items.retained_count("jobs")
                return found, retained, await tx.nodes.snapshots("jobs")
        finally:
            await store.close()

    items, retained, snapshots = in_thread(read())
    assert set(items) == {"waiting", "held"} and retained == 0 and snapshots == []
    assert {i.acked_at for i in items.values()} == {None}
    assert items["held"].locked_by == "s1" and items["waiting"].payload == "<a/>"

    migrations.downgrade(empty_db, "0006_event_details")
    assert "queue_snapshots" not in _inspect(empty_db, _tables)
    columns = _inspect(empty_db, lambda c: {x["name"] for x in inspect(c).get_columns("items")})
    assert "acked_at" not in columns and "ordering_key" in columns
