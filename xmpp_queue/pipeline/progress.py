"""Progress of long Spark steps on the terminal (rich), read from Spark's status tracker.

Why: an enqueue of millions of rows or a report over months of ledger runs for
minutes; silence looks like a hang. The driver polls ``statusTracker()`` twice a
second and shows the tasks of the active stages done out of their total (a
partition each: publishing one partition is one task), with the elapsed time.
Shown only on a terminal (standard error), so logs and pipes stay clean.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

POLL_SECONDS = 0.5


def stage_tasks(tracker: Any) -> tuple[int, int]:
    """(completed, total) tasks over the active stages of *tracker*."""
    done = total = 0
    for stage_id in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            done += info.numCompletedTasks
            total += info.numTasks
    return done, total


@contextmanager
def spark_progress(
    spark: Any, description: str, *, console: Any = None, enabled: bool | None = None
) -> Iterator[None]:
    """Show *description* with the running Spark tasks while the block runs."""
    if enabled is None:
        enabled = console is not None or sys.stderr.isatty()
    if not enabled:
        yield
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    tracker = spark.sparkContext.statusTracker()
    stop = threading.Event()
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tasks"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console or Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=None)

        def poll() -> None:
            while not stop.wait(POLL_SECONDS):
                done, total = stage_tasks(tracker)
                bar.update(task, completed=done, total=total or None)

        watcher = threading.Thread(target=poll, name="spark-progress", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            stop.set()
            watcher.join()
