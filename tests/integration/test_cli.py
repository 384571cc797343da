"""The ``xmpp-queue`` command as an operator meets it: exit statuses and the one line.

Every command runs in a subprocess (``python -m xmpp_queue ...``), exactly as
typed in a shell or started by systemd. The ``run`` tests need the XMPP glue
(``xmpp_queue.xmpp.component``) and a private server.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
QUICK = 20.0  # seconds within which a refusal must end the process (no retry loop)

GOOD = """
[component]
jid = "queue.example.org"
secret = "the-secret-itself"

[admins]
jids = ["admin@example.org"]
"""


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


# --- check-config and migrate ---------------------------------------------------------


def test_check_config_prints_a_summary_without_the_secret(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(GOOD)
    result = cli("check-config", "-c", str(path))
    assert result.returncode == EXIT_OK, result.stderr
    assert f"config OK: {path}" in result.stdout
    assert "queue.example.org via 127.0.0.1:5347" in result.stdout
    assert "admin@example.org" in result.stdout
    assert "the-secret-itself" not in result.stdout + result.stderr


def test_check_config_on_a_bad_key_prints_one_line_naming_it_and_exits_2(
    cli: Any, tmp_path: Path
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(GOOD.replace('secret = "the-secret-itself"', 'server_port = "abc"\nsecret="x"'))
    result = cli("check-config", "-c", str(path))
    assert result.returncode == EXIT_USAGE
    assert result.stdout == ""
    assert lines(result.stderr) == [
        f"xmpp-queue: config error: {path}: component.server_port: expected an integer "
        '1-65535, got "abc"'
    ]


def test_a_missing_config_file_is_one_line_and_exit_2(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "nowhere.toml"
    for command in ("check-config", "migrate", "run"):
        result = cli(command, "-c", str(path))
        assert result.returncode == EXIT_USAGE, command
        assert len(lines(result.stderr)) == 1, result.stderr
        assert f"{path}: no such file" in result.stderr


def test_migrate_is_idempotent(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    database = tmp_path / "queue.sqlite"
    path.write_text(GOOD + f'\n[database]\nurl = "sqlite:///{database}"\n')
    first, second = cli("migrate", "-c", str(path)), cli("migrate", "-c", str(path))
    assert (first.returncode, second.returncode) == (EXIT_OK, EXIT_OK), first.stderr
    assert "(current)" in second.stdout
    assert database.exists()


# --- run ------------------------------------------------------------------------------


async def _exit_status(proc: Any) -> tuple[int, float]:
    """Wait (off the loop) for the component process to end: (status, seconds)."""
    started = time.monotonic()
    status = await asyncio.to_thread(proc.process.wait, QUICK)
    return status, time.monotonic() - started


async def test_run_refuses_an_unmigrated_database_naming_the_command(
    component: Any, database_url: str
) -> None:
    proc = await component(database_url, migrate=False, wait=False)
    status, _ = await _exit_status(proc)
    assert status == EXIT_USAGE
    output = lines(proc.log_text())
    assert len(output) == 1, output
    assert f"run: xmpp-queue migrate -c {proc.config_path}" in output[0]
    assert "not at the current schema" in output[0]


async def test_a_wrong_secret_is_one_log_line_and_a_quick_exit(
    component: Any, xmpp_server: Any
) -> None:
    proc = await component(secret="not-the-secret", wait=False)
    status, seconds = await _exit_status(proc)
    assert status == EXIT_FAILURE
    assert seconds < QUICK
    log = lines(proc.log_text())
    errors = [line for line in log if "level=ERROR" in line]
    assert len(errors) == 1, log
    assert "handshake_rejected" in errors[0]
    assert not [line for line in log if "reconnect" in line], "a rejected secret must not retry"
    assert "not-the-secret" not in proc.log_text()


async def test_run_connects_serves_and_stops_cleanly_on_sigterm(
    component: Any, client: Any, xmpp_server: Any, accounts: Any
) -> None:
    proc = await component()
    alice = await client("alice")
    info = await alice.plugin["xep_0030"].get_info(jid=accounts.component_jid, timeout=10)
    identities = {identity[:2] for identity in info["disco_info"]["identities"]}
    assert ("pubsub", "service") in identities

    assert proc.process is not None
    proc.process.send_signal(signal.SIGTERM)
    status, _ = await _exit_status(proc)
    assert status == EXIT_OK
    run_log = proc.run_log()
    assert "event=stopping signal=SIGTERM" in run_log
    assert "event=stopped" in run_log
    assert "Traceback" not in run_log


# --- refusals before any connection (issue 13) -------------------------------------------


def _run_in(cwd: Path, config: Path) -> Any:
    """``python -m xmpp_queue run -c CONFIG`` started in *cwd*, as a service would be."""
    import subprocess
    import sys

    from tests.kit.integration import subprocess_env

    return subprocess.run(
        [sys.executable, "-m", "xmpp_queue", "run", "-c", str(config)],
        cwd=cwd,
        env=subprocess_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_run_on_a_missing_relative_sqlite_file_names_the_resolved_path_and_creates_nothing(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(GOOD + '\n[database]\nurl = "sqlite:///data/queue.db"\n')
    workdir = tmp_path / "service-cwd"
    (workdir / "data").mkdir(parents=True)
    result = _run_in(workdir, config)
    assert result.returncode == EXIT_USAGE
    (line,) = lines(result.stderr)
    assert str(workdir / "data" / "queue.db") in line
    assert f"run: xmpp-queue migrate -c {config}" in line
    assert not (workdir / "data" / "queue.db").exists(), "no empty file left behind"


def test_run_on_a_missing_postgresql_database_exits_2(tmp_path: Path, pg_url: str) -> None:
    from sqlalchemy.engine import make_url

    missing_db = make_url(pg_url).set(database="xq_no_such_database_13")
    config = tmp_path / "config.toml"
    url = missing_db.render_as_string(hide_password=False)
    config.write_text(GOOD + f'\n[database]\nurl = "{url}"\n')
    result = _run_in(tmp_path, config)
    assert result.returncode == EXIT_USAGE, result.stderr
    (line,) = lines(result.stderr)
    assert "xq_no_such_database_13" in line and "does not exist" in line
    assert "createdb" in line


class _C2sAsComponentPort:
    """A server whose 'component port' is really its client port: the mistake."""

    def __init__(self, server: Any) -> None:
        self.host, self.domain = server.host, server.domain
        self.c2s_port = self.component_port = server.c2s_port


async def test_a_component_pointed_at_the_c2s_port_is_told_so_not_wrong_secret(
    component: Any, xmpp_server: Any
) -> None:
    proc = await component(server=_C2sAsComponentPort(xmpp_server), wait=False)
    status, seconds = await _exit_status(proc)
    assert status == EXIT_FAILURE
    assert seconds < QUICK
    errors = [line for line in lines(proc.log_text()) if "level=ERROR" in line]
    assert len(errors) == 1, proc.log_text()
    assert "client (c2s) port" in errors[0]
    assert "secret" not in errors[0]
