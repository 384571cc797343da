"""Moving a queue between shards: the old shard lets go, the new shard takes it in.

Why here: a move (docs/scaling.md) touches a shard's store (what it holds in
memory), the placement table, the service (the new shard hands out the node's
waiting items) and the outbox, which only the composition of one shard's term
has together.

The old shard (:meth:`ShardMover.move`, run by the "Move node" admin command
on the shard that serves the node):

1. holds its store still (no transaction runs; the batch in flight finishes);
2. in one commit fenced by its lease rewrites the placement of the node's
   *family* (the node and every ``node/...`` node: dead letters stay beside their
   queue): ``shard`` = the new shard, ``epoch`` + 1;
3. loads its memory again, now without the family. Requests for the node that
   were waiting for the store fail to find it and are answered with the
   redirect (``xmpp/router.py``), as is every later request; clients re-send
   them to the new shard.

The new shard learns of it in two ways, whichever comes first: a request for a
node the placement table says is its own but memory lacks (the guard, see
``xmpp/redirect.py``), and a poll of the placement table every ``poll``
seconds (nodes moved here: ``epoch`` > 1). Either way it loads its memory again
(now with the family: items with their locks, deadlines and attempts,
subscriptions, dead letters; they are the same rows, only the placement changed)
and sweeps every node, which hands waiting items to the subscribers whose
windows have room. The ledger is one table for every shard: it continues.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xmpp_queue.core.placement import family
from xmpp_queue.storage.store_reload import reloaded_after

log = logging.getLogger("xmpp_queue.sharding")

POLL_SECONDS = 0.5


class MoveRefused(ValueError):
    """A move that cannot be made (names a wrong shard, a node not held here)."""


@dataclass
class ShardMover:
    """One shard term's side of moves (the module docstring)."""

    shard: str
    shards: Sequence[str]  # every shard of [shards], in config order
    store: Any  # storage.store.StateStore whose backend is a ShardBackend
    placements: Any  # storage.placement.PlacementTable
    service: Any  # core.service.PubSubService
    send_effects: Any  # runtime.outbox.Outbox.send
    poll: float = POLL_SECONDS

    def __post_init__(self) -> None:
        self._adopting = asyncio.Lock()
        # (node, epoch) placements already loaded for: a placement with no node
        # behind it (a name claimed, then moved, never created) loads nothing, and
        # must not cost a reload at every poll.
        self._tried: set[tuple[str, int]] = set()

    def targets(self) -> list[str]:
        """The shards a node of this one may move to."""
        return [s for s in self.shards if s != self.shard]

    async def move(self, node_id: str, to_shard: str) -> list[str]:
        """Move *node_id*'s family to *to_shard*; the node ids moved (module docstring)."""
        if to_shard not in self.targets():
            raise MoveRefused(
                f"'{to_shard}' is not another shard of this service "
                f"(one of: {', '.join(self.targets()) or 'none'})"
            )
        if node_id not in self.store.state.nodes:
            raise MoveRefused(f"'{node_id}' is not served by {self.shard}")
        name = family(node_id)
        moved: list[str] = await reloaded_after(
            self.store, lambda: self.store.backend.move_family(name, to_shard)
        )
        for node in moved:
            self.placements.forget(node)
        log.info(
            "event=nodes_moved from=%s to=%s family=%s nodes=%s",
            self.shard,
            to_shard,
            name,
            ",".join(moved),
        )
        return moved

    async def adopt(self) -> list[str]:
        """Load the nodes moved onto this shard that memory lacks; the ids taken in."""
        async with self._adopting:
            placed = await self.store.backend.moved_here()
            held = self.store.state.nodes
            missing = sorted(
                n for n, epoch in placed.items() if n not in held and (n, epoch) not in self._tried
            )
            if not missing:
                return []
            self._tried.update((n, placed[n]) for n in missing)

            async def nothing() -> None:
                return None

            await reloaded_after(self.store, nothing)
            for node in missing:
                self.placements.forget(node)
            taken = [n for n in missing if n in self.store.state.nodes]
            log.info("event=nodes_adopted shard=%s nodes=%s", self.shard, ",".join(taken))
            # Hand the adopted nodes' waiting items to their subscribers now.
            outcome = await self.service.sweep(every_node=True)
            self.send_effects(outcome.effects)
            return taken

    async def watch(self, stop: asyncio.Event) -> None:
        """Poll for nodes moved here until *stop* (module docstring)."""
        from xmpp_queue.core.errors import StorageUnavailable
        from xmpp_queue.storage.lease import DATABASE_ERRORS

        while not stop.is_set():
            try:
                await self.adopt()
            except (*DATABASE_ERRORS, StorageUnavailable) as exc:
                log.warning("event=adopt_failed shard=%s error=%s", self.shard, exc)
            except Exception:
                log.exception("event=adopt_failed shard=%s", self.shard)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.poll)
