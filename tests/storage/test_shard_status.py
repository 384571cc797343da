"""``xmpp-queue status`` of a pool: who stands by now, on real PostgreSQL.

Found by the chaos test across shards: a killed process never removes its
``service_members`` rows, and status counted every standby row seen within 60 s,
so for a minute after each crash the sharded status listed the dead process as
"standing by for any shard" (``standbys: 4`` with two alive). A standby writes
its row at every attempt (every 0.25 s); one not seen for two lease terms could
not take over anyway, and is not listed.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import asyncpg
import pytest

from tests.kit.stores import empty_database
from xmpp_queue.config import parse_config
from xmpp_queue.sharding import shards_status
from xmpp_queue.storage.lease import MEMBER_KEPT_FOR, PostgresLease, asyncpg_dsn, lease_status

TTL = 5


def names() -> tuple[str, list[str]]:
    """A public name and three shards no other test uses (lease rows are never
    deleted between tests: each test takes names of its own)."""
    public = f"queue-{uuid.uuid4().hex[:8]}.example.org"
    return public, [f"p{n}.{public}" for n in range(3)]


@pytest.fixture
async def pg(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await empty_database("postgresql", request, tmp_path)


async def age(url: str, holder: str, seconds: int, names: list[str]) -> None:
    """As if *holder* had been killed *seconds* ago: its rows were last written then."""
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await conn.execute(
            "UPDATE service_members SET seen_at = now() - make_interval(secs => $2) "
            "WHERE holder = $1 AND name = ANY($3::text[])",
            holder,
            float(seconds),
            names,
        )
    finally:
        await conn.close()


async def test_a_standby_not_seen_for_two_terms_is_not_standing_by(pg: str) -> None:
    name = names()[1][0]
    leases = [PostgresLease(pg, name, holder=h, ttl=TTL) for h in ("a:1", "b:2", "c:3")]
    try:
        assert [await lease.try_acquire() for lease in leases] == [1, None, None]
        await age(pg, "c:3", 2 * TTL + 1, [name])  # c was killed a little over two terms ago
        status = await lease_status(pg, name)
        assert [m.holder for m in status.standbys(TTL)] == ["b:2"]
        await age(pg, "b:2", 2 * TTL - 2, [name])  # b is slow, but within two terms
        assert [m.holder for m in (await lease_status(pg, name)).standbys(TTL)] == ["b:2"]
    finally:
        for lease in leases:
            await lease.close()


async def test_the_sharded_status_lists_no_killed_process_as_a_standby(pg: str) -> None:
    public, shards = names()
    settings = parse_config(
        {
            "component": {"jid": public, "secret": "s"},
            "database": {"url": pg, "lease_seconds": TTL},
            "shards": {"domains": shards},
        }
    )
    held = {public: "a:1", shards[0]: "a:1", shards[1]: "b:2", shards[2]: "c:3"}
    leases = [PostgresLease(pg, n, holder=h, ttl=TTL) for n, h in held.items()]
    # d stands by for every name; e did too, until it was killed 30 s ago.
    waiting = [PostgresLease(pg, n, holder=h, ttl=TTL) for n in held for h in ("d:4", "e:5")]
    try:
        for lease in leases:
            assert await lease.try_acquire() is not None
        for lease in waiting:
            assert await lease.try_acquire() is None
        await age(pg, "e:5", 30, [public, *shards])
        text, serving = await shards_status(settings)
        assert serving, text
        assert "standbys: 1\n  d:4 standing by for any shard" in text, text
        assert "e:5" not in text, text
    finally:
        for lease in leases + waiting:
            await lease.close()


async def test_the_new_holder_clears_the_rows_of_processes_gone_for_a_day(pg: str) -> None:
    """A killed process never deletes its ``service_members`` row, and every restart
    is a new holder: without pruning, the table grows by a row per crash forever."""
    name = names()[1][0]
    first = [PostgresLease(pg, name, holder=h, ttl=TTL) for h in ("a:1", "b:2", "c:3")]
    try:
        assert [await lease.try_acquire() for lease in first] == [1, None, None]
        await age(pg, "a:1", int(MEMBER_KEPT_FOR) + 60, [name])  # a was killed a day ago
        await age(pg, "b:2", int(MEMBER_KEPT_FOR) - 600, [name])  # b: within the day
        # a's lease has run out too: c takes it and clears a's row, not b's.
        conn = await asyncpg.connect(asyncpg_dsn(pg))
        try:
            await conn.execute(
                "UPDATE leader_leases SET expires_at = now() - interval '1 second' WHERE name = $1",
                name,
            )
        finally:
            await conn.close()
        assert await first[2].try_acquire() == 2
        holders = {m.holder for m in (await lease_status(pg, name)).members}
        assert holders == {"b:2", "c:3"}
    finally:
        for lease in first:
            await lease.close()
