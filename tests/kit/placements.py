"""An in-memory placement table for the directory and guard tests (no database).

The same answers as ``storage.placement.PlacementTable`` (whose SQL the storage
and integration tests run): ``owner``, ``claim`` (first claim wins) and
``listing`` (placed nodes that exist, with the requester's affiliation), and
one account's subscriptions and affiliations on placed nodes (the core's
``AccountRecords`` port, as ``subscriptions_of`` / ``affiliations_of``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xmpp_queue.core.model import Affiliation, AffiliationEntry, NodeConfig, Subscription, bare


@dataclass(frozen=True)
class Listed:
    node_id: str
    shard: str
    config: NodeConfig
    affiliation: Affiliation


@dataclass
class MemoryPlacements:
    placed: dict[str, str] = field(default_factory=dict)
    configs: dict[str, NodeConfig] = field(default_factory=dict)  # nodes that exist
    affiliations: dict[tuple[str, str], Affiliation] = field(default_factory=dict)
    reads: int = 0
    partition_of: dict[str, list[str]] = field(default_factory=dict)  # logical -> nodes
    subscriptions: list[Subscription] = field(default_factory=list)  # oldest first

    def node(self, node_id: str, shard: str, config: NodeConfig | None = None) -> None:
        """An existing node *node_id* on *shard*."""
        self.placed[node_id] = shard
        self.configs[node_id] = config or NodeConfig()

    async def owner(self, node_id: str) -> str | None:
        self.reads += 1
        return self.placed.get(node_id)

    async def claim(self, node_id: str, shard: str) -> str:
        return self.placed.setdefault(node_id, shard)

    async def listing(self, requester: str) -> list[Listed]:
        return [
            Listed(
                n,
                self.placed[n],
                config,
                self.affiliations.get((n, requester), Affiliation.NONE),
            )
            for n, config in sorted(self.configs.items())
            if n in self.placed
        ]

    # --- one account over every shard (all my subscriptions / affiliations) ------------

    async def subscriptions_of(self, account: str) -> list[Subscription]:
        return [s for s in self.subscriptions if s.node in self.placed and bare(s.jid) == account]

    async def affiliations_of(self, account: str) -> list[AffiliationEntry]:
        return [
            AffiliationEntry(node, jid, affiliation)
            for (node, jid), affiliation in sorted(self.affiliations.items())
            if jid == account and node in self.placed
        ]

    # --- partitioned queues (the directory's create and collection answers) ------------

    async def partitions(self, logical: str) -> list[tuple[str, str]]:
        return [(n, self.placed[n]) for n in self.partition_of.get(logical, [])]

    async def create_partitions(
        self,
        logical: str,
        placed: list[tuple[str, str]],
        config: NodeConfig,
        creator: str,
        owner: str | None,
    ) -> bool:
        names = [logical, *(n for n, _ in placed)]
        if any(n in self.placed for n in names) or logical in self.partition_of:
            return False
        for node, shard in placed:
            self.node(node, shard, config)
            if owner:
                self.affiliations[(node, owner)] = Affiliation.OWNER
        self.partition_of[logical] = [n for n, _ in placed]
        return True
