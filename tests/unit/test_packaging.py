"""What an installed xmpp-queue carries: the sdist has what an operator needs (issue 12),
the package is marked typed for its users' mypy (issue 24), and the shipped systemd units
run the venv the docs install into (Debian's system Python refuses `pip install` outside
one), use the health checks and stay hardened (issue 24).

The sdist, LICENSE and py.typed tests were lost twice when this file was rewritten for
the next topic; they are back beside the units' tests."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.kit.env import missing

REPO = Path(__file__).resolve().parents[2]
UNITS = REPO / "packaging" / "systemd"
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
    docs = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
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


def test_license_matches_the_metadata() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    assert cfg["metadata"]["license"] == "MIT"
    assert (REPO / "LICENSE").read_text().startswith("MIT License")


def test_the_package_is_marked_typed_and_ships_the_marker() -> None:
    """PEP 561: without py.typed, mypy ignores the client's hints in users' code."""
    assert (REPO / "xmpp_queue" / "py.typed").is_file()
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    assert "py.typed" in setup["options.package_data"]["xmpp_queue"]


def test_the_sdist_carries_what_an_operator_needs(tmp_path: Path) -> None:
    # setuptools' PEP 517 backend, as `python -m build --sdist` calls it
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from setuptools import build_meta; build_meta.build_sdist({str(tmp_path)!r})",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    [sdist] = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for needed in (
        "LICENSE",
        "config.example.toml",
        "alembic.ini",
        "examples/admin.py",
        "examples/worker.py",
        "examples/prosody.cfg.lua",
        "examples/ejabberd.yml",
        "migrations/env.py",
        "migrations/versions/0001_initial.py",
        "packaging/systemd/xmpp-queue.service",
        "packaging/systemd/xmpp-queue-healthcheck.service",
        "packaging/systemd/xmpp-queue-healthcheck.timer",
        "docs/operations.md",
        "docs/dashboard-overview.png",
        "xmpp_queue/http/static/app.js",
        "xmpp_queue/http/static/index.html",
        "xmpp_queue/py.typed",
    ):
        assert needed in names, f"{needed} missing from {sdist.name}"
    assert not any("__pycache__" in n for n in names)


def test_the_systemd_unit_uses_the_health_checks() -> None:
    unit = (UNITS / "xmpp-queue.service").read_text()
    assert "xmpp-queue probe" in unit and "healthz" in unit
    assert "RestartPreventExitStatus=2" in unit
    check = (UNITS / "xmpp-queue-healthcheck.service").read_text()
    assert "probe" in check and "systemctl restart xmpp-queue.service" in check
