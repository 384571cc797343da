"""Reading the ledger: Spark JDBC from SQLite and PostgreSQL, Parquet, URL mapping."""

from __future__ import annotations

from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.kit.ledger import needs_spark

needs_spark()  # before importing PySpark: skip (or fail under CI) without it

from tests.kit.ledger import insert_rows  # noqa: E402
from tests.pipeline.ledger_factory import START, Row  # noqa: E402
from xmpp_queue.pipeline.ledger_io import JdbcSource, jdbc_source, ledger_query, time_literal  # noqa: E402

pytestmark = pytest.mark.spark


# --- URL mapping (no Spark) ----------------------------------------------------------------


def test_sqlite_url_becomes_an_absolute_jdbc_url(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    source = jdbc_source("sqlite+aiosqlite:///data/xq.db")
    assert source == JdbcSource(url=f"jdbc:sqlite:{tmp_path}/data/xq.db", dialect="sqlite")
    assert source.options()["driver"] == "org.sqlite.JDBC"


def test_postgres_credentials_travel_as_properties_not_in_the_url() -> None:
    source = jdbc_source("postgresql+asyncpg://queue:s%40cret@db.example:6543/xq?ssl=require")
    assert source.url == "jdbc:postgresql://db.example:6543/xq"
    assert source.properties == {"user": "queue", "password": "s@cret", "sslmode": "require"}
    assert source.options()["fetchsize"] == "10000"
    assert jdbc_source("postgres://u@h/d").url == "jdbc:postgresql://h:5432/d"


def test_in_memory_sqlite_and_unknown_backends_are_refused() -> None:
    with pytest.raises(ValueError, match="database file"):
        jdbc_source("sqlite://")
    with pytest.raises(ValueError, match="mysql"):
        jdbc_source("mysql://u@h/d")


def test_the_time_range_is_part_of_the_sql_sent() -> None:
    since, until = START, START + timedelta(hours=1)
    sqlite = ledger_query(JdbcSource("jdbc:sqlite:/x", "sqlite"), since, until)
    assert sqlite.endswith(
        "WHERE at >= '2024-03-01 10:00:00.000000' AND at < '2024-03-01 11:00:00.000000'"
    )
    pg = ledger_query(JdbcSource("jdbc:postgresql://h/d", "postgresql"), since, None)
    assert pg.endswith("WHERE at >= '2024-03-01T10:00:00+00:00'")
    # A naive bound is UTC, never local time.
    assert time_literal("sqlite", since.replace(tzinfo=None)) == "'2024-03-01 10:00:00.000000'"


# --- JDBC reads ------------------------------------------------------------------------------


def _collect(frame: Any) -> list[tuple[Any, ...]]:
    rows = []
    for r in frame.orderBy("id").collect():
        rows.append(
            (
                r["id"],
                r["at"].astimezone(UTC),
                r["kind"],
                r["node"],
                r["item_id"],
                r["subscriber"],
                r["deliveries"],
                r["payload_size"],
                r["attributes"],
                r["reason"],
            )
        )
    return rows


def test_jdbc_reads_the_range_with_exact_utc_times(
    spark: Any, ledger_db_url: str, ledger_rows: list[Row]
) -> None:
    from xmpp_queue.pipeline.ledger_io import read_kind_counts_jdbc, read_ledger_jdbc

    insert_rows(ledger_db_url, ledger_rows)
    source = jdbc_source(ledger_db_url)
    since, until = START + timedelta(minutes=3), START + timedelta(minutes=9)
    frame = read_ledger_jdbc(spark, source, since, until)
    expected = [r.as_tuple() for r in ledger_rows if since <= r.at < until]
    assert 0 < len(expected) < len(ledger_rows)
    assert _collect(frame) == expected
    counts = {
        (r["node"], r["kind"]): r["n"]
        for r in read_kind_counts_jdbc(spark, source, since).collect()
    }
    expected_counts: dict[tuple[str, str], int] = {}
    for r in ledger_rows:
        if r.at < since:
            expected_counts[(r.node, r.kind)] = expected_counts.get((r.node, r.kind), 0) + 1
    assert counts == expected_counts


def test_a_large_jdbc_read_is_split_by_id_and_loses_nothing(
    spark: Any, sqlite_url: str, ledger_rows: list[Row]
) -> None:
    from xmpp_queue.pipeline.ledger_io import read_ledger_jdbc

    insert_rows(sqlite_url, ledger_rows)
    frame = read_ledger_jdbc(spark, jdbc_source(sqlite_url), rows_per_partition=100)
    assert frame.rdd.getNumPartitions() == -(-len(ledger_rows) // 100)
    assert _collect(frame) == [r.as_tuple() for r in ledger_rows]


# --- Parquet and combined sources ----------------------------------------------------------------


def test_parquet_archive_and_database_together_count_each_row_once(
    spark: Any, sqlite_url: str, ledger_rows: list[Row], tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    from xmpp_queue.pipeline.ledger_frame import LEDGER_SCHEMA
    from xmpp_queue.pipeline.ledger_io import load_ledger, write_parquet

    # Rows 1..200 archived, rows 150.. still in the database: an export that
    # stopped between writing Parquet and deleting leaves such an overlap.
    archived = [r for r in ledger_rows if r.id <= 200]
    insert_rows(sqlite_url, [r for r in ledger_rows if r.id >= 150])
    frame = spark.createDataFrame([r.as_tuple() for r in archived], LEDGER_SCHEMA)
    archive = str(tmp_path / "archive")
    write_parquet(frame.withColumn("date", F.date_format("at", "yyyy-MM-dd")), archive, ["date"])

    since = START + timedelta(minutes=2)
    selection = load_ledger(spark, sqlite_url, [archive], since, None)
    assert _collect(selection.events) == [r.as_tuple() for r in ledger_rows if r.at >= since]
    assert selection.opening_counts is not None
    opening = sum(r["n"] for r in selection.opening_counts.collect())
    assert opening == sum(1 for r in ledger_rows if r.at < since)
    assert selection.sources[1] == archive


# --- sources from before the detail columns (revision 0006) ------------------------------------


def _without_details(rows: list[Row]) -> list[tuple[Any, ...]]:
    return [(*r.as_tuple()[:-2], None, None) for r in rows]


def test_the_details_cross_jdbc_as_written(
    spark: Any, ledger_db_url: str, ledger_rows: list[Row]
) -> None:
    from xmpp_queue.pipeline.ledger_io import read_ledger_jdbc

    insert_rows(ledger_db_url, ledger_rows)
    got = _collect(read_ledger_jdbc(spark, jdbc_source(ledger_db_url)))
    assert any(g[8] for g in got) and any(g[9] for g in got), "the factory gives details"
    assert got == [r.as_tuple() for r in ledger_rows]


def test_a_database_not_yet_migrated_to_details_is_read_with_nulls(
    spark: Any, tmp_path: Path, ledger_rows: list[Row]
) -> None:
    """A service still on revision 0005 (the pipeline upgraded first): the rows read,
    with no attributes and no reason, instead of an unknown-column error."""
    import asyncio

    from xmpp_queue.pipeline.ledger_io import read_ledger_jdbc
    from xmpp_queue.storage.engine import make_engine
    from xmpp_queue.storage.migrations import upgrade
    from xmpp_queue.storage.schema import ledger

    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, "0005_ordering_key")

    async def insert() -> None:
        engine = make_engine(url)
        try:
            async with engine.begin() as conn:
                rows = [
                    {k: v for k, v in r.as_dict().items() if k not in ("attributes", "reason")}
                    for r in ledger_rows
                ]
                await conn.execute(ledger.insert(), rows)
        finally:
            await engine.dispose()

    asyncio.run(insert())
    frame = read_ledger_jdbc(spark, jdbc_source(url))
    assert _collect(frame) == _without_details(ledger_rows)


def test_an_archive_exported_before_the_details_is_read_with_nulls(
    spark: Any, ledger_rows: list[Row], tmp_path: Path
) -> None:
    """One archive whose older files have the eight original columns and whose newer
    files (the same day) have the details: every row reads, the old ones NULL,
    the new ones with their details, whichever file Spark looks at first."""
    from pyspark.sql import functions as F

    from xmpp_queue.pipeline.ledger_frame import LEDGER_SCHEMA
    from xmpp_queue.pipeline.ledger_io import read_ledger_parquet, write_parquet

    old, new = ledger_rows[:100], ledger_rows[100:]
    archive = str(tmp_path / "archive")

    def export(rows: list[Row], mode: str, details: bool) -> None:
        frame = spark.createDataFrame([r.as_tuple() for r in rows], LEDGER_SCHEMA)
        if not details:
            frame = frame.drop("attributes", "reason")
        dated = frame.withColumn("date", F.date_format("at", "yyyy-MM-dd"))
        write_parquet(dated, archive, ["date"], mode=mode)

    export(old, "overwrite", details=False)
    assert _collect(read_ledger_parquet(spark, [archive])) == _without_details(old)
    export(new, "append", details=True)
    got = _collect(read_ledger_parquet(spark, [archive]))
    assert got == _without_details(old) + [r.as_tuple() for r in new]
