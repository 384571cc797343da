"""What an operator gets from the sdist (issue 12): config example, examples,
migrations, the systemd units, the dashboard's files, a LICENSE matching the metadata."""

from __future__ import annotations

import configparser
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_license_matches_the_metadata() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    assert cfg["metadata"]["license"] == "MIT"
    assert (REPO / "LICENSE").read_text().startswith("MIT License")


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
        "migrations/env.py",
        "migrations/versions/0001_initial.py",
        "packaging/systemd/xmpp-queue.service",
        "packaging/systemd/xmpp-queue-healthcheck.timer",
        "docs/operations.md",
        "docs/dashboard-overview.png",
        "xmpp_queue/http/static/app.js",
        "xmpp_queue/http/static/index.html",
    ):
        assert needed in names, f"{needed} missing from {sdist.name}"
    assert not any("__pycache__" in n for n in names)


def test_the_systemd_unit_uses_the_health_checks() -> None:
    unit = (REPO / "packaging/systemd/xmpp-queue.service").read_text()
    assert "xmpp-queue probe" in unit and "healthz" in unit
    assert "RestartPreventExitStatus=2" in unit
    check = (REPO / "packaging/systemd/xmpp-queue-healthcheck.service").read_text()
    assert "probe" in check and "systemctl restart xmpp-queue.service" in check
