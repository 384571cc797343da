"""Which shard a new node goes to: by a stable hash of the node's family name.

Why by hash and not by load: the choice must need no shared state and give the
same answer in every process (the directory may change hands at any moment),
and a node's helpers must land beside it. A node's *family* is its id up to the
first ``/``: ``jobs``, ``jobs/dead-letter`` and ``jobs/retry`` share one shard,
so a dead-letter move (one store operation) never crosses shards. The hash is
SHA-256 (Python's own ``hash`` of a string changes from process to process).

Load is not ignored for ever: a move between shards (planned, docs/scaling.md)
is how an operator rebalances; placement by hash only decides the first home.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def family(node_id: str) -> str:
    """The part of *node_id* that decides its shard (up to the first ``/``)."""
    return node_id.split("/", 1)[0]


def pick_shard(node_id: str, shards: Sequence[str]) -> str:
    """The shard a new node *node_id* is placed on, among *shards* (in config order).

    Stable: the same node and the same list give the same shard everywhere.
    """
    if not shards:
        raise ValueError("no shards to place a node on")
    digest = hashlib.sha256(family(node_id).encode("utf-8")).digest()
    return shards[int.from_bytes(digest[:8], "big") % len(shards)]
