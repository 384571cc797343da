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


# --- where a node is: the xmpp: URI a redirect carries --------------------------------

_SAFE = "!$&'()*+,:@/-._~"  # RFC 3987 ipchar minus the separators of the query


def node_uri(service: str, node_id: str | None = None) -> str:
    """The XMPP URI (RFC 5122, XEP-0060's ``?;node=`` form) of *node_id* on *service*:
    ``xmpp:p1.queue.example.org?;node=jobs``; without a node, the service's URI."""
    from urllib.parse import quote

    if node_id is None:
        return f"xmpp:{service}"
    return f"xmpp:{service}?;node={quote(node_id, safe=_SAFE.replace(';', ''))}"


def parse_node_uri(uri: str) -> tuple[str, str | None]:
    """(service JID, node or None) of an ``xmpp:`` URI; ValueError if it is not one."""
    from urllib.parse import unquote

    text = uri.strip()
    if not text.startswith("xmpp:"):
        raise ValueError(f"not an xmpp: URI: {uri!r}")
    rest = text[5:].lstrip("/")
    service, _, query = rest.partition("?")
    if not service or "@" in service or "/" in service:
        raise ValueError(f"not a service URI: {uri!r}")
    node = None
    for part in query.split(";"):
        key, sep, value = part.partition("=")
        if sep and key == "node":
            node = unquote(value)
    return service, node
