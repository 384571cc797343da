"""Progress of a long Spark step: read from Spark's status tracker, shown with rich."""

from __future__ import annotations

import io
import time
from typing import Any

import pytest
from rich.console import Console

from xmpp_queue.pipeline.progress import spark_progress, stage_tasks

pytestmark = pytest.mark.spark


def _slow(rows: Any) -> Any:
    time.sleep(0.4)  # each task takes a while, so the tracker sees them running
    return [sum(1 for _ in rows)]


def test_a_running_job_shows_its_tasks_done_out_of_their_total(spark: Any) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    rdd = spark.sparkContext.parallelize(range(400), 8)
    with spark_progress(spark, "publishing to jobs", console=console):
        counts = rdd.mapPartitions(_slow).collect()
    assert sum(counts) == 400
    shown = out.getvalue()
    assert "publishing to jobs" in shown and "/8 tasks" in shown, shown[-500:]


def test_nothing_is_shown_off_a_terminal(spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    with spark_progress(spark, "quiet", enabled=False):
        spark.sparkContext.parallelize(range(10), 2).count()
    assert "quiet" not in capsys.readouterr().err
    assert stage_tasks(spark.sparkContext.statusTracker()) == (0, 0)  # nothing running now
