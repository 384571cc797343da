"""The placement table: which shard (component domain) serves each node.

Why a table on the shared PostgreSQL: every process of a sharded deployment
(docs/scaling.md) must agree on where a node lives, at every moment, without
talking to each other; the database already decides who serves a shard (the
lease, ``lease.py``), so it decides where a node lives too.

Who writes a row:

- the **directory** on the public name (``claim``) when a client creates a node
  there: it picks a shard (``core/placement.py``) and inserts the row if none
  exists; the node itself is created by the shard the client is redirected to;
- a **shard**, in the commit that creates a node (dead-letter nodes too) or
  deletes one, fenced by its lease (``shard_backend.py``); and before it creates
  a node no row names yet, a claim of its own, so two shards never both create
  one name.

Reads: a shard asks ``owner`` only for a node it does not hold (the error path:
a request for a node it does not serve is redirected), and caches the answer
for a moment; the directory asks for every node request it redirects. The
directory also reads one account's subscriptions and affiliations on every
placed node (``subscriptions_of``, ``affiliations_of``: the core's
``AccountRecords`` port), to answer "all my subscriptions / affiliations" for
every shard at once; what the shards have committed is what it lists. And
every shard's dashboard reads every placed queue's counts (``placed_queues``:
the core's ``DeploymentReader``, ``core/deployment.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from xmpp_queue.core.deployment import PlacedQueue
from xmpp_queue.core.model import (
    Affiliation,
    AffiliationEntry,
    NodeConfig,
    Subscription,
    SubscriptionState,
)
from xmpp_queue.storage import codec
from xmpp_queue.storage.item_values import utc, utc_opt
from xmpp_queue.storage.lease import DATABASE_ERRORS, asyncpg_dsn

log = logging.getLogger("xmpp_queue.storage.placement")

_OWNER = "SELECT shard FROM node_placement WHERE node_id = $1"
_CLAIM = """
INSERT INTO node_placement (node_id, shard, epoch, placed_at) VALUES ($1, $2, 1, now())
ON CONFLICT (node_id) DO NOTHING
"""
_LISTING = """
SELECT p.node_id, p.shard, n.config, a.affiliation
  FROM node_placement p
  JOIN nodes n ON n.node_id = p.node_id
  LEFT JOIN affiliations a ON a.node_id = p.node_id AND a.jid = $1
 ORDER BY p.node_id
"""
# One account's rows on every placed node: its bare JID and each of its full JIDs.
_ACCOUNT_SUBSCRIPTIONS = """
SELECT s.node_id, s.jid, s.subid, s.state, s.queue_requests, s.options, s.created_at,
       s.last_activity
  FROM subscriptions s
  JOIN node_placement p ON p.node_id = s.node_id
 WHERE s.jid = $1 OR starts_with(s.jid, $1 || '/')
 ORDER BY s.id
"""
_ACCOUNT_AFFILIATIONS = """
SELECT a.node_id, a.jid, a.affiliation
  FROM affiliations a
  JOIN node_placement p ON p.node_id = a.node_id
 WHERE a.jid = $1
 ORDER BY a.node_id
"""
# Every placed node with its item counts (the dashboard's deployment view); queue
# nodes are picked from the config in Python. The items are counted per node first
# (one grouped pass over the node_id index), then joined to the placed nodes.
_PLACED_COUNTS = """
WITH counts AS (
  SELECT node_id,
         count(*) FILTER (WHERE locked_by IS NULL) AS waiting,
         count(*) FILTER (WHERE locked_by IS NULL AND available_at > $1) AS delayed,
         count(*) FILTER (WHERE locked_by IS NOT NULL) AS in_flight,
         min(published_at) FILTER (WHERE locked_by IS NULL) AS oldest
    FROM items
   WHERE acked_at IS NULL
   GROUP BY node_id
), subs AS (
  SELECT node_id, count(*) AS subscribers FROM subscriptions GROUP BY node_id
)
SELECT p.node_id, p.shard, n.config,
       coalesce(c.waiting, 0) AS waiting, coalesce(c.delayed, 0) AS delayed,
       coalesce(c.in_flight, 0) AS in_flight, c.oldest,
       coalesce(s.subscribers, 0) AS subscribers
  FROM node_placement p
  JOIN nodes n ON n.node_id = p.node_id
  LEFT JOIN counts c ON c.node_id = p.node_id
  LEFT JOIN subs s ON s.node_id = p.node_id
 ORDER BY p.node_id
