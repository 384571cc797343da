"""A shard's PostgreSQL backend: only its own nodes, private id blocks, placement rows.

Why a backend of its own: in a sharded deployment (docs/scaling.md) several
active processes share one database, one per shard, and the store believes its
memory. Each shard must therefore

- **load only its nodes** (those ``node_placement`` names it for), with their
  affiliations, subscriptions, items and snapshots: a node is in exactly one
  process's memory, so exactly one process writes its rows;
- **never take another shard's ids**: ``items.seq`` and ``subscriptions.id``
  come from two sequences every shard shares, and each store hands them out
  from memory. At load a shard reserves a private block of each (an advisory
  lock makes the read-and-advance atomic between processes; the blocks are
  large enough for a term: 2^40 items, 2^32 subscriptions) and never moves the
  sequences again, so blocks never overlap. A new term takes a new block above
  every earlier one, so publish order (``seq``) still grows within each node;
- **write a node's placement with the node**: the commit that creates a node
  (a dead-letter node too) inserts its placement row, the commit that deletes it
  removes the row, both under the shard's fence. A node already placed on
  another shard makes the commit fail (a division by zero is the cheapest error
  PostgreSQL can be asked for): two shards never both write one node. Claims
  before a create (``placement.py``) keep that from happening in practice.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import asyncpg
from sqlalchemy import String, and_, bindparam, func, not_, select
from sqlalchemy.dialects import postgresql

from xmpp_queue.core.errors import NotActive
from xmpp_queue.storage import schema
from xmpp_queue.storage.backend_postgres import PostgresBackend
from xmpp_queue.storage.flush import Flush
from xmpp_queue.storage.lease import FENCE_CHECK, Fence
from xmpp_queue.storage.load import (
    AFFILIATION_FIELDS,
    ITEM_FIELDS,
    NODE_FIELDS,
    SNAPSHOT_FIELDS,
    SUBSCRIPTION_FIELDS,
    StateBuilder,
)
from xmpp_queue.storage.pg_steady import LOAD_PLANNER
from xmpp_queue.storage.sql_rows import postgres_when
from xmpp_queue.storage.sql_statements import (
    POSTGRES,
    _compile,
    coolable,
    delayed_waiting,
    expiring_waiting,
    keyed_waiting,
    load_schedule,
    plain_waiting,
)
from xmpp_queue.storage.state import MemoryState

log = logging.getLogger("xmpp_queue.storage.shard")

SEQ_BLOCK = 2**40  # item seqs one term of a shard may hand out
SUB_ID_BLOCK = 2**32  # subscription ids one term of a shard may hand out
_BLOCK_LOCK = 0x78717368  # the advisory lock key of the block reservation ("xqsh")


def _shard_loads() -> tuple[str, str, str, str, str, str, str, str, str, str]:
    """The load queries of ``backend_sql``, each limited to one shard's nodes ($1)
    (and given the ordered nodes ($2) where keyed waiting items load as seqs)."""
    from sqlalchemy.dialects.postgresql import asyncpg as asyncpg_dialect

    dialect = asyncpg_dialect.dialect()  # type: ignore[no-untyped-call]
    p = schema.placements
    mine = select(p.c.node_id).where(p.c.shard == bindparam("shard")).scalar_subquery()
    n, a, s, i, x = (
        schema.nodes,
        schema.affiliations,
        schema.subscriptions,
        schema.items,
        schema.snapshots,
    )
    shard = ("shard",)
    ordered = i.c.node_id == func.any(bindparam("ordered", type_=postgresql.ARRAY(String())))
    shard_ordered = ("shard", "ordered")
    return (
        _compile(
            select(*(n.c[f] for f in NODE_FIELDS)).where(n.c.node_id.in_(mine)), dialect, shard
        ),
        _compile(
            select(*(a.c[f] for f in AFFILIATION_FIELDS)).where(a.c.node_id.in_(mine)),
            dialect,
            shard,
        ),
        _compile(
            select(*(s.c[f] for f in SUBSCRIPTION_FIELDS))
            .where(s.c.node_id.in_(mine))
            .order_by(s.c.id),
            dialect,
            shard,
        ),
        _compile(
            select(*(i.c.payload.is_(None) if f == "payload" else i.c[f] for f in ITEM_FIELDS))
            .where(i.c.node_id.in_(mine), not_(coolable()), not_(and_(keyed_waiting(), ordered)))
            .order_by(i.c.seq),
            dialect,
            shard_ordered,
        ),
        _compile(  # plain waiting items as seqs: the cold tails (backlog.py)
            select(i.c.node_id, i.c.priority, func.array_agg(i.c.seq), func.sum(i.c.payload_size))
            .where(i.c.node_id.in_(mine), plain_waiting())
            .group_by(i.c.node_id, i.c.priority),
            dialect,
            shard,
        ),
        _compile(  # delayed ones as seqs, and their due times (tail.py, schedule.py)
            select(i.c.node_id, i.c.priority, func.array_agg(i.c.seq), func.sum(i.c.payload_size))
            .where(i.c.node_id.in_(mine), delayed_waiting())
            .group_by(i.c.node_id, i.c.priority),
            dialect,
            shard,
        ),
        _compile(
            load_schedule(dialect, and_(i.c.node_id.in_(mine), delayed_waiting())), dialect, shard
        ),
        _compile(
            load_schedule(
                dialect, and_(i.c.node_id.in_(mine), expiring_waiting(ordered)), expiry=True
            ),
            dialect,
            shard_ordered,
        ),
        _compile(  # unlocked members of ordering keys as (key, seqs) (ordered.py)
            select(
                i.c.node_id,
                i.c.ordering_key,
                func.array_agg(i.c.seq),
                func.sum(i.c.payload_size),
            )
            .where(i.c.node_id.in_(mine), keyed_waiting(), ordered)
            .group_by(i.c.node_id, i.c.ordering_key),
            dialect,
            shard_ordered,
        ),
        _compile(
            select(*(x.c[f] for f in SNAPSHOT_FIELDS)).where(x.c.node_id.in_(mine)), dialect, shard
        ),
    )


(
    LOAD_NODES,
    LOAD_AFFS,
    LOAD_SUBS,
    LOAD_ITEMS,
    LOAD_TAIL,
    LOAD_DELAYED,
    LOAD_SCHEDULE,
    LOAD_EXPIRY,
    LOAD_KEYED,
    LOAD_SNAPSHOTS,
) = _shard_loads()

# A block: above the sequence and above every stored id (a row written by hand
# or by an unsharded process may have passed the sequence).
_RESERVE = """
SELECT setval(pg_get_serial_sequence('{table}', '{column}'),
              GREATEST(COALESCE(pg_sequence_last_value(
                                    pg_get_serial_sequence('{table}', '{column}')), 0),
                       (SELECT COALESCE(max({column}), 0) FROM {table})) + $1)
