"""The one place a SparkSession is made, and where the JDBC driver jars are found.

Why one function: every job (and the test suite's shared session) must agree on
the settings that change results or safety: UTC as the session time zone (the
ledger is UTC and buckets/dates must not move with the machine's zone), the
driver bound to 127.0.0.1 in local mode (nothing listens on public interfaces),
no UI unless asked, and the Python that runs the workers being this one.

Why the environment and not only ``spark.pyspark.python``: that setting is read
by ``spark-submit``; a session built from a running Python (``xmpp-queue
pipeline``, a notebook) starts its Python workers with ``PYSPARK_PYTHON`` from
the JVM's environment, else the first ``python3`` on PATH. Run from an
unactivated venv (pipx, systemd, cron, a full path to the console script) that
is another Python without slixmpp, and every task fails with
``ModuleNotFoundError``. So the JVM is started with ``PYSPARK_PYTHON`` set to
this interpreter, unless the user set it (on a cluster it names the executors'
Python).
"""

from __future__ import annotations

import glob
import logging
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JAR_DIRS = ("/usr/share/java",)
"""Where Debian's libpostgresql-jdbc-java and libxerial-sqlite-jdbc-java put their jars."""

_JAR_PATTERNS = {
    # Unversioned symlinks first: they follow package upgrades.
    "postgresql": ("postgresql.jar", "postgresql-[0-9]*.jar"),
    "sqlite": ("sqlite-jdbc.jar", "xerial-sqlite-jdbc.jar", "*sqlite-jdbc-[0-9]*.jar"),
}


def find_jdbc_jars(dirs: Iterable[str] = JAR_DIRS) -> list[str]:
    """The PostgreSQL and SQLite JDBC jars found in *dirs* (at most one of each)."""
    found: list[str] = []
    for patterns in _JAR_PATTERNS.values():
        jar = _first_match(dirs, patterns)
        if jar is not None:
            found.append(jar)
    return found


def _first_match(dirs: Iterable[str], patterns: Sequence[str]) -> str | None:
    for directory in dirs:
        for pattern in patterns:
            matches = sorted(glob.glob(os.path.join(directory, pattern)))
            if matches:
                return os.path.realpath(matches[-1])
    return None


def _worker_python_path() -> str:
    import xmpp_queue

    root = os.path.dirname(os.path.dirname(os.path.abspath(xmpp_queue.__file__)))
    inherited = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join(p for p in (root, inherited) if p)


def worker_python() -> str:
    """The Python for Spark's workers: ``PYSPARK_PYTHON`` if the user set it, else
    the interpreter running this code (the one that has xmpp_queue and slixmpp)."""
    return os.environ.get("PYSPARK_PYTHON") or sys.executable


def spark_is_running() -> bool:
    """Whether this process already has a SparkContext (in any thread)."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def build_spark_session(
    master: str = "local[*]",
    app_name: str = "xmpp-queue",
    jars: Sequence[str] = (),
    conf: Mapping[str, str] | None = None,
    find_jars: bool = True,
) -> SparkSession:
    """Create (or return the running) SparkSession for the pipeline.

    *jars* are added to the JDBC jars found automatically (unless *find_jars* is
    false). *conf* entries win over the defaults set here, so a cluster user can
    still set anything (``--spark-conf spark.ui.enabled=true``).
    """
    from pyspark.sql import SparkSession

    all_jars = list(dict.fromkeys([*(find_jdbc_jars() if find_jars else []), *jars]))
    python = worker_python()
    # Read by the JVM that PySpark launches next (and inherited by its workers).
    os.environ["PYSPARK_PYTHON"] = python
    settings: dict[str, str] = {
        "spark.sql.session.timeZone": "UTC",
        # Archives are read by other tools too: standard microsecond timestamps, not INT96.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.pyspark.python": python,
        "spark.pyspark.driver.python": sys.executable,
        # Arrow is optional (pyarrow is not a dependency): plain pickled Python.
        "spark.sql.execution.pythonUDF.arrow.enabled": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "false",
        # Python workers import xmpp_queue (enqueue publishes from them): let them
        # find it even when it runs from a checkout rather than an installed package.
        "spark.executorEnv.PYTHONPATH": _worker_python_path(),
    }
    if is_local_master(master):
        settings.update(
            {
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
                # Local data is small next to 200 shuffle partitions; AQE coalesces more.
                "spark.sql.shuffle.partitions": str(max(4, 2 * (os.cpu_count() or 1))),
            }
        )
    if all_jars:
        settings["spark.jars"] = ",".join(all_jars)
    settings.update(conf or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    # py4j logs every gateway connection at INFO: noise in an operator's log.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    spark.sparkContext.setLogLevel(settings.get("spark.log.level", "WARN"))
    _quiet_probe_warnings(spark)
    return spark


def _quiet_probe_warnings(spark: Any) -> None:
    """A missing or unreadable input path makes Spark's metadata probe log a whole
    Java stack at WARN before the real error, which the command reports in one line
    (``input_errors.py``): that probe's warnings go."""
    try:
        jvm = spark.sparkContext._jvm
        level = jvm.org.apache.logging.log4j.Level.ERROR
        for name in (  # Spark 3 and Spark 4 (sinks.) names of the probe's logger
            "org.apache.spark.sql.execution.streaming.FileStreamSink",
            "org.apache.spark.sql.execution.streaming.sinks.FileStreamSink",
        ):
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
    except Exception:  # another logging backend: the warning stays, nothing breaks
        pass
