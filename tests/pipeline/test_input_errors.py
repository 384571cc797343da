"""Input mistakes end in one line and exit 2, not a Spark traceback (issue 24):
a misspelt path, a column that is not in the input, ``s3a://`` without its jars.
The command runs as a user runs it (a subprocess of ``python -m xmpp_queue``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.kit.ledger import needs_spark

needs_spark()

from xmpp_queue.pipeline.input_errors import input_error  # noqa: E402
from xmpp_queue.pipeline.settings import PipelineSettingsError  # noqa: E402

pytestmark = [pytest.mark.spark]
REPO = Path(__file__).resolve().parents[2]
CONFIG = """
[component]
jid = "queue.example.org"
secret = "s3cret"

[pipeline]
publisher_jid = "loader@example.org"
publisher_password = "pw"
service_jid = "queue.example.org"
"""


def run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "config.toml"
    config.write_text(CONFIG, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "xmpp_queue", "pipeline", *argv, "-c", str(config)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "\tat " not in result.stderr, result.stderr
    return result.stderr.strip().splitlines()[-1]


def test_a_misspelt_enqueue_input_is_one_line_before_anything_connects(tmp_path: Path) -> None:
    result = run(tmp_path, "enqueue", "--node", "jobs", "--input", "jobz.csv")
    assert one_line_error(result) == "xmpp-queue: --input 'jobz.csv': no such file or directory"


def test_a_misspelt_report_archive_is_one_line(tmp_path: Path) -> None:
    result = run(tmp_path, "report", "--out", "r", "--parquet", "archive/nope")
    assert "--parquet 'archive/nope': no such file" in one_line_error(result)


def test_s3a_without_its_connector_names_the_package_to_add(tmp_path: Path) -> None:
    result = run(tmp_path, "report", "--out", "r", "--parquet", "s3a://bucket/ledger")
    line = one_line_error(result)
    assert "s3a://" in line and "spark.jars.packages=org.apache.hadoop:hadoop-aws:" in line


def test_spark_errors_for_input_mistakes_become_one_line(spark: Any, tmp_path: Path) -> None:
    from xmpp_queue.pipeline.payloads import prepare_items

    (tmp_path / "a.csv").write_text("id,body\n1,x\n", encoding="utf-8")
    frame = spark.read.csv(str(tmp_path / "a.csv"), header=True)
    with pytest.raises(ValueError) as err:
        prepare_items(frame, "json", 1000, id_column="ident")
    mistake = input_error(err.value)
    assert isinstance(mistake, PipelineSettingsError)
    assert str(mistake).startswith("--id-column 'ident' is not a column of the input")

    with pytest.raises(Exception) as missing:
        spark.read.parquet(str(tmp_path / "nothing-here"))
    assert str(input_error(missing.value)).startswith("no such input: file:")

    with pytest.raises(Exception) as column:
        frame.select("nope").collect()
    assert "unknown column" in str(input_error(column.value))

    assert input_error(RuntimeError("something else")) is None  # keeps its traceback
