"""export-ledger: old rows move to Parquet; a crash at any step loses and doubles nothing."""

from __future__ import annotations

import os
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.kit.ledger import needs_spark

needs_spark()  # before importing PySpark: skip (or fail under CI) without it

from tests.kit.ledger import insert_rows, ledger_ids  # noqa: E402
from tests.pipeline.ledger_factory import START, Row, simulate_ledger  # noqa: E402
from xmpp_queue.pipeline.export import ExportError, export_ledger, read_manifests  # noqa: E402
from xmpp_queue.pipeline.ledger_io import jdbc_source  # noqa: E402

pytestmark = pytest.mark.spark

CUTOFF = START + timedelta(minutes=7)


class Crash(Exception):
    """Stands for the process dying at a given step."""


def crash_at(phase: str, after: int = 1) -> Any:
    seen = Counter[str]()

    def hook(name: str) -> None:
        seen[name] += 1
        if name == phase and seen[name] == after:
            raise Crash(phase)

    return hook


def archived_rows(spark: Any, out: Path) -> list[tuple[Any, ...]]:
    from xmpp_queue.pipeline.ledger_io import read_ledger_parquet

    if not any(p.name.startswith("date=") for p in out.iterdir()):
        return []
    frame = read_ledger_parquet(spark, [str(out)])
    return [(r["id"], r["node"], r["item_id"], r["kind"]) for r in frame.collect()]


def check_exactly_once(spark: Any, url: str, out: Path, rows: list[Row], cutoff: Any) -> None:
    archived = archived_rows(spark, out)
    ids = [a[0] for a in archived]
    assert len(ids) == len(set(ids)), "a row was archived twice"
    old = {r.id: (r.id, r.node, r.item_id, r.kind) for r in rows if r.at < cutoff}
    assert sorted(archived) == sorted(old.values()), "archive differs from the old rows"
    assert ledger_ids(url) == sorted(r.id for r in rows if r.at >= cutoff)


def test_export_moves_old_rows_into_date_partitions(
    spark: Any, ledger_db_url: str, tmp_path: Path
) -> None:
    # Two days of history, so the archive has two date partitions.
    rows = simulate_ledger(seed=3, items=30, start=START - timedelta(days=1))
    rows += [
        Row(
            len(rows) + r.id,
            r.at,
            r.kind,
            r.node,
            r.item_id,
            r.subscriber,
            r.deliveries,
            r.payload_size,
        )
        for r in simulate_ledger(seed=4, items=30)
    ]
    insert_rows(ledger_db_url, rows)
    out = tmp_path / "archive"
    result = export_ledger(spark, jdbc_source(ledger_db_url), ledger_db_url, str(out), CUTOFF)

    old = [r for r in rows if r.at < CUTOFF]
    assert result.rows == result.deleted == len(old)
    assert result.dates == sorted({f"{r.at:%Y-%m-%d}" for r in old}) and len(result.dates) == 2
    check_exactly_once(spark, ledger_db_url, out, rows, CUTOFF)
    for day in result.dates:
        files = os.listdir(out / f"date={day}")
        assert files and all(f.startswith(result.run_id or "?") for f in files)
    (manifest,) = read_manifests(str(out))
    assert manifest["state"] == "deleted" and manifest["deleted_rows"] == len(old)
    assert not os.listdir(out / "_staging")

    # A later run with a later cut-off adds the newer rows, and only those.
    later = START + timedelta(minutes=12)
    again = export_ledger(spark, jdbc_source(ledger_db_url), ledger_db_url, str(out), later)
    assert again.rows == sum(1 for r in rows if CUTOFF <= r.at < later)
    check_exactly_once(spark, ledger_db_url, out, rows, later)
    nothing = export_ledger(spark, jdbc_source(ledger_db_url), ledger_db_url, str(out), later)
    assert (nothing.run_id, nothing.rows) == (None, 0)


def check_nothing_lost_or_doubled(spark: Any, url: str, out: Path, rows: list[Row]) -> None:
    """At any moment: every row is in the database or the archive, never twice in
    the archive (it may be in both until its deletion commits)."""
    archived = [a[0] for a in archived_rows(spark, out)]
    assert len(archived) == len(set(archived)), "a row was archived twice"
    assert set(archived) | set(ledger_ids(url)) == {r.id for r in rows}, "a row was lost"