"""
RESERVE_SEQS = _RESERVE.format(table="items", column="seq")
RESERVE_SUB_IDS = _RESERVE.format(table="subscriptions", column="id")

PLACE = """
INSERT INTO node_placement (node_id, shard, epoch, placed_at) VALUES ($1, $2, 1, now())
ON CONFLICT (node_id) DO NOTHING
"""
# Fails (division by zero) when the node is placed on another shard.
PLACED_HERE = "SELECT 1 / (shard = $2)::int FROM node_placement WHERE node_id = $1"
UNPLACE = "DELETE FROM node_placement WHERE node_id = $1 AND shard = $2"
# A move (docs/scaling.md): the family of $1 (the node, and every node named "$1/..."),
# placed on this shard ($2), is placed on $3 with its epoch counted up.
MOVE_FAMILY = """
UPDATE node_placement SET shard = $3, epoch = epoch + 1, placed_at = now()
 WHERE (node_id = $1 OR left(node_id, length($1) + 1) = $1 || '/') AND shard = $2
RETURNING node_id
"""
# Nodes placed on this shard by someone else: moved here (a node placed by its
# first claim has epoch 1), or a partition the directory created.
MOVED_HERE = """
SELECT node_id, epoch FROM node_placement
 WHERE shard = $1 AND (epoch > 1 OR partition_of IS NOT NULL)
