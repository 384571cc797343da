"""Every ```python block of docs/client.md and docs/queueing.md runs as written
against the session Prosody (issue 24 point 8).

The blocks are found when the tests are collected, so a new example is run
without anyone adding a test. A block runs as a script of its own, in a
subprocess, against a fresh component (its own SQLite database, default access
rules: what a reader's server has), after its settings lines (``SERVICE``,
``PUBLISHER``, ``WORKER``, ``CONNECT``, each ``NAME = ...`` on a line of its own)
are pointed at Prosody's accounts; a ``LISTEN = (host, port)`` line (a script that
serves HTTP, like the push receiver) is pointed at a free loopback port. A block
that cannot run on its own says so with an HTML comment on the line before it,
``<!-- fragment: why -->``: it is only
compiled (a syntax error or a top-level ``await`` still fails).

What a script must print, what a script needs on the service before it runs
(the worker example works a queue the publisher example fills) and how the
component is configured for it (the push example: a ``[push]`` table that lets the
component POST to loopback), is in ``EXPECTED``, keyed by a marker: a piece of
text found in exactly one block.
"""

from __future__ import annotations

import asyncio
import re
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.kit.integration import REPO_ROOT, subprocess_env
from xmpp_queue.client import Publisher, json_payload

DOCS = ("client.md", "queueing.md")
SETTINGS = ("SERVICE", "PUBLISHER", "WORKER", "CONNECT", "LISTEN")
FRAGMENT = re.compile(r"^<!--\s*fragment:\s*(?P<why>\S.*?)\s*-->$")
OFFLINE = re.compile(r"^<!--\s*offline:\s*(?P<why>\S.*?)\s*-->$")
SCRIPT_TIMEOUT = 60.0


@dataclass(frozen=True)
class Block:
    """One ```python block: where it is, its code, and the text after it up to the
    next heading (where the guide says what it prints)."""

    doc: str
    line: int
    heading: str
    code: str
    after: str
    fragment: str | None
    offline: str | None = None  # runs as written, without a server (and why)

    @property
    def id(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.heading.lower()).strip("-")
        return f"{self.doc}:{slug}:{self.line}"


def find_blocks(text: str, doc: str) -> list[Block]:
    """The ```python blocks of a Markdown text, each with its nearest heading and
    whether the line before it (blank lines skipped) marks it a fragment."""
    lines = text.splitlines()
    found: list[Block] = []
    heading = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        if line.strip() != "```python":
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marked = FRAGMENT.match(before)
        alone = OFFLINE.match(before)
        rest = lines[end + 1 :]
        stop = next((k for k, text_line in enumerate(rest) if text_line.startswith("#")), None)
        found.append(
            Block(
                doc,
                i + 1,
                heading,
                "\n".join(lines[i + 1 : end]) + "\n",
                "\n".join(rest[:stop]),
                marked.group("why") if marked else None,
                alone.group("why") if alone else None,
            )
        )
        i = end + 1
    return found


BLOCKS = [
    block
    for doc in DOCS
    for block in find_blocks((REPO_ROOT / "docs" / doc).read_text(encoding="utf-8"), doc)
]


# --- what each script needs beforehand and must print -----------------------------


@dataclass(frozen=True)
class Target:
    """The accounts a script is pointed at, for its set-up step."""

    service: str
    publisher: tuple[str, str]
    worker: tuple[str, str]
    connect: dict[str, Any]


Setup = Callable[[Target], Awaitable[None]]
Check = Callable[[str, Block], None]


@dataclass(frozen=True)
class Expected:
    setup: Setup | None = None
    check: Check | None = None
    component: dict[str, Any] | None = None  # the component's config for this script


async def ten_invoices(target: Target) -> None:
    """The worker example's queue, as the publisher example leaves it (but 10 items)."""
    async with Publisher(*target.publisher, target.service, **target.connect) as pub:
        await pub.create_queue("invoices", members=[target.worker[0]])
        for n in range(10):
            await pub.publish("invoices", json_payload({"n": n}))


def worker_example(out: str, block: Block) -> None:
    lines = out.splitlines()
    assert sorted(lines[:-1]) == sorted(f"invoice {n}" for n in range(10)), lines
    assert lines[-1] == "acked 10", "the drain acks what the worker still held"


def publisher_example(out: str, block: Block) -> None:
    assert out.splitlines() == ["published 1000 invoices"]


def attributes_example(out: str, block: Block) -> None:
    lines = out.splitlines()
    order = [line.split()[0] for line in lines]
    assert sorted(order) == ["e1", "e2", "e3", "e4", "e5", "e6"]
    assert order[0] == "e4", "the high-priority item first"
    assert order.index("e5") < order.index("e2") and order.index("e5") < order.index("e3")
    assert order.index("e1") < order.index("e5"), "low after medium"
    by_id = {line.split()[0]: line for line in lines}
    assert "{'tenant': 'acme'}" in by_id["e1"]
    assert by_id["e4"].startswith("e4 high {'TTL': '600', 'Urgency': 'high'} None 600")


def dedup_example(out: str, block: Block) -> None:
    assert out.strip().splitlines()[-1] == "['urgent', 'r3', 'r4']"


def ordered_example(out: str, block: Block) -> None:
    lines = out.splitlines()
    assert lines[-1] == "['c1-1', 'c1-2', 'c1-3', 'c1-4']", lines
    seen = [tuple(line.split()[:2]) for line in lines[:-1]]
    assert set(seen[:2]) == {("c1", "c1-1"), ("c2", "c2-1")}, seen
    c1 = [item for key, item in seen if key == "c1"]
    assert c1 == ["c1-1", "c1-2", "c1-2", "c1-3", "c1-4"], seen
    assert "c1-2 attempt 2" in out


