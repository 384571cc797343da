"""Refused requests are counted and logged sparingly; /readyz follows write health
(issue 27, points 8 and 5), with the component behind Prosody.

The full disk is a real one: the SQLite database lives on a small tmpfs that a
filler file fills up, and deleting the filler frees it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.queue_helpers import SERVICE, retract_iq, send, unique
from tests.kit.env import missing
from tests.kit.integration import PASSWORD
from xmpp_queue.client import Publisher, PublishError, RetryPolicy

pytestmark = pytest.mark.integration

HTTP = {"listen": "127.0.0.1:0", "admin_token": "integration-token-0123456789"}
REFUSED = 300


async def fetch(base: str, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(base + path) as r:
        return r.status, await r.text()


def metric(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


async def test_refused_requests_are_counted_by_condition_and_logged_once_per_jid(
    prosody: Any, component: Any, client: Any
) -> None:
    proc = await component(server=prosody, http=HTTP)
    alice = await client("alice")
    missing_node = unique("nowhere")
    results = await asyncio.gather(
        *(send(retract_iq(alice, missing_node, f"i{n}")) for n in range(REFUSED)),
        return_exceptions=True,
    )
    assert all(isinstance(r, Exception) for r in results)
    status, text = await fetch(proc.http_base(), "/metrics")
    assert status == 200
    refused = metric(text, "xmpp_queue_requests_refused_total", condition="item-not-found")
    assert refused >= REFUSED
    lines = [
        line
        for line in proc.run_log().splitlines()
        if "event=request_refused" in line and "from=alice@" in line
    ]
    assert len(lines) == 1, lines[:5]
    assert "suppressed=0" in lines[0]


@contextlib.contextmanager
def small_disk(where: Path, size: str = "6m") -> Iterator[Path]:
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        missing(f"cannot mount a tmpfs for the full-disk test: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(path: Path) -> None:
    """Write *path* until the file system is full."""
    chunk = b"\0" * 65536
    with path.open("wb") as f:
        try:
            while True:
                f.write(chunk)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc


async def test_readyz_is_not_ready_on_a_full_disk_until_a_write_succeeds(
    prosody: Any, component: Any, accounts: Any, client: Any, tmp_path: Path
) -> None:
    with small_disk(tmp_path / "disk") as disk:
        proc = await component(f"sqlite:///{disk / 'queue.sqlite'}", server=prosody, http=HTTP)
        base = proc.http_base()
        publisher = Publisher(
            f"pub@{prosody.domain}",
            PASSWORD,
            accounts.component_jid,
            host=prosody.host,
            port=prosody.c2s_port,
            allow_plain=True,
            retry=RetryPolicy(attempts=1),
            reply_timeout=60.0,
        )
        await publisher.connect()
        try:
            node = unique("disk")
            await publisher.create_queue(node)
            big = "<blob xmlns='urn:example'>" + "x" * 100_000 + "</blob>"
            await (await publisher.submit(node, big))
            assert (await fetch(base, "/readyz"))[0] == 200

            filler = disk / "filler"
            await asyncio.to_thread(fill, filler)
            refused = None
            for _ in range(5):  # the WAL may still have room for one or two
                try:
                    await (await publisher.submit(node, big))
                except PublishError as exc:
                    refused = exc
                    break
            assert refused is not None, "the full disk refused no write"
            status, body = await fetch(base, "/readyz")
            assert status == 503 and "the last write failed" in body, body
            # A read goes through, and proves nothing about the disk.
            reader = await client("pub")
            await reader.plugin["xep_0060"].get_items(SERVICE, node, max_items=1, timeout=30)
            status, body = await fetch(base, "/readyz")
            assert status == 503, body

            filler.unlink()
            await (await publisher.submit(node, "<small xmlns='urn:example'/>"))
            status, body = await fetch(base, "/readyz")
            assert status == 200, body
            log = proc.run_log()
            assert log.count("event=database_unavailable") == 1, log[-2000:]
            assert log.count("event=database_back") == 1
        finally:
            await publisher.close()
            await proc.astop()
