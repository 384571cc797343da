"""Reading and writing the ledger: Spark JDBC from the service database, Parquet.

Why here and nowhere else: the analytics are pure functions, so every contact
with a database or a file system sits in this module (and ``export.py`` for the
archive bookkeeping). The time range is part of the SQL Spark sends, so the
database filters rows before they cross the wire; SQLite returns the text that
SQLAlchemy stored, which ``conform_ledger`` parses as UTC.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from sqlalchemy.engine import make_url

from xmpp_queue.ledger_names import ALL_COLUMNS, AT, COLUMNS, DETAIL_COLUMNS, ID, KIND, NODE, TABLE
from xmpp_queue.pipeline.ledger_frame import as_utc, conform_ledger, in_time_range

Dialect = Literal["sqlite", "postgresql"]
DATE_PARTITION = "date"
"""Partition column of exported Parquet: the UTC day of ``at`` (yyyy-MM-dd)."""

ROWS_PER_READ_PARTITION = 500_000
"""Split a JDBC read into id ranges of about this many rows, read in parallel."""


@dataclass(frozen=True, slots=True)
class JdbcSource:
    """Where and how Spark reads the ledger: a JDBC URL plus driver properties."""

    url: str
    dialect: Dialect
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def driver(self) -> str:
        return {"sqlite": "org.sqlite.JDBC", "postgresql": "org.postgresql.Driver"}[self.dialect]

    def options(self) -> dict[str, str]:
        """Spark ``jdbc`` reader options (URL, driver, credentials, fetch size)."""
        opts = {"url": self.url, "driver": self.driver, **self.properties}
        if self.dialect == "postgresql":
            opts["fetchsize"] = "10000"  # stream rows instead of loading the whole result
        return opts


def jdbc_source(database_url: str) -> JdbcSource:
    """The JDBC equivalent of the service's SQLAlchemy URL.

    ``sqlite+aiosqlite:///var/xq.db`` -> ``jdbc:sqlite:/abs/var/xq.db``;
    ``postgresql+asyncpg://u:p@h:5432/db`` -> ``jdbc:postgresql://h:5432/db`` with
    user and password as properties (never in the URL, which Spark may log).
    """
    url = make_url(database_url)
    backend = {"postgres": "postgresql"}.get(url.get_backend_name(), url.get_backend_name())
    if backend == "sqlite":
        path = url.database or ""
        if path in ("", ":memory:") or path.startswith("file:"):
            raise ValueError("the pipeline needs a SQLite database file, not an in-memory one")
        return JdbcSource(url=f"jdbc:sqlite:{os.path.abspath(path)}", dialect="sqlite")
    if backend == "postgresql":
        host = url.host or "localhost"
        port = url.port or 5432
        props: dict[str, str] = {}
        if url.username:
            props["user"] = url.username
        if url.password:
            props["password"] = str(url.password)
        for key in ("sslmode", "ssl"):
            value = url.query.get(key)
            if isinstance(value, str):
                props["sslmode"] = "require" if value in ("true", "require") else value
        return JdbcSource(
            url=f"jdbc:postgresql://{host}:{port}/{url.database or ''}",
            dialect="postgresql",
            properties=props,
        )
    raise ValueError(f"no JDBC reader for database backend {backend!r}")


# --- SQL text ----------------------------------------------------------------------------


def time_literal(dialect: Dialect, moment: datetime) -> str:
    """*moment* as an SQL literal comparable with the stored ``at`` column.

    SQLite holds SQLAlchemy's text form (``YYYY-MM-DD HH:MM:SS.ffffff``, UTC),
    which compares correctly as text; PostgreSQL gets an explicit UTC offset.
    """
    utc = as_utc(moment)
    if dialect == "sqlite":
        return f"'{utc.strftime('%Y-%m-%d %H:%M:%S.%f')}'"
    return f"'{utc.isoformat()}'"


def where_clause(dialect: Dialect, since: datetime | None, until: datetime | None) -> str:
    conditions = []
    if since is not None:
        conditions.append(f"{AT} >= {time_literal(dialect, since)}")
    if until is not None:
        conditions.append(f"{AT} < {time_literal(dialect, until)}")
    return f" WHERE {' AND '.join(conditions)}" if conditions else ""


def ledger_query(
    source: JdbcSource,
    since: datetime | None,
    until: datetime | None,
    columns: Sequence[str] = ALL_COLUMNS,
) -> str:
    where = where_clause(source.dialect, since, until)
    return f"SELECT {', '.join(columns)} FROM {TABLE}{where}"


def ledger_columns(spark: SparkSession, source: JdbcSource) -> tuple[str, ...]:
    """The columns to select: every ledger has :data:`COLUMNS`; the detail columns
    only from revision 0006 on, so a database not migrated yet is still readable
    (``conform_ledger`` fills them with NULL). Asks the database for no rows."""
    present = {
        c.lower() for c in _jdbc_query(spark, source, f"SELECT * FROM {TABLE} WHERE 1 = 0").columns
    }
    return COLUMNS + tuple(c for c in DETAIL_COLUMNS if c in present)


# --- JDBC reads ---------------------------------------------------------------------------


def _custom_schema(source: JdbcSource) -> str | None:
    # SQLite declares DATETIME, which the driver reports as a DATE (dropping the
    # time); read the stored text instead and parse it in conform_ledger.
    return f"{ID} BIGINT, {AT} STRING" if source.dialect == "sqlite" else f"{ID} BIGINT"


def _jdbc_query(spark: SparkSession, source: JdbcSource, sql: str) -> DataFrame:
    return spark.read.format("jdbc").options(**source.options()).option("query", sql).load()


def read_ledger_jdbc(
    spark: SparkSession,
    source: JdbcSource,
    since: datetime | None = None,
    until: datetime | None = None,
    rows_per_partition: int = ROWS_PER_READ_PARTITION,
) -> DataFrame:
    """Ledger rows with ``since <= at < until``, read in parallel id ranges."""
    selection = ledger_query(source, since, until, ledger_columns(spark, source))
    # COALESCE: sqlite-jdbc fails on a NULL aggregate (MIN of no rows) read as a number.
    bounds = _jdbc_query(
        spark,
        source,
        f"SELECT COALESCE(MIN({ID}), 0) AS lo, COALESCE(MAX({ID}), 0) AS hi, "
        f"COUNT(*) AS n FROM ({selection}) s",
    ).collect()[0]
    reader = (
        spark.read.format("jdbc")
        .options(**source.options())
        .option("dbtable", f"({selection}) ledger_rows")
    )
    schema = _custom_schema(source)
    if schema:
        reader = reader.option("customSchema", schema)
    rows = int(bounds["n"] or 0)
    partitions = max(1, math.ceil(rows / rows_per_partition))
    if partitions > 1:
        reader = (
            reader.option("partitionColumn", ID)
            .option("lowerBound", str(int(bounds["lo"])))
            .option("upperBound", str(int(bounds["hi"]) + 1))
            .option("numPartitions", str(partitions))
        )
    return conform_ledger(reader.load())


def read_kind_counts_jdbc(spark: SparkSession, source: JdbcSource, before: datetime) -> DataFrame:
    """(node, kind, n) of rows older than *before*, aggregated by the database
    itself: the opening balance of a report's backlog without moving old rows."""
    sql = (
        f"SELECT {NODE}, {KIND}, COUNT(*) AS n FROM {TABLE}"
        f"{where_clause(source.dialect, None, before)} GROUP BY {NODE}, {KIND}"
    )
    frame = _jdbc_query(spark, source, sql)
    return frame.select(NODE, KIND, F.col("n").cast("long").alias("n"))


