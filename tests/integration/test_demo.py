"""``xmpp-queue demo`` end to end, as a newcomer runs it (issue 5 item 3).

Each test runs the real command in a subprocess: a private Prosody, the
component, three workers and a publisher. The summary must add up (every
published item acked or dead-lettered, by the service's own ledger), Ctrl-C
must leave nothing running, and the examples must work against ``--serve``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.kit.env import missing
from tests.kit.integration import subprocess_env

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 240.0  # a cold start of Prosody, alembic and the component on a busy machine
POISON_EVERY, POISON_AT = 40, 17  # the demo's poison items (xmpp_queue/demo/plan.py)


@pytest.fixture(autouse=True)
def _needs_prosody() -> None:
    if shutil.which("prosody") is None:
        missing("the demo needs Debian's prosody package")


class DemoRun:
    """``python -m xmpp_queue demo ...`` with its output read line by line."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []

    @classmethod
    async def start(cls, *args: str) -> DemoRun:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "xmpp_queue",
            "demo",
            "--no-live",
            *args,
            env=subprocess_env(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        return cls(process)

    async def wait_for_line(self, pattern: str, within: float = RUN_TIMEOUT) -> re.Match[str]:
        assert self.process.stdout is not None
        regex = re.compile(pattern)
        async with asyncio.timeout(within):
            while True:
                raw = await self.process.stdout.readline()
                if not raw:
                    raise AssertionError(f"demo ended before {pattern!r}:\n{self.output}")
                line = raw.decode(errors="replace").rstrip("\n")
                self.lines.append(line)
                if found := regex.search(line):
                    return found

    async def finish(self, within: float = RUN_TIMEOUT) -> int:
        assert self.process.stdout is not None
        rest, _ = await asyncio.wait_for(self.process.communicate(), within)
        self.lines += rest.decode(errors="replace").splitlines()
        assert self.process.returncode is not None
        return self.process.returncode

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def child_pids(self) -> list[int]:
        return [int(p) for p in re.findall(r"(?:Prosody|component) pid (\d+)", self.output)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
async def demos() -> AsyncIterator[list[DemoRun]]:
    """Runs started by a test; killed (with their children) if the test fails midway."""
    runs: list[DemoRun] = []
    yield runs
    for run in runs:
        if run.process.returncode is None:
            run.process.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(run.process.communicate(), 60)
            except TimeoutError:
                run.process.kill()
                await run.process.wait()


async def test_the_demo_runs_and_its_summary_adds_up(tmp_path: Path, demos: list[DemoRun]) -> None:
    items = 40
    run = await DemoRun.start("--items", str(items), "--dir", str(tmp_path / "demo"))
    demos.append(run)
    assert await run.finish() == 0, run.output
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())

    poison = sum(1 for n in range(items) if n % POISON_EVERY == POISON_AT)
    assert summary["complete"] and summary["adds_up"]
    assert summary["published"] == items == summary["publisher_answers"]
    assert summary["acked"] + summary["dead_lettered"] == summary["published"]
    assert summary["dead_lettered"] == poison
    assert summary["redelivered"] >= 2 * poison, "a poison item is delivered 3 times"
    assert summary["unlocked"] >= 2 * poison
    assert summary["items_per_second"] > 0
    workers = summary["workers"]
    assert set(workers) == {"fast", "flaky", "crashy"}
    assert workers["crashy"]["state"] == "crashed"
    assert workers["fast"]["state"] == workers["flaky"]["state"] == "stopped"
    assert sum(w["acked"] for w in workers.values()) <= summary["acked"]
    assert f"published {items} = acked" in run.output and "adds up" in run.output
    # A ready [pipeline] table: the Spark jobs run against the demo with -c component.toml.
    from xmpp_queue.config import load_config
    from xmpp_queue.pipeline.settings import PipelineSettings

    config = load_config(tmp_path / "demo" / "component.toml")
    pipeline = PipelineSettings.from_dict({"database_url": config.database.url, **config.pipeline})
    assert pipeline.publisher_config().account.service == "queue.localhost"

    pids = run.child_pids()
    assert len(pids) == 2, run.output
    assert not [pid for pid in pids if alive(pid)], "the demo left processes running"


async def test_ctrl_c_stops_everything(tmp_path: Path, demos: list[DemoRun]) -> None:
    run = await DemoRun.start("--items", "100000", "--dir", str(tmp_path / "demo"))
    demos.append(run)
    await run.wait_for_line(r"^progress: ")  # workers and publisher are busy
    run.process.send_signal(signal.SIGINT)
    assert await run.finish(within=90) == 130, run.output
    pids = run.child_pids()
    assert len(pids) == 2, run.output
    assert not [pid for pid in pids if alive(pid)], "Ctrl-C left processes running"


async def test_the_examples_run_against_the_served_demo(
    tmp_path: Path, demos: list[DemoRun]
) -> None:
    demo_dir = tmp_path / "demo"
    run = await DemoRun.start("--items", "10", "--dir", str(demo_dir), "--serve")
    demos.append(run)
    await run.wait_for_line(r"Ctrl-C here stops everything")
    connection = str(demo_dir / "connection.json")

    async def example(name: str, *args: str) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(REPO / "examples" / name),
            "--connection",
            connection,
            *args,
            env=subprocess_env(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode is not None
        return proc.returncode, out.decode(errors="replace")

    code, out = await example("publisher.py", "--count", "5", "--start", "100")
    assert code == 0, out
    assert "5 published" in out
    code, out = await example("worker.py", "--max-items", "5")
    assert code == 0, out
    assert out.count("square=") == 5
    assert "acked=5" in out

    run.process.send_signal(signal.SIGINT)
    assert await run.finish(within=90) == 0, run.output
    assert not [pid for pid in run.child_pids() if alive(pid)]
