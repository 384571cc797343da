"""``pipeline export-ledger``: move old ledger rows to date-partitioned Parquet.

Why it is built as a small journal: the rows leave the database, so a crash at
any point must neither lose a row nor archive it twice. Each run goes through
states recorded in a manifest (``_runs/<run>.json``, replaced atomically):

1. Spark writes the rows older than the cut-off to ``_staging/<run>/`` (no
   manifest yet: a crash here leaves only a staging folder, removed next time).
2. ``staged``: the manifest lists the staged files and the exported ids as
   ranges of consecutive ids, computed from the staged Parquet itself (so the
   delete matches what is on disk, not what a second read would return).
3. Each file is renamed into ``date=YYYY-MM-DD/`` (a same-filesystem rename is
   atomic; the run id in its name makes the step repeatable), then
   ``published``.
4. The id ranges are deleted in one database transaction, then ``deleted``.

Every run first finishes the runs a crash left behind (moves the remaining
files, deletes their ranges; both steps are idempotent), so a re-run never
reads rows that are already archived: nothing is lost or doubled. Spark skips
paths starting with ``_``, so readers of the archive never see staging files.
The archive must be on a filesystem the driver can rename in (local disk, or a
shared mount on a cluster).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from xmpp_queue.ledger_names import AT, ID
from xmpp_queue.pipeline.ledger_db import delete_id_ranges
from xmpp_queue.pipeline.ledger_frame import as_utc
from xmpp_queue.pipeline.ledger_io import DATE_PARTITION, JdbcSource, read_ledger_jdbc

RUNS = "_runs"
STAGING = "_staging"
STAGED, PUBLISHED, DELETED = "staged", "published", "deleted"

PhaseHook = Callable[[str], None]
"""Called after each step with its name; tests raise from it to simulate a crash."""


class ExportError(RuntimeError):
    """The archive is not in a state this job can continue from (named in the message)."""


@dataclass(frozen=True, slots=True)
class ExportResult:
    run_id: str | None
    rows: int
    deleted: int
    dates: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)


def export_ledger(
    spark: SparkSession,
    source: JdbcSource,
    database_url: str,
    out_dir: str,
    cutoff: datetime,
    on_phase: PhaseHook | None = None,
) -> ExportResult:
    """Archive and delete the ledger rows with ``at < cutoff``; see the module doc."""
    hook = on_phase or (lambda _phase: None)
    os.makedirs(os.path.join(out_dir, RUNS), exist_ok=True)
    with _exclusive(out_dir):
        recovered = _finish_interrupted(out_dir, database_url, hook)
        run_id = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
        staging = os.path.join(out_dir, STAGING, run_id)
        rows = read_ledger_jdbc(spark, source, until=cutoff)
        _stage(rows, staging)
        hook("written")
        manifest = _describe_staging(spark, staging, run_id, cutoff)
        if manifest is None:
            shutil.rmtree(staging, ignore_errors=True)
            return ExportResult(run_id=None, rows=0, deleted=0, recovered=recovered)
        _write_manifest(out_dir, manifest)
        hook(STAGED)
        deleted = _complete(out_dir, manifest, database_url, hook)
        return ExportResult(
            run_id=run_id,
            rows=manifest["rows"],
            deleted=deleted,
            dates=sorted({_date_of(f) for f in manifest["files"]}),
            recovered=recovered,
        )


# --- steps --------------------------------------------------------------------------------


def _stage(rows: DataFrame, staging: str) -> None:
    dated = rows.withColumn(DATE_PARTITION, F.date_format(F.col(AT), "yyyy-MM-dd"))
    dated.write.mode("errorifexists").partitionBy(DATE_PARTITION).parquet(staging)


def _staged_files(staging: str) -> list[str]:
    files = []
    for folder, _dirs, names in os.walk(staging):
        for name in names:
            if name.endswith(".parquet"):
                files.append(os.path.relpath(os.path.join(folder, name), staging))
    return sorted(files)


def _describe_staging(
    spark: SparkSession, staging: str, run_id: str, cutoff: datetime
) -> dict[str, Any] | None:
    """The manifest of a complete staging folder, or None when it holds no rows."""
    if not os.path.exists(os.path.join(staging, "_SUCCESS")):
        raise ExportError(f"staging {staging} is incomplete")
    files = _staged_files(staging)
    if not files:
        return None
    ranges = id_ranges(spark.read.parquet(staging).select(ID))
    if not ranges:
        return None
    return {
        "run": run_id,
        "cutoff": as_utc(cutoff).isoformat(),
        "state": STAGED,
        "rows": sum(high - low + 1 for low, high in ranges),
        "min_id": ranges[0][0],
        "max_id": ranges[-1][1],
        "id_ranges": ranges,
        "files": files,
        "deleted_rows": None,
    }


def id_ranges(ids: DataFrame) -> list[list[int]]:
    """Runs of consecutive ids in *ids* as inclusive [low, high] pairs, ascending.

    ``id - row_number`` is constant along a run of consecutive ids (the classic
    gaps-and-islands trick), so grouping by it yields the runs; ids are few runs
    in practice since every row older than the cut-off is exported.
    """
    order = Window.orderBy(ID)
    islands = (
        ids.select(ID)
        .withColumn("_island", F.col(ID) - F.row_number().over(order))
        .groupBy("_island")
        .agg(F.min(ID).alias("lo"), F.max(ID).alias("hi"))
        .orderBy("lo")
        .collect()
    )
    return [[int(r["lo"]), int(r["hi"])] for r in islands]


def _complete(out_dir: str, manifest: dict[str, Any], database_url: str, hook: PhaseHook) -> int:
    """Publish and delete from whatever state the manifest is in; returns rows deleted."""
    if manifest["state"] == STAGED:
        _publish_files(out_dir, manifest, hook)
        manifest["state"] = PUBLISHED
        _write_manifest(out_dir, manifest)
        hook(PUBLISHED)
    deleted = 0
    if manifest["state"] == PUBLISHED:
        ranges = [(int(lo), int(hi)) for lo, hi in manifest["id_ranges"]]
        deleted = delete_id_ranges(database_url, ranges)
        hook("deleted-rows")
        manifest["state"] = DELETED
        manifest["deleted_rows"] = deleted
        _write_manifest(out_dir, manifest)
        hook(DELETED)
    shutil.rmtree(os.path.join(out_dir, STAGING, manifest["run"]), ignore_errors=True)
    return deleted


def _publish_files(out_dir: str, manifest: dict[str, Any], hook: PhaseHook) -> None:
    staging = os.path.join(out_dir, STAGING, manifest["run"])
    for relative in manifest["files"]:
        source = os.path.join(staging, relative)
        target = _archive_path(out_dir, manifest["run"], relative)
        if os.path.exists(source):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.replace(source, target)
            hook("file-published")
        elif not os.path.exists(target):
            raise ExportError(f"run {manifest['run']}: {relative} is neither staged nor archived")


def _archive_path(out_dir: str, run_id: str, relative: str) -> str:
    folder, name = os.path.split(relative)
    return os.path.join(out_dir, folder, f"{run_id}-{name}")


def _date_of(relative: str) -> str:
    folder = os.path.dirname(relative)
    return folder.split("=", 1)[1] if "=" in folder else folder


def _finish_interrupted(out_dir: str, database_url: str, hook: PhaseHook) -> list[str]:
    """Complete every run a crash left half done; drop staging nobody recorded."""
    finished = []
    recorded = set()
    for manifest in read_manifests(out_dir):
        recorded.add(manifest["run"])
        if manifest["state"] != DELETED:
            _complete(out_dir, manifest, database_url, hook)
            finished.append(manifest["run"])
    staging_root = os.path.join(out_dir, STAGING)
    if os.path.isdir(staging_root):
        for run_id in os.listdir(staging_root):
            if run_id not in recorded:
                shutil.rmtree(os.path.join(staging_root, run_id), ignore_errors=True)
    return finished


# --- manifest files ---------------------------------------------------------------------------


def read_manifests(out_dir: str) -> list[dict[str, Any]]:
    """Every run's manifest, oldest first."""
    folder = os.path.join(out_dir, RUNS)
    if not os.path.isdir(folder):
        return []
    manifests = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                manifests.append(json.load(handle))
    return manifests


def _write_manifest(out_dir: str, manifest: dict[str, Any]) -> None:
    path = os.path.join(out_dir, RUNS, f"{manifest['run']}.json")
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


@contextmanager
def _exclusive(out_dir: str) -> Iterator[None]:
    """One export per archive at a time; the OS drops the lock if the process dies."""
    with open(os.path.join(out_dir, RUNS, ".lock"), "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise ExportError(f"another export-ledger is running on {out_dir}") from exc
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
