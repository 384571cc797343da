"""Fixtures of the Spark pipeline tests: one local SparkSession, migrated ledgers.

One session-scoped ``local[2]`` SparkSession serves every test (starting the
JVM costs seconds), with two shuffle partitions, no UI, no code generation
and the driver on 127.0.0.1. Ledger databases are migrated with the real alembic ``upgrade()``
and filled with plain SQLAlchemy inserts through the storage schema, so they
hold exactly what the service would store (SQLite: UTC text timestamps).
PostgreSQL: one ledger database of the session's own, created on the server
``XMPP_QUEUE_TEST_PG_URL`` names, migrated once, its ledger emptied before each
test and dropped at the end (``tests/kit/pg.py``); skipped with the reason when
the variable is unset, a failure under ``CI``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit import pg
from tests.kit.ledger import (
    _clear_ledger,
    needs_spark,
)
from tests.pipeline.ledger_factory import Row, simulate_ledger


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    needs_spark()
    from xmpp_queue.pipeline.session import build_spark_session

    session = build_spark_session(
        master="local[2]",
        app_name="xmpp-queue tests",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            # On a few hundred rows, compiling generated code costs more than it
            # saves, and adaptive re-planning only adds stages.
            "spark.sql.codegen.wholeStage": "false",
            "spark.sql.codegen.factoryMode": "NO_CODEGEN",
            "spark.sql.adaptive.enabled": "false",
            # A short-lived JVM: the quick JIT tier only, and the simplest collector.
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def ledger_rows() -> list[Row]:
    return simulate_ledger(seed=7, items=60)


@pytest.fixture(scope="session")
def ledger_frame(spark: Any, ledger_rows: list[Row]) -> Any:
    from xmpp_queue.pipeline.ledger_frame import LEDGER_SCHEMA

    frame = spark.createDataFrame([r.as_tuple() for r in ledger_rows], LEDGER_SCHEMA)
    return frame.cache()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from xmpp_queue.storage.migrations import upgrade

    path = tmp_path_factory.mktemp("ledger-template") / "template.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    """A fresh migrated SQLite database (a copy of the session's template)."""
    path = tmp_path / "service.db"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture(scope="session")
def pg_ledger_database() -> Iterator[str]:
    """The session's own migrated PostgreSQL database (dropped at the end)."""
    with pg.migrated("ledger") as url:
        yield url


@pytest.fixture
def pg_ledger_url(pg_ledger_database: str) -> str:
    """The session's PostgreSQL ledger database, migrated, with an empty ledger."""
    _clear_ledger(pg_ledger_database)
    return pg_ledger_database


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def ledger_db_url(request: pytest.FixtureRequest) -> str:
    """A migrated, empty ledger on each backend."""
    name = "sqlite_url" if request.param == "sqlite" else "pg_ledger_url"
    return str(request.getfixturevalue(name))