"""


class NodeOnAnotherShard(Exception):
    """A commit would have written a node that another shard holds (refused whole)."""


class ShardBackend(PostgresBackend):
    """:class:`PostgresBackend` for one shard of a sharded deployment (module docstring)."""

    def __init__(self, url: str, fence: Fence | None, shard: str) -> None:
        super().__init__(url, fence)
        self.shard = shard

    async def _reserve_blocks(self) -> tuple[int, int]:
        """Take a private block of item seqs and subscription ids; their floors."""
        conn = await self._connection()
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _BLOCK_LOCK)
            seq_end = int(await conn.fetchval(RESERVE_SEQS, SEQ_BLOCK))
            sub_end = int(await conn.fetchval(RESERVE_SUB_IDS, SUB_ID_BLOCK))
        return seq_end - SEQ_BLOCK, sub_end - SUB_ID_BLOCK

    async def _load(self) -> MemoryState:
        builder = StateBuilder(postgres_when)
        try:
            seq_floor, sub_floor = await self._reserve_blocks()
            conn = await self._connection()
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                await conn.execute(LOAD_PLANNER)
                builder.nodes(await conn.fetch(LOAD_NODES, self.shard))
                builder.affiliations(await conn.fetch(LOAD_AFFS, self.shard))
                builder.subscriptions(await conn.fetch(LOAD_SUBS, self.shard))
                ordered = builder.ordered_nodes()
                builder.items(await conn.fetch(LOAD_ITEMS, self.shard, ordered))
                builder.tail(await conn.fetch(LOAD_TAIL, self.shard))
                builder.delayed(await conn.fetch(LOAD_DELAYED, self.shard))
                builder.keyed(await conn.fetch(LOAD_KEYED, self.shard, ordered))
                builder.schedule(await conn.fetch(LOAD_SCHEDULE, self.shard))
                builder.schedule(await conn.fetch(LOAD_EXPIRY, self.shard, ordered), expiry=True)
                builder.snapshots(await conn.fetch(LOAD_SNAPSHOTS, self.shard))
                for node_id, window in builder.dedup_nodes():
                    last = await conn.fetchval(POSTGRES.ledger_last, node_id)
                    if last is not None:
                        since = last - timedelta(seconds=window)
                        rows = await conn.fetch(POSTGRES.ledger_finished, node_id, since)
                        builder.finished(node_id, rows)
        except Exception as exc:
            raise self._lost(exc) from exc
        if builder.orphans:
            log.warning("event=orphan_rows count=%d action=ignored", builder.orphans)
        state = builder.finish(seq_floor, sub_floor)
        self._seq_end = seq_floor + SEQ_BLOCK
        self._sub_id_end = sub_floor + SUB_ID_BLOCK
        # The block is ours: the parent's per-commit sequence moves never run.
        self._seq_reserved = self._seq_end
        self._sub_id_reserved = self._sub_id_end
        log.info(
            "event=shard_loaded shard=%s nodes=%d seq_floor=%d",
            self.shard,
            len(state.nodes),
            seq_floor,
        )
        return state

    def _lost(self, exc: BaseException) -> BaseException:
        if isinstance(exc, asyncpg.DivisionByZeroError):  # PLACED_HERE refused the commit
            return NodeOnAnotherShard(f"a node of this commit is placed on another shard: {exc}")
        return super()._lost(exc)

    async def _reserve(self, conn: Any, flush: Flush) -> None:
        """Never move the shared sequences (they are past our block already)."""
        if flush.max_seq > self._seq_end or flush.max_sub_id > self._sub_id_end:
            raise RuntimeError(f"shard {self.shard} used up its id block; restart the term")

    async def move_family(self, family: str, to_shard: str) -> list[str]:
        """Place *family* (a node and its ``family/...`` nodes) on *to_shard*, in one
        commit fenced by this shard's lease; the node ids moved. The caller holds the
        store still (``store_reload.reloaded_after``): no commit of these nodes runs."""
        async with self._busy:
            try:
                conn = await self._connection()
                async with conn.transaction():
                    if self.fence is not None:
                        ours = await conn.fetchval(
                            FENCE_CHECK + " RETURNING 1", self.fence.name, self.fence.token
                        )
                        if ours is None:
                            raise NotActive(f"lease {self.fence.name} is no longer ours")
                    rows = await conn.fetch(MOVE_FAMILY, family, self.shard, to_shard)
            except NotActive:
                raise
            except Exception as exc:
                raise self._lost(exc) from exc
        return [str(r[0]) for r in rows]

    async def moved_here(self) -> dict[str, int]:
        """Nodes moved onto this shard (loaded or not), with their epochs: the new
        shard's poll."""
        rows = await self._read(lambda conn: conn.fetch(MOVED_HERE, self.shard))
        return {str(r[0]): int(r[1]) for r in rows}

    def _plan(self, flush: Flush) -> list[tuple[str, list[tuple[Any, ...]]]]:
        # Placement rows come with node upserts and deletes only, and a commit that
        # has those never takes the steady path (``pg_steady``), which skips _plan.
        placed = [(n.node_id, self.shard) for n in flush.node_upserts]
        removed = [(n, self.shard) for n in flush.node_deletes]
        head: list[tuple[str, list[tuple[Any, ...]]]] = []
        if placed:
            head += [(PLACE, list(placed)), (PLACED_HERE, list(placed))]
        if removed:
            head.append((UNPLACE, list(removed)))
        return head + super()._plan(flush)


async def open_shard_store(
    url: str, fence: Fence | None, shard: str, backlog_bytes: int | None = None
) -> Any:
    """A :class:`StateStore` holding *shard*'s nodes only (see the module docstring);
    *backlog_bytes* is the memory for whole waiting items (``[database]
    backlog_memory_mb``; None: the store's default)."""
    from xmpp_queue.storage.backlog import DEFAULT_BUDGET
    from xmpp_queue.storage.store import StateStore

    backend = ShardBackend(url, fence, shard)
    try:
        state = await backend.load()
    except BaseException:
        await backend.close()
        raise
    log.info("event=store_loaded shard=%s nodes=%d", shard, len(state.nodes))
    store = StateStore(backend, state, DEFAULT_BUDGET if backlog_bytes is None else backlog_bytes)
    store.start_id_fill()
    return store
