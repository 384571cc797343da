"""The demo's Prosody check (install it as root, otherwise say exactly how) and its
directory lock. No network."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from xmpp_queue import demo
from xmpp_queue.demo import display, processes


def test_without_prosody_and_not_root_it_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(processes.shutil, "which", lambda name: None)
    monkeypatch.setattr(processes.os, "geteuid", lambda: 1000)
    said: list[str] = []
    assert processes.ensure_prosody(said.append) is False
    assert "sudo apt-get install -y prosody" in "\n".join(said)


def test_as_root_it_installs_debian_s_package(monkeypatch: pytest.MonkeyPatch) -> None:
    installed: list[Sequence[str]] = []

    def which(name: str) -> str | None:
        if name == "apt-get":
            return "/usr/bin/apt-get"
        return f"/usr/bin/{name}" if installed else None

    def run(command: Sequence[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
        installed.append(command)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(processes.shutil, "which", which)
    monkeypatch.setattr(processes.os, "geteuid", lambda: 0)
    monkeypatch.setattr(processes.subprocess, "run", run)
    said: list[str] = []
    assert processes.ensure_prosody(said.append) is True
    (command,) = installed
    assert list(command)[:3] == ["/usr/bin/apt-get", "install", "-y"]
    assert "prosody" in command


def test_with_prosody_present_nothing_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(processes.subprocess, "run", lambda *a, **k: pytest.fail("no install"))
    assert processes.ensure_prosody(print) is True


def test_a_second_demo_in_the_same_directory_is_refused_before_touching_it(
    tmp_path: Path,
) -> None:
    """The first demo's database and connection file survive the second's start."""
    from rich.console import Console

    from xmpp_queue.cli import build_parser
    from xmpp_queue.demo import Demo, DemoBusy, lock_demo_dir

    first = lock_demo_dir(tmp_path)
    (tmp_path / "demo.sqlite").write_text("the serving demo's data")
    (tmp_path / "connection.json").write_text("{}")
    args = build_parser(["demo", "--dir", str(tmp_path)]).parse_args(
        ["demo", "--dir", str(tmp_path)]
    )
    second = Demo(args, Console(file=None, quiet=True), live=False)
    with pytest.raises(DemoBusy, match=rf"pid {os.getpid()}.*own --dir"):
        second._prepare_dir()
    assert (tmp_path / "demo.sqlite").read_text() == "the serving demo's data"
    assert (tmp_path / "connection.json").exists()
    os.close(first)
    second._prepare_dir()  # once the first is gone, the directory is the new demo's
    assert not (tmp_path / "demo.sqlite").exists()
    assert second._lock_fd is not None
    os.close(second._lock_fd)


def _demo(tmp_path: Path, live: bool) -> tuple[demo.Demo, object]:
    import argparse

    from rich.console import Console

    console = Console(record=True, width=120, force_terminal=live)
    args = argparse.Namespace(items=10, dir=tmp_path, serve=False, timeout=None)
    return demo.Demo(args, console, live), console


SUMMARY = {
    "published": 10,
    "acked": 9,
    "redelivered": 1,
    "unlocked": 1,
    "expired": 0,
    "dead_lettered": 1,
    "seconds": 1.0,
    "items_per_second": 10.0,
    "adds_up": True,
}


@pytest.mark.parametrize(("live", "tables"), [(True, 0), (False, 1)])
def test_the_summary_prints_the_worker_table_once(tmp_path: Path, live: bool, tables: int) -> None:
    """Issue 24: the live display leaves its worker table on screen, and the summary
    printed it a second time."""
    run, console = _demo(tmp_path, live)
    display.print_summary(run, SUMMARY)
    assert console.export_text().count("workers") == tables  # type: ignore[attr-defined]


def test_ctrl_c_leaves_interrupted_not_stale_counts_on_the_live_display(tmp_path: Path) -> None:
    run, console = _demo(tmp_path, live=True)
    display = demo.LiveDisplay(run)
    with pytest.raises(KeyboardInterrupt), display:
        display.update(0, {})
        raise KeyboardInterrupt
    frames = [line for line in console.export_text().splitlines() if "done" in line]  # type: ignore[attr-defined]
    assert frames[-1].rstrip().endswith("interrupted"), frames
    assert "published 0" not in frames[-1]
