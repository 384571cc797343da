"""An in-memory placement table for the directory and guard tests (no database).

The same answers as ``storage.placement.PlacementTable`` (whose SQL the storage
and integration tests run): ``owner``, ``claim`` (first claim wins) and
``listing`` (placed nodes that exist, with the requester's affiliation).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xmpp_queue.core.model import Affiliation, NodeConfig


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
