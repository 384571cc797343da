"""One page of the queue overview: filtered, sorted and paged on the server.

Why on the server: with hundreds of queues, sending every queue with two rate
series each second to every open dashboard is megabytes a minute, and the
browser would redraw hundreds of rows it does not show. ``/api/queues`` takes
``q`` (a substring of the node name, case-insensitive), ``sort`` (a column of
:data:`SORTABLE`), ``desc`` (``1``: largest first), ``offset`` and ``limit``
(at most :data:`MOST`); without ``limit`` it answers every queue (scripts and
the earlier page). Sorting is stable, with the node name breaking ties, so a
row does not jump between polls when figures are equal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xmpp_queue.core.reports import QueueSummary

SORTABLE = {
    "node": lambda r: r.node,
    "waiting": lambda r: r.backlog,
    "delayed": lambda r: r.delayed,
    "in_flight": lambda r: r.in_flight,
    "dead_letters": lambda r: r.dead_letters,
    "oldest_waiting_seconds": lambda r: r.oldest_waiting_seconds or 0.0,
    "subscribers": lambda r: r.subscribers,
    "acks_last_hour": lambda r: r.acks_last_hour,
    "redeliveries_last_hour": lambda r: r.redeliveries_last_hour,
}
MOST = 500
"""Rows one page may ask for."""


class BadQuery(ValueError):
    """A query parameter out of range, named in the message (answered 400)."""


@dataclass(frozen=True, slots=True)
class OverviewPage:
    rows: list[QueueSummary]
    matched: int
    total: int
    offset: int
    limit: int | None


def _int(query: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit():
        raise BadQuery(f"{name} must be a whole number, not {raw!r}")
    return int(raw)


def overview_page(rows: Sequence[QueueSummary], query: Mapping[str, str]) -> OverviewPage:
    """The rows *query* asks for; raises :class:`BadQuery`."""
    text = query.get("q", "").strip().lower()
    sort = query.get("sort", "node")
    if sort not in SORTABLE:
        raise BadQuery(f"sort must be one of {', '.join(SORTABLE)}, not {sort!r}")
    offset = _int(query, "offset", 0) or 0
    limit = _int(query, "limit", None)
    if limit is not None and not 1 <= limit <= MOST:
        raise BadQuery(f"limit must be 1 to {MOST}")
    matched = [r for r in rows if text in r.node.lower()] if text else list(rows)
    matched.sort(key=lambda r: r.node)
    key: Any = SORTABLE[sort]
    matched.sort(key=key, reverse=query.get("desc") == "1")
    chosen = matched[offset:] if limit is None else matched[offset : offset + limit]
    return OverviewPage(chosen, len(matched), len(rows), offset, limit)
