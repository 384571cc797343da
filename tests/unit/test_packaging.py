"""The shipped systemd units (issue 24): they run the venv the docs install into (Debian's
system Python refuses `pip install` outside one), and stay hardened."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.kit.env import missing

UNITS = Path(__file__).resolve().parents[2] / "packaging" / "systemd"
VENV_BIN = "/opt/xmpp-queue/venv/bin/xmpp-queue"


def exec_lines(name: str) -> list[str]:
    text = (UNITS / name).read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.startswith("Exec")]


@pytest.mark.parametrize(
    "name", ["xmpp-queue.service", "xmpp-queue@.service", "xmpp-queue-healthcheck.service"]
)
def test_the_units_run_the_venv_that_operations_md_installs(name: str) -> None:
    lines = exec_lines(name)
    assert lines and all(VENV_BIN in line for line in lines), lines
    assert not any("/usr/local/bin" in line for line in lines)
    docs = (UNITS.parents[1] / "docs" / "operations.md").read_text(encoding="utf-8")
    assert "python3 -m venv /opt/xmpp-queue/venv" in docs


@pytest.mark.parametrize(
    ("name", "ceiling"),
    [
        ("xmpp-queue.service", 2.0),
        ("xmpp-queue@.service", 2.0),
        ("xmpp-queue-healthcheck.service", 3.0),
    ],
)
def test_systemd_analyze_rates_the_units_ok(name: str, ceiling: float) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        missing("systemd-analyze is not installed (apt-get install systemd)")
    result = subprocess.run(
        [analyze, "security", "--offline=yes", str(UNITS / name)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    found = re.search(r"Overall exposure level for \S+: ([\d.]+) (\w+)", result.stdout)
    assert found, result.stdout + result.stderr
    assert float(found.group(1)) <= ceiling and found.group(2) == "OK", found.group(0)