def single_active_example(out: str, block: Block) -> None:
    lines = out.splitlines()
    assert lines[-3:] == [
        "a ['a-1', 'a-2', 'a-3']",
        "b ['b-1', 'b-2', 'b-3']",
        "['first', 'standby']",
    ], lines


def prints_what_the_guide_says(out: str, block: Block) -> None:
    printed = block.after.split("It prints:\n\n```\n", 1)[1].split("```", 1)[0]
    assert out == printed


LOOPBACK_PUSH = {
    "push": {
        "allowed_hosts": ["127.0.0.1"],
        "allowed_networks": ["127.0.0.0/8"],
        "allow_http": True,
    }
}
"""The ``[push]`` rules the push example's page names for a local try."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


EXPECTED: dict[str, Expected] = {
    'Worker(\n        *WORKER, SERVICE, "invoices"': Expected(ten_invoices, worker_example),
    'print("published"': Expected(check=publisher_example),
    'create_queue("emails"': Expected(check=attributes_example),
    'create_queue(\n            "reports"': Expected(check=dedup_example),
    'create_queue("invoices", ordered=True': Expected(check=ordered_example),
    'create_node("billing")': Expected(check=prints_what_the_guide_says),
    'add_push("webhooks"': Expected(check=prints_what_the_guide_says, component=LOOPBACK_PUSH),
    'create_queue("accounts", ordered=True': Expected(check=single_active_example),
}


def expected_for(block: Block) -> Expected:
    hits = [expected for marker, expected in EXPECTED.items() if marker in block.code]
    assert len(hits) <= 1, f"{block.id}: several markers of EXPECTED match it"
    return hits[0] if hits else Expected()


# --- the tests --------------------------------------------------------------------


def test_every_marker_names_exactly_one_block() -> None:
    """A marker that matches nothing would drop its assertions without a sound."""
    for marker in EXPECTED:
        hits = [block.id for block in BLOCKS if marker in block.code]
        assert len(hits) == 1, f"{marker!r} matches {hits}"


def test_blocks_and_fragments_are_found() -> None:
    text = (
        "# Guide\n\n```python\nprint(1)\n```\n\nIt prints 1.\n\n## Part\n\n"
        "<!-- fragment: needs a queue -->\n\n```python\nawait x\n```\n\n```sh\nls\n```\n"
    )
    first, second = find_blocks(text, "guide.md")
    assert (first.line, first.heading, first.code, first.fragment) == (
        3,
        "Guide",
        "print(1)\n",
        None,
    )
    assert first.after.strip() == "It prints 1."
    assert (second.line, second.heading, second.fragment) == (13, "Part", "needs a queue")
    assert {b.doc for b in BLOCKS} == set(DOCS), "each guide has python blocks"


def point_at(code: str, values: dict[str, str], where: str) -> str:
    """*code* with each settings line it has set to the test server's value."""
    counts = {}
    for name in SETTINGS:
        if name not in values:
            continue
        code, counts[name] = re.subn(
            rf"^{name} = .*$", f"{name} = {values[name]}", code, flags=re.M
        )
    assert all(n <= 1 for n in counts.values()), f"{where}: a setting is set twice: {counts}"
    assert counts["SERVICE"] == counts["CONNECT"] == 1 and (
        counts["PUBLISHER"] or counts["WORKER"]
    ), (
        f"{where}: a runnable block sets SERVICE, CONNECT and an account on lines of their "
        "own (or is marked <!-- fragment: why --> on the line before it)"
    )
    return code


@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.id)
async def test_the_guides_python_blocks_run_as_written(
    block: Block, prosody: Any, component: Any, accounts: Any, tmp_path: Path
) -> None:
    if block.fragment is not None:
        compile(block.code, block.id, "exec")
        return
    if block.offline is not None:
        path = tmp_path / "offline_example.py"
        path.write_text(block.code, encoding="utf-8")
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(path),
            env=subprocess_env(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(process.communicate(), SCRIPT_TIMEOUT)
        assert process.returncode == 0, f"{block.id}: {err.decode()}"
        return
    expected = expected_for(block)
    await component(server=prosody, **(expected.component or {}))
    target = Target(
        accounts.component_jid,
        (f"pub@{prosody.domain}", accounts.password),
        (f"w1@{prosody.domain}", accounts.password),
        {"host": prosody.host, "port": prosody.c2s_port, "allow_plain": True},
    )
    values = {
        "SERVICE": repr(target.service),
        "PUBLISHER": repr(target.publisher),
        "WORKER": repr(target.worker),
        "CONNECT": repr(target.connect),
        "LISTEN": repr(("127.0.0.1", free_port())),
    }
    script = point_at(block.code, values, block.id)
    if expected.setup is not None:
        await expected.setup(target)
    path = tmp_path / "example.py"
    path.write_text(script, encoding="utf-8")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(path),
        env=subprocess_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), SCRIPT_TIMEOUT)
    except TimeoutError:
        process.kill()
        out, err = await process.communicate()
        pytest.fail(f"{block.id} ran past {SCRIPT_TIMEOUT} s:\n{out.decode()}\n{err.decode()}")
    assert process.returncode == 0, err.decode()
    if expected.check is not None:
        expected.check(out.decode(), block)