"""
_COUNTS = """
SELECT p.node_id, p.shard, n.config,
       count(i.seq) FILTER (WHERE i.locked_by IS NULL) AS waiting,
       count(i.seq) FILTER (WHERE i.locked_by IS NULL AND i.available_at > $1) AS delayed,
       count(i.seq) FILTER (WHERE i.locked_by IS NOT NULL) AS in_flight,
       min(i.published_at) FILTER (WHERE i.locked_by IS NULL) AS oldest,
       (SELECT count(*) FROM subscriptions s WHERE s.node_id = p.node_id) AS subscribers
  FROM node_placement p
  JOIN nodes n ON n.node_id = p.node_id
  LEFT JOIN items i ON i.node_id = p.node_id AND i.acked_at IS NULL
 GROUP BY p.node_id, p.shard, n.config
 ORDER BY p.node_id
"""
_COUNTS = "SELECT shard, count(*) FROM node_placement GROUP BY shard"
_PARTITIONS = """
SELECT node_id, shard FROM node_placement WHERE partition_of = $1
 ORDER BY length(node_id), node_id
"""
_TAKEN = "SELECT count(*) FROM node_placement WHERE node_id = ANY($1::text[]) OR partition_of = $2"
_NEW_NODE = "INSERT INTO nodes (node_id, config, creator, created_at) VALUES ($1, $2, $3, now())"
_NEW_OWNER = "INSERT INTO affiliations (node_id, jid, affiliation) VALUES ($1, $2, 'owner')"
_NEW_PARTITION = """
INSERT INTO node_placement (node_id, shard, epoch, placed_at, partition_of)
VALUES ($1, $2, 1, now(), $3)
"""


@dataclass(frozen=True, slots=True)
class ListedNode:
    """One node of the directory's disco#items: where it lives and what the
    requester may know of it (its configuration and the requester's affiliation)."""

    node_id: str
    shard: str
    config: NodeConfig
    affiliation: Affiliation


class PlacementTable:
    """Reads and claims on ``node_placement`` over one asyncpg connection.

    *cache_seconds*: how long an ``owner`` answer is kept (a shard asks on the
    error path only; a short cache keeps a client hammering a wrong JID from
    costing a query per request). A node's placement changes only by an explicit
    move, which will clear the caches it concerns.
    """

    def __init__(self, url: str, *, cache_seconds: float = 2.0) -> None:
        self._dsn = asyncpg_dsn(url)
        self._conn: asyncpg.Connection | None = None
        self._cache: dict[str, tuple[float, str | None]] = {}
        self.cache_seconds = cache_seconds
        # One connection carries one query at a time; the directory and a process's
        # shard terms ask concurrently.
        self._busy = asyncio.Lock()

    async def _connection(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            self._conn = await asyncpg.connect(self._dsn, timeout=10)
        return self._conn

    async def _fetch(self, query: str, *args: object) -> list[asyncpg.Record]:
        """One read, tried again once on a new connection (a read is safe to repeat)."""
        for attempt in (1, 2):
            try:
                async with self._busy:
                    conn = await self._connection()
                    return list(await conn.fetch(query, *args))
            except DATABASE_ERRORS:
                self._drop()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.terminate()
            self._conn = None

    async def owner(self, node_id: str) -> str | None:
        """The shard *node_id* is placed on, or None when it is placed nowhere."""
        now = time.monotonic()
        cached = self._cache.get(node_id)
        if cached is not None and now - cached[0] < self.cache_seconds:
            return cached[1]
        rows = await self._fetch(_OWNER, node_id)
        shard = str(rows[0]["shard"]) if rows else None
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[node_id] = (now, shard)
        return shard

    async def claim(self, node_id: str, shard: str) -> str:
        """Place *node_id* on *shard* unless it is placed already; the shard it is on."""
        for attempt in (1, 2):
            try:
                async with self._busy:
                    conn = await self._connection()
                    async with conn.transaction():
                        await conn.execute(_CLAIM, node_id, shard)
                        owner = await conn.fetchval(_OWNER, node_id)
                break
            except DATABASE_ERRORS:
                self._drop()
                if attempt == 2:
                    raise
        self._cache[node_id] = (time.monotonic(), str(owner))
        if owner == shard:
            log.info("event=node_placed node=%s shard=%s", node_id, shard)
        return str(owner)

    def forget(self, node_id: str) -> None:
        """Drop a cached answer (a redirect the client followed came back refused)."""
        self._cache.pop(node_id, None)

    async def listing(self, requester: str) -> list[ListedNode]:
        """Every existing placed node, with *requester*'s (bare JID) affiliation."""
        rows = await self._fetch(_LISTING, requester)
        return [
            ListedNode(
                str(r["node_id"]),
                str(r["shard"]),
                codec.decode_config(r["config"]),
                Affiliation(r["affiliation"]) if r["affiliation"] else Affiliation.NONE,
            )
            for r in rows
        ]

    async def subscriptions_of(self, account: str) -> list[Subscription]:
        """Subscriptions of *account* (bare JID) and its full JIDs on every placed
        node, oldest first (the core's ``AccountRecords``)."""
        rows = await self._fetch(_ACCOUNT_SUBSCRIPTIONS, account)
        return [
            Subscription(
                str(r["node_id"]),
                str(r["jid"]),
                str(r["subid"]),
                SubscriptionState(r["state"]),
                utc(r["created_at"]),
                r["queue_requests"],
                codec.decode_options(r["options"]),
                utc_opt(r["last_activity"]),
            )
            for r in rows
        ]

    async def affiliations_of(self, account: str) -> list[AffiliationEntry]:
        """*account*'s (bare JID) affiliations on every placed node, by node."""
        rows = await self._fetch(_ACCOUNT_AFFILIATIONS, account)
        return [
            AffiliationEntry(str(r["node_id"]), str(r["jid"]), Affiliation(r["affiliation"]))
            for r in rows
        ]

    async def partitions(self, logical: str) -> list[tuple[str, str]]:
        """(partition node, shard) of a partitioned queue, in partition order; empty
        when *logical* is not one."""
        rows = await self._fetch(_PARTITIONS, logical)
        return [(str(r[0]), str(r[1])) for r in rows]

    async def create_partitions(
        self,
        logical: str,
        placed: list[tuple[str, str]],
        config: NodeConfig,
        creator: str,
        owner: str | None,
    ) -> bool:
        """Create the partition nodes of *logical* ((node, shard) pairs) in one
        transaction: their node rows, the owner's affiliation and their placement
        rows (``partition_of``); the shards load them (``sharding_moves.py``: a
        node placed on a shard that memory lacks). False, and nothing written, when
        the logical name or a partition name is placed already.

        Written here, not by a shard, because no shard holds these nodes yet:
        their rows are written before any process loads them."""
        names = [logical, *(n for n, _ in placed)]
        async with self._busy:
            conn = await self._connection()
            try:
                async with conn.transaction():
                    if await conn.fetchval(_TAKEN, names, logical):
                        return False
                    text = codec.encode_config(config)
                    for node, shard in placed:
                        await conn.execute(_NEW_NODE, node, text, creator)
                        if owner:
                            await conn.execute(_NEW_OWNER, node, owner)
                        await conn.execute(_NEW_PARTITION, node, shard, logical)
            except DATABASE_ERRORS:
                self._drop()
                raise
        for node, shard in placed:
            self._cache[node] = (time.monotonic(), shard)
        log.info("event=partitions_created queue=%s partitions=%d", logical, len(placed))
        return True

    async def placed_queues(self, now: datetime) -> list[PlacedQueue]:
        """Every queue placed on any shard with its committed counts (the core's
        ``DeploymentReader``), by node name."""
        rows = await self._fetch(_PLACED_COUNTS, now)
        return [
            PlacedQueue(
                str(r["node_id"]),
                str(r["shard"]),
                int(r["waiting"]),
                int(r["delayed"]),
                int(r["in_flight"]),
                int(r["subscribers"]),
                utc_opt(r["oldest"]),
            )
            for r in rows
            if codec.decode_config(r["config"]).queue
        ]

    async def counts(self) -> dict[str, int]:
        """Nodes placed on each shard (``xmpp-queue status``)."""
        return {str(r[0]): int(r[1]) for r in await self._fetch(_COUNTS)}

    async def close(self) -> None:
        if self._conn is not None:
            try:
                await self._conn.close(timeout=2)
            except DATABASE_ERRORS:
                self._conn.terminate()
            self._conn = None
