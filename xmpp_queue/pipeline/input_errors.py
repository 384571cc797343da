"""Input mistakes as one line (exit 2), not a Spark or Py4J traceback.

Why: a misspelt path, a column that is not in the file or an ``s3a://`` input
without its connector jars are the user's to fix, and Spark reports each as a
33-to-300-line Java stack. :func:`check_local_inputs` catches a missing local
path before Spark starts; :func:`input_error` turns what Spark raises for the
rest into a :class:`PipelineSettingsError` naming the input and the fix (the
command maps that error to exit 2). Anything else is left alone: a failure we
did not foresee keeps its traceback.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Sequence
from urllib.parse import urlparse

from xmpp_queue.pipeline.settings import PipelineSettingsError

S3A_PACKAGE = "org.apache.hadoop:hadoop-aws:{hadoop}"
"""The connector of ``s3a://`` (it brings the AWS SDK bundle it needs)."""

_SCHEME_HINTS = {
    "s3a": "s3a:// needs the hadoop-aws jar and the AWS SDK bundle of Spark's Hadoop version: "
    "--spark-conf spark.jars.packages=org.apache.hadoop:hadoop-aws:{hadoop} "
    "(docs/pipeline.md, 'Inputs on S3 and HDFS')",
    "s3": "use s3a:// (Hadoop's S3 connector), not s3://",
    "gs": "gs:// needs the GCS connector jar (gcs-connector-hadoop3) in --jars",
    "abfs": "abfs:// needs the hadoop-azure jar in --jars",
    "hdfs": "hdfs:// needs a reachable NameNode: check the host and port of the URL",
}


def check_local_inputs(inputs: Sequence[str], option: str = "--input") -> None:
    """Refuse a local input (of *option*) that matches nothing, before Spark starts."""
    for spec in inputs:
        scheme = urlparse(spec).scheme
        if scheme not in ("", "file") or len(scheme) == 1:  # a:\\ on Windows is local
            continue
        path = spec[len("file://") :] if scheme == "file" else spec
        if not glob.glob(path):
            raise PipelineSettingsError(f"{option} {spec!r}: no such file or directory")


def hadoop_version() -> str:
    """The Hadoop version inside the installed Spark (hadoop-aws must match it)."""
    try:
        import pyspark

        jars = glob.glob(f"{pyspark.__path__[0]}/jars/hadoop-client-api-*.jar")
    except ImportError:  # pragma: no cover - the pipeline needs pyspark anyway
        jars = []
    found = re.search(r"hadoop-client-api-([\d.]+)\.jar", jars[0]) if jars else None
    return found.group(1) if found else "<Spark's Hadoop version>"


def input_error(exc: BaseException, inputs: Sequence[str] = ()) -> PipelineSettingsError | None:
    """One line for an input mistake Spark raised, or None when *exc* is not one."""
    text = _message(exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    if type(exc) is ValueError:
        return PipelineSettingsError(first)  # ours: detect_format, prepare_items
    match = re.search(r'No FileSystem for scheme "?(\w+)"?', text) or re.search(
        r"fs\.(s3a)\.S3AFileSystem", text
    )
    if match:
        scheme = match.group(1).lower()
        hint = _SCHEME_HINTS.get(scheme, f"{scheme}:// needs its Hadoop connector jar in --jars")
        return PipelineSettingsError(
            f"cannot read {scheme}:// inputs: {hint.format(hadoop=hadoop_version())}"
        )
    for pattern, what in (
        (r"\[PATH_NOT_FOUND\] Path does not exist: (\S+)", "no such input: {0}"),
        (r"\[UNRESOLVED_COLUMN[^\]]*\] (.*?)(?:\.\s*SQLSTATE|$)", "unknown column: {0}"),
        (r"UnknownHostException: (\S+)", "unknown host in an input URL: {0}"),
        (r"AccessDeniedException: (.*)", "access denied reading the input: {0}"),
    ):
        found = re.search(pattern, text, re.MULTILINE)
        if found:
            return PipelineSettingsError(what.format(found.group(1).rstrip(".")))
    if type(exc).__name__ in ("AnalysisException", "IllegalArgumentException"):
        return PipelineSettingsError(f"cannot read {', '.join(inputs) or 'the input'}: {first}")
    return None


def _message(exc: BaseException) -> str:
    """The text of *exc*, a Py4J error's Java exception included."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            return f"{java.toString()}\n{exc}"
        except Exception:  # the JVM may be gone
            pass
    return str(exc)
