"""Retention, snapshots and a seek through the wire (issue 21 point 3): Prosody,
the component on SQLite and on PostgreSQL, the client library's Publisher (the
queue's owner) running the XEP-0050 replay commands, and a real Worker that gets
the replayed items again."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.integration.queue_helpers import unique, wait_until
from tests.kit.integration import subprocess_env
from xmpp_queue.client import Job, Publisher, Worker, json_payload
from xmpp_queue.client.errors import StanzaError

pytestmark = pytest.mark.integration

TIMEOUT = 20.0


def _worker(prosody: Any, accounts: Any, node: str, seen: list[str]) -> Worker:
    async def handle(job: Job) -> None:
        seen.append(job.item_id)  # returning acks it (retained by the queue)

    return Worker(
        f"w1@{prosody.domain}",
        accounts.password,
        accounts.component_jid,
        node,
        handle,
        host=prosody.host,
        port=prosody.c2s_port,
        allow_plain=True,
        name="w1",
        queue_requests=2,
    )


async def _owner_cli(prosody: Any, accounts: Any, *args: str) -> Any:
    """``python -m xmpp_queue admin ARGS`` logged in as pub, the queue's owner."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "xmpp_queue",
        "admin",
        "-j",
        f"pub@{prosody.domain}",
        "-s",
        accounts.component_jid,
        "--server",
        f"{prosody.host}:{prosody.c2s_port}",
        "--allow-plain",
        *args,
        env={**subprocess_env(), "XMPP_QUEUE_PASSWORD": accounts.password},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out) if "--json" in args else out.decode()


async def _until(check: Callable[[], bool], what: str) -> None:
    await wait_until(check, TIMEOUT, what)


async def test_a_seek_to_a_snapshot_gives_the_worker_the_items_acked_since(
    prosody: Any,
    accounts: Any,
    database_url: str,
    component: Callable[..., Awaitable[Any]],
) -> None:
    await component(database_url, server=prosody)
    node = unique("replay")
    pub = Publisher(
        f"pub@{prosody.domain}",
        accounts.password,
        accounts.component_jid,
        host=prosody.host,
        port=prosody.c2s_port,
        allow_plain=True,
    )
    await pub.connect()
    seen: list[str] = []
    try:
        await pub.create_queue(
            node, retain_acked=3600, retry_delay=0, members=[f"w1@{prosody.domain}"]
        )
        worker = _worker(prosody, accounts, node, seen)
        await worker.start()
        for n in (1, 2):
            await pub.publish(node, json_payload({"n": n}), f"i{n}")
        await _until(lambda: worker.stats.acked == 2, "i1 and i2 acked")
        await asyncio.wait_for(worker.stop(grace=1), 10)

        await pub.publish(node, json_payload({"n": 3}), "i3")  # unacked at the snapshot
        await pub.snapshot(node, "s1")
        await pub.publish(node, json_payload({"n": 4}), "i4")  # published after it
        assert list(await pub.snapshots(node)) == ["s1"]
        with pytest.raises(StanzaError) as missing:
            await pub.seek_to_snapshot(node, "nope")
        assert missing.value.condition == "bad-request" and "nope" in missing.value.text

        worker = _worker(prosody, accounts, node, seen)
        await worker.start()
        await _until(lambda: worker.stats.acked == 2, "i3 and i4 acked")
        assert sorted(seen) == ["i1", "i2", "i3", "i4"]

        # Everything is acked; the seek brings back what the snapshot had not seen acked.
        assert await pub.seek_to_snapshot(node, "s1") == 2
        await _until(lambda: worker.stats.acked == 4, "i3 and i4 acked again")
        assert sorted(seen) == ["i1", "i2", "i3", "i3", "i4", "i4"]
        await asyncio.wait_for(worker.stop(grace=1), 10)

        # The admin CLI, run by the queue's owner (not an admin): list, then delete.
        listed = await _owner_cli(prosody, accounts, "--json", "snapshots", node)
        assert [r["name"] for r in listed["tables"]["snapshots"]] == ["s1"]
        assert listed["fields"]["retained"] == 4
        await _owner_cli(prosody, accounts, "snapshot-delete", node, "s1")
        assert await pub.snapshots(node) == {}
    finally:
        await asyncio.wait_for(pub.close(), 10)