# --- a report's input ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LedgerSelection:
    """Rows in the range, plus (node, kind, n) of the rows before it (None
    without a start), and the names of the sources for the report."""

    events: DataFrame
    opening_counts: DataFrame | None
    sources: list[str]


def load_ledger(
    spark: SparkSession,
    database_url: str | None,
    parquet: Sequence[str],
    since: datetime | None,
    until: datetime | None,
) -> LedgerSelection:
    """The ledger from the database, exported Parquet, or both.

    Both together cover history that is partly archived; an export interrupted
    between writing and deleting leaves rows in both places, so the union is
    deduplicated on id. With the database alone the opening balance is counted
    by the database itself.
    """
    if not database_url and not parquet:
        raise ValueError("no ledger source: give a database URL or Parquet paths")
    frames, before, sources = [], [], []
    source = jdbc_source(database_url) if database_url else None
    if source is not None:
        frames.append(read_ledger_jdbc(spark, source, since, until))
        sources.append(source.url)
        if since is not None and parquet:
            before.append(read_ledger_jdbc(spark, source, None, since))
    if parquet:
        frames.append(read_ledger_parquet(spark, parquet, since, until))
        sources.extend(parquet)
        if since is not None:
            before.append(read_ledger_parquet(spark, parquet, None, since))
    events = _union_by_id(frames)
    opening: DataFrame | None = None
    if since is not None:
        if source is not None and not parquet:
            opening = read_kind_counts_jdbc(spark, source, since)
        else:
            earlier = _union_by_id(before)
            opening = earlier.groupBy(NODE, KIND).agg(F.count(F.lit(1)).alias("n"))
    return LedgerSelection(events=events, opening_counts=opening, sources=sources)


def _union_by_id(frames: Sequence[DataFrame]) -> DataFrame:
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union.dropDuplicates([ID]) if len(frames) > 1 else union


# --- Parquet -------------------------------------------------------------------------------


def read_ledger_parquet(
    spark: SparkSession,
    paths: Sequence[str],
    since: datetime | None = None,
    until: datetime | None = None,
) -> DataFrame:
    """Ledger rows from Parquet (exported archives or any file with the columns).

    On a ``date=`` partitioned archive the range also prunes whole days, so old
    days are never opened. Files written before the detail columns existed may
    sit beside newer ones (even in one day's directory): the schemas are merged,
    so neither the columns nor the old files' rows are lost.
    """
    frame = spark.read.option("mergeSchema", "true").parquet(*paths)
    if DATE_PARTITION in frame.columns:
        if since is not None:
            frame = frame.where(F.col(DATE_PARTITION) >= F.lit(_utc_day(since)))
        if until is not None:
            frame = frame.where(F.col(DATE_PARTITION) <= F.lit(_utc_day(until)))
    return in_time_range(conform_ledger(frame), since, until)


def _utc_day(moment: datetime) -> date:
    return as_utc(moment).astimezone(UTC).date()


def write_parquet(
    frame: DataFrame, path: str, partition_by: Sequence[str] = (), mode: str = "overwrite"
) -> None:
    writer = frame.write.mode(mode)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.parquet(path)
