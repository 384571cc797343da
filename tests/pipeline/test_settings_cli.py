"""The [pipeline] settings, the command line and the jar lookup: no Spark needed."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from xmpp_queue.client import Account
from xmpp_queue.pipeline.cli import add_pipeline_parser, parse_duration, parse_moment
from xmpp_queue.pipeline.session import find_jdbc_jars
from xmpp_queue.pipeline.settings import (
    DEFAULT_MAX_PAYLOAD,
    DEFAULT_PUBLISH_BATCH,
    PipelineSettings,
    PipelineSettingsError,
    PublisherConfig,
)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="xmpp-queue")
    add_pipeline_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_settings_from_the_pipeline_table() -> None:
    settings = PipelineSettings.from_dict(
        {
            "database_url": "sqlite:///q.db",
            "master": "spark://h:7077",
            "jars": ["/opt/x.jar"],
            "spark_conf": {"spark.executor.memory": "4g", "spark.ui.enabled": True},
            "publisher_jid": "loader@example.org",
            "publisher_password": "pw",
            "service_jid": "queue.example.org",
            "xmpp_port": 5223,
            "allow_plain": True,
            "publish_batch": 50,
        }
    )
    assert settings.jars == ("/opt/x.jar",)
    assert settings.spark_conf == {"spark.executor.memory": "4g", "spark.ui.enabled": "true"}
    assert settings.max_payload_bytes == DEFAULT_MAX_PAYLOAD == 262144
    account = Account(
        jid="loader@example.org",
        password="pw",
        service="queue.example.org",
        host="127.0.0.1",
        port=5223,
        allow_plain=True,
    )
    assert settings.publisher_config() == PublisherConfig(account, 32, batch=50)
    assert PipelineSettings().publish_batch == DEFAULT_PUBLISH_BATCH == 16


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"publisher_pasword": "x"}, "unknown key: publisher_pasword"),
        ({"window": 0}, "window must be a positive integer"),
        ({"publish_batch": 0}, "publish_batch must be a positive integer"),
        ({"publish_batch": True}, "publish_batch must be a positive integer"),
        ({"publish_batch": 1001}, "publish_batch must be at most 1000"),
        ({"xmpp_port": "5222"}, "xmpp_port must be a positive integer"),
        ({"jars": "/a.jar"}, "jars must be a list"),
        ({"allow_plain": "yes"}, "allow_plain must be true or false"),
        ({"spark_conf": {"a": [1]}}, "spark_conf must be a table"),
    ],
)
def test_a_bad_setting_is_one_error_naming_it(values: dict, message: str) -> None:
    with pytest.raises(PipelineSettingsError, match=message):
        PipelineSettings.from_dict(values)


def test_enqueue_without_credentials_says_which_are_missing() -> None:
    with pytest.raises(PipelineSettingsError, match="publisher_jid, publisher_password"):
        PipelineSettings(service_jid="q.example.org").publisher_config()


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("30s", 30), ("5m", 300), ("1h", 3600), ("7d", 604800)]
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


def test_moments_are_utc_or_relative_to_now() -> None:
    now = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    assert parse_moment("2024-05-01T10:00", now) == datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    assert parse_moment("2024-05-01T12:00+02:00", now) == datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    assert parse_moment("7d", now) == now - timedelta(days=7)
    with pytest.raises(argparse.ArgumentTypeError):
        parse_moment("yesterday", now)
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration("0s")


def test_the_three_jobs_and_their_options() -> None:
    args = parse(
        [
            "pipeline",
            "--master",
            "local[4]",
            "--spark-conf",
            "spark.driver.memory=8g",
            "enqueue",
            "--node",
            "jobs",
            "--input",
            "a.csv",
            "--input",
            "dir/",
            "--id-column",
            "key",
            "--payload",
            "xml",
            "--xml-column",
            "body",
        ]
    )
    assert (args.pipeline_command, args.master, args.spark_conf) == (
        "enqueue",
        "local[4]",
        [("spark.driver.memory", "8g")],
    )
    assert (args.inputs, args.id_column, args.payload) == (["a.csv", "dir/"], "key", "xml")
    report = parse(["pipeline", "report", "--out", "r", "--since", "2024-01-01", "--bucket", "5m"])
    assert report.since == datetime(2024, 1, 1, tzinfo=UTC) and report.bucket == 300
    export = parse(["pipeline", "export-ledger", "--out", "a", "--older-than", "30d"])
    assert export.cutoff < datetime.now(UTC) - timedelta(days=29)
    assert args.publish_batch is None  # the [pipeline] setting applies
    batched = parse(["pipeline", "enqueue", "--node", "j", "--input", "a", "--publish-batch", "8"])
    assert batched.publish_batch == 8
    with pytest.raises(SystemExit):
        parse(["pipeline", "enqueue", "--input", "a.csv"])  # --node is required
    for bad in ("0", "1001", "-3", "x"):
        with pytest.raises(SystemExit):
            parse(["pipeline", "enqueue", "--node", "j", "--input", "a", "--publish-batch", bad])


def test_jdbc_jars_are_found_by_their_debian_names(tmp_path: Path) -> None:
    for name in ("postgresql-42.5.5.jar", "postgresql.jar", "xerial-sqlite-jdbc-3.40.1.0.jar"):
        (tmp_path / name).write_bytes(b"")
    jars = find_jdbc_jars([str(tmp_path)])
    assert [Path(j).name for j in jars] == ["postgresql.jar", "xerial-sqlite-jdbc-3.40.1.0.jar"]
    assert find_jdbc_jars([str(tmp_path / "nowhere")]) == []