def test_crashes_at_every_step_then_a_clean_run_archive_each_row_once(
    spark: Any, sqlite_url: str, ledger_rows: list[Row], tmp_path: Path
) -> None:
    """Each run dies at a later step; the next one first finishes what the
    previous left (and may die while doing so), as a real restart would."""
    insert_rows(sqlite_url, ledger_rows)
    out = tmp_path / "archive"
    source = jdbc_source(sqlite_url)
    crashes = [
        ("written", 1),  # staged by Spark, no manifest yet: discarded next time
        ("staged", 1),  # manifest written, nothing moved
        ("file-published", 1),  # (recovering) one file moved, the others still staged
        ("published", 1),  # (recovering) all moved, database untouched
        ("deleted-rows", 1),  # (recovering) rows deleted, manifest not yet updated
    ]
    for phase, after in crashes:
        with pytest.raises(Crash, match=phase):
            export_ledger(spark, source, sqlite_url, str(out), CUTOFF, crash_at(phase, after))
        check_nothing_lost_or_doubled(spark, sqlite_url, out, ledger_rows)

    result = export_ledger(spark, source, sqlite_url, str(out), CUTOFF)
    assert len(result.recovered) == 1 and result.run_id is None
    check_exactly_once(spark, sqlite_url, out, ledger_rows, CUTOFF)
    (manifest,) = read_manifests(str(out))
    assert manifest["state"] == "deleted"
    assert manifest["rows"] == sum(1 for r in ledger_rows if r.at < CUTOFF)
    assert manifest["deleted_rows"] == 0  # the crashed run had deleted them already
    assert not os.listdir(out / "_staging")


@pytest.mark.postgres
def test_a_crash_in_the_first_run_before_deleting_is_finished_by_the_next(
    spark: Any, pg_ledger_url: str, ledger_rows: list[Row], tmp_path: Path
) -> None:
    """The same recovery on PostgreSQL: archived but not deleted, then re-run."""
    insert_rows(pg_ledger_url, ledger_rows)
    out = tmp_path / "archive"
    source = jdbc_source(pg_ledger_url)
    with pytest.raises(Crash):
        export_ledger(spark, source, pg_ledger_url, str(out), CUTOFF, crash_at("published"))
    check_nothing_lost_or_doubled(spark, pg_ledger_url, out, ledger_rows)
    result = export_ledger(spark, source, pg_ledger_url, str(out), CUTOFF)
    assert len(result.recovered) == 1
    check_exactly_once(spark, pg_ledger_url, out, ledger_rows, CUTOFF)


def test_a_write_killed_half_way_leaves_nothing_behind(
    spark: Any, sqlite_url: str, ledger_rows: list[Row], tmp_path: Path
) -> None:
    """A Spark write killed half way: staging files without _SUCCESS nor manifest."""
    insert_rows(sqlite_url, ledger_rows)
    out = tmp_path / "archive"
    partial = out / "_staging" / "20240101T000000Z-dead" / "date=2024-03-01"
    partial.mkdir(parents=True)
    (partial / "part-00000-x.c000.snappy.parquet").write_bytes(b"PAR1 truncated")
    result = export_ledger(spark, jdbc_source(sqlite_url), sqlite_url, str(out), CUTOFF)
    assert result.rows == sum(1 for r in ledger_rows if r.at < CUTOFF)
    check_exactly_once(spark, sqlite_url, out, ledger_rows, CUTOFF)
    assert os.listdir(out / "_staging") == []


def test_a_second_export_refuses_to_run_alongside(
    spark: Any, sqlite_url: str, tmp_path: Path
) -> None:
    import fcntl

    out = tmp_path / "archive"
    (out / "_runs").mkdir(parents=True)
    with open(out / "_runs" / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(ExportError, match="another export-ledger"):
            export_ledger(spark, jdbc_source(sqlite_url), sqlite_url, str(out), CUTOFF)


def test_id_ranges_are_runs_of_consecutive_ids(spark: Any) -> None:
    from xmpp_queue.pipeline.export import id_ranges

    ids = [1, 2, 3, 7, 9, 10, 11, 12, 20]
    frame = spark.createDataFrame([(i,) for i in ids], "id long")
    assert id_ranges(frame) == [[1, 3], [7, 7], [9, 12], [20, 20]]
