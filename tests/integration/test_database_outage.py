"""The component's PostgreSQL connections are killed under load (issue 27, points 3 and 5).

``pg_terminate_backend`` on every connection of the component while a publisher
and a worker keep it busy, through Prosody. A killed connection is an outage
like any other: the component reconnects and runs the batch that was in flight
again, so no request is answered ``internal-server-error`` for it, the log has
one line per outage and no trace, and the work goes on.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import pytest

from tests.integration.queue_helpers import unique
from tests.kit.integration import PASSWORD
from tests.kit.pg import plain_dsn
from xmpp_queue.client import Job, Publisher, PublishError, RetryPolicy, Worker, json_payload

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

ITEMS = 600
KILLS = 3


async def kill_connections(url: str) -> int:
    """Terminate every other connection to the component's database."""
    conn = await asyncpg.connect(plain_dsn(url))
    try:
        rows = await conn.fetch(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    finally:
        await conn.close()
    return len(rows)


async def test_killed_database_connections_are_an_outage_not_an_error(
    prosody: Any, component: Any, accounts: Any, pg_database: str
) -> None:
    proc = await component(server=prosody, database_url=pg_database)
    node = unique("pgkill")
    handled: set[int] = set()

    async def handle(job: Job) -> None:
        handled.add(job.json()["n"])

    common: dict[str, Any] = {
        "host": prosody.host,
        "port": prosody.c2s_port,
        "allow_plain": True,
    }
    # No retries: an error answer reaches the test instead of being hidden.
    publisher = Publisher(
        f"pub@{prosody.domain}",
        PASSWORD,
        accounts.component_jid,
        window=8,
        retry=RetryPolicy(attempts=1),
        **common,
    )
    await publisher.connect()
    worker = Worker(
        f"w1@{prosody.domain}",
        PASSWORD,
        accounts.component_jid,
        node,
        handle,
        queue_requests=8,
        name="pgkill",
        **common,
    )
    errors: list[str] = []
    try:
        await publisher.create_queue(node, lock_timeout=300, members=[f"w1@{prosody.domain}"])
        await worker.start()

        async def killer() -> None:
            for _ in range(KILLS):
                await asyncio.sleep(0.6)
                assert await kill_connections(pg_database) >= 1

        killing = asyncio.ensure_future(killer())
        futures = []
        for n in range(ITEMS):
            futures.append(await publisher.submit(node, json_payload({"n": n})))
            await asyncio.sleep(0.004)
        for result in await asyncio.gather(*futures, return_exceptions=True):
            if isinstance(result, PublishError):
                errors.append(result.condition)
            elif isinstance(result, BaseException):
                raise result
        await killing
        deadline = time.monotonic() + 60
        while len(handled) < ITEMS - len(errors) and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    finally:
        await asyncio.wait_for(worker.stop(grace=2), 20)
        await asyncio.wait_for(publisher.close(), 20)
    log = proc.log_text()
    assert errors == [], f"refused publishes: {errors}"
    assert len(handled) == ITEMS
    assert "Traceback" not in log, log[-3000:]
    outages = log.count("event=database_unavailable")
    assert 1 <= outages <= KILLS, log[-3000:]
    assert log.count("event=database_back") == outages
    assert proc.running, "the component served on"
