"""bench/component_inprocess.py drives the real component over its fake transport.

The bench is how the component's own CPU per lone operation is read without an XMPP
server (docs/benchmarks.md); a bench that broke silently, or that stopped measuring
what it says (one commit per operation alone, one per burst), would mislead. So it is
run here, small, and its commit counts are checked.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "component_inprocess.py"


SMALL = ("--store", "memory", "--items", "48", "--warmup", "8", "--repeat", "1")


def _run(*extra: str) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCH), *SMALL, *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _commits(line: str) -> float:
    found = re.search(r"commits/item ([\d.]+)", line)
    assert found is not None, line
    return float(found.group(1))


def _ours(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("this checkout"))


@pytest.mark.parametrize(("burst", "commits"), [("1", 2.0), ("8", 0.25)])
def test_lone_operations_commit_alone_and_a_burst_commits_once(burst: str, commits: float) -> None:
    line = _ours(_run("--burst", burst))
    assert re.search(r"CPU µs/item [\d,]+ \(median [\d,]+;", line), line
    assert _commits(line) == commits, line


def test_a_compared_checkout_runs_from_its_own_tree() -> None:
    """--compare-src runs the other checkout (here this one, by its path) and checks
    that the package it measured was loaded from there."""
    out = _run("--compare-src", str(ROOT))
    compared = next(line for line in out.splitlines() if line.startswith("compared"))
    assert _commits(compared) == 2.0, out


def test_the_window_flow_moves_every_item_in_batches() -> None:
    """--window with --batch: every item published, notified and acked (the run ends
    only when all are acked), several items per commit."""
    line = _ours(_run("--window", "4", "--batch", "4"))
    assert 0 < _commits(line) < 0.5, line
