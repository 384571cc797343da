"""The report's aggregates computed in plain Python, to check the Spark ones.

Written from the definitions in ``xmpp_queue/pipeline/analytics.py``'s
docstring, without Spark and without sharing its code: dicts, loops and sorted
lists. Percentiles follow ``percentile_approx``'s definition, which is exact on
data this small: the smallest value with at least p of the values at or below.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tests.pipeline.ledger_factory import Row
from xmpp_queue.core.ledger import EventKind as K

REMOVING = {K.ACKED, K.DEAD_LETTERED, K.RETRACTED, K.PURGED, K.DROPPED}
NOT_AN_ITEM = {
    K.DEDUPLICATED,
    K.FILTERED,
    K.REPLAYED,
    K.RETENTION_ENDED,
    K.SNAPSHOT,
    K.EXPIRED_UNUSED,
}
ARRIVING = {K.PUBLISHED, K.REPLAYED}  # into the backlog
KINDS = [k.value for k in K]


def seconds(start: datetime, end: datetime) -> float:
    delta = end - start
    micros = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    return micros / 1_000_000.0


def percentile(values: Sequence[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


@dataclass
class Lifecycle:
    node: str
    item_id: str
    cycle: int
    published_at: datetime | None = None
    first_delivered_at: datetime | None = None
    last_delivered_at: datetime | None = None
    ended_at: datetime | None = None
    outcome: str = "queued"
    handler: str | None = None
    delivered: int = 0
    unlocks: int = 0
    expiries: int = 0
    max_deliveries: int = 0
    last_seen_at: datetime | None = None
    holders: set[str] = field(default_factory=set)

    @property
    def deliveries(self) -> int:
        return max(self.max_deliveries, self.delivered)

    @property
    def wait_s(self) -> float | None:
        if self.published_at and self.first_delivered_at:
            return seconds(self.published_at, self.first_delivered_at)
        return None

    @property
    def handling_s(self) -> float | None:
        if self.outcome == K.ACKED and self.last_delivered_at and self.ended_at:
            return seconds(self.last_delivered_at, self.ended_at)
        return None

    @property
    def end_to_end_s(self) -> float | None:
        if self.outcome == K.ACKED and self.published_at and self.ended_at:
            return seconds(self.published_at, self.ended_at)
        return None


def lifecycles(rows: Iterable[Row]) -> dict[tuple[str, str, int], Lifecycle]:
    by_item: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in rows:
        by_item[(row.node, row.item_id)].append(row)
    result: dict[tuple[str, str, int], Lifecycle] = {}
    for (node, item_id), events in by_item.items():
        cycle = 0
        for row in sorted(events, key=lambda r: r.id):
            if row.kind in NOT_AN_ITEM:
                continue  # a repeat publish, a filtered topic item, retention: no lifecycle
            key = (node, item_id, cycle)
            life = result.setdefault(key, Lifecycle(node, item_id, cycle))
            life.max_deliveries = max(life.max_deliveries, row.deliveries)
            life.last_seen_at = row.at
            if row.kind == K.PUBLISHED and life.published_at is None:
                life.published_at = row.at
            elif row.kind == K.DELIVERED:
                life.delivered += 1
                life.first_delivered_at = life.first_delivered_at or row.at
                life.last_delivered_at = row.at
                if row.subscriber:
                    life.holders.add(row.subscriber)
            elif row.kind == K.UNLOCKED:
                life.unlocks += 1
            elif row.kind == K.EXPIRED:
                life.expiries += 1
            if row.kind in REMOVING:
                life.ended_at = row.at
                life.outcome = row.kind
                if row.kind == K.ACKED:
                    life.handler = row.subscriber
                cycle += 1
    return result


def bucket_of(at: datetime, bucket_seconds: int) -> int:
    return math.floor(at.timestamp()) // bucket_seconds * bucket_seconds


def node_buckets(
    rows: Sequence[Row], bucket_seconds: int, opening: dict[str, int] | None = None
) -> dict[tuple[str, int], dict[str, int]]:
    """{(node, bucket epoch seconds): {kind: n, ..., "backlog": n}}."""
    counts: dict[tuple[str, int], dict[str, int]] = defaultdict(lambda: dict.fromkeys(KINDS, 0))
    span: dict[str, list[int]] = {}
    for row in rows:
        b = bucket_of(row.at, bucket_seconds)
        # a filtered row is a count of items (the service writes one per batch)
        # (one from before the counts, deliveries 0, is one item)
        counts[(row.node, b)][row.kind] += max(row.deliveries, 1) if row.kind == K.FILTERED else 1
        lo_hi = span.setdefault(row.node, [b, b])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], b), max(lo_hi[1], b)
    result = {}
    for node, (lo, hi) in span.items():
        backlog = (opening or {}).get(node, 0)
        for b in range(lo, hi + 1, bucket_seconds):
            row = dict(counts.get((node, b), dict.fromkeys(KINDS, 0)))
            backlog += sum(row[k] for k in ARRIVING) - sum(row[k] for k in REMOVING)
            row["backlog"] = backlog
            result[(node, b)] = row
    return result


def bound_queues(rows: Iterable[Row]) -> dict[tuple[str, str], tuple[int, int]]:
    """{(topic, queue): (items copied in, items its filter kept out)}."""
    result: dict[tuple[str, str], tuple[int, int]] = {}
    for row in rows:
        if row.reason is None or row.kind not in (K.PUBLISHED, K.FILTERED):
            continue
        copied, filtered = result.get((row.reason, row.node), (0, 0))
        if row.kind == K.PUBLISHED:
            copied += 1
        else:
            filtered += row.deliveries
        result[(row.reason, row.node)] = (copied, filtered)
    return result


def opening_backlog(rows: Iterable[Row]) -> dict[str, int]:
    result: dict[str, int] = defaultdict(int)
    for row in rows:
        if row.kind in ARRIVING:
            result[row.node] += 1
        elif row.kind in REMOVING:
            result[row.node] -= 1
    return dict(result)


def latency(lives: Iterable[Lifecycle]) -> dict[tuple[str, str], dict[str, float | int | None]]:
    samples: dict[tuple[str, str], list[float]] = defaultdict(list)
    nodes = set()
    for life in lives:
        nodes.add(life.node)
        for measure in ("wait", "handling", "end_to_end"):
            value = getattr(life, f"{measure}_s")
            if value is not None:
                samples[(life.node, measure)].append(value)
    result = {}
    for node in nodes:
        for measure in ("wait", "handling", "end_to_end"):
            values = samples.get((node, measure), [])
            result[(node, measure)] = {
                "samples": len(values),
                "p50": percentile(values, 0.5),
                "p95": percentile(values, 0.95),
                "p99": percentile(values, 0.99),
                "mean": sum(values) / len(values) if values else None,
                "max": max(values) if values else None,
            }
    return result


def workers(rows: Iterable[Row], lives: Iterable[Lifecycle]) -> dict[str, dict[str, object]]:
    stats: dict[str, dict[str, object]] = {}
    nodes: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        if row.subscriber is None:
            continue
        s = stats.setdefault(
            row.subscriber, {"deliveries": 0, "handled": 0, "unlocked": 0, "expired": 0}
        )
        nodes[row.subscriber].add(row.node)
        key = {
            K.DELIVERED: "deliveries",
            K.ACKED: "handled",
            K.UNLOCKED: "unlocked",
            K.EXPIRED: "expired",
        }.get(K(row.kind))
        if key:
            s[key] = int(s[key]) + 1  # type: ignore[call-overload]
    handling: dict[str, list[float]] = defaultdict(list)
    for life in lives:
        if life.handling_s is not None and life.handler:
            handling[life.handler].append(life.handling_s)
    for worker, s in stats.items():
        d = int(s["deliveries"])  # type: ignore[call-overload]
        s["unlock_rate"] = int(s["unlocked"]) / d if d else None  # type: ignore[call-overload]
        s["timeout_rate"] = int(s["expired"]) / d if d else None  # type: ignore[call-overload]
        s["nodes"] = len(nodes[worker])
        values = handling.get(worker, [])
        s["handling_p50"] = percentile(values, 0.5)
        s["handling_p95"] = percentile(values, 0.95)
        s["handling_p99"] = percentile(values, 0.99)
    return stats


def poison(lives: Iterable[Lifecycle], min_deliveries: int, limit: int) -> list[Lifecycle]:
    picked = [life for life in lives if life.deliveries >= min_deliveries]
    picked.sort(
        key=lambda x: (-x.deliveries, -(x.unlocks + x.expiries), x.node, x.item_id, x.cycle)
    )
    return picked[:limit]


def shift(rows: Sequence[Row], delta: timedelta) -> list[Row]:
    return [
        Row(
            r.id,
            r.at + delta,
            r.kind,
            r.node,
            r.item_id,
            r.subscriber,
            r.deliveries,
            r.payload_size,
            r.attributes,
            r.reason,
        )
        for r in rows
    ]


# --- details: attributes of published rows, reasons ------------------------------------------

CATEGORY = {
    K.UNLOCKED: "failure",
    K.EXPIRED: "failure",
    K.DEAD_LETTERED: "dead_letter",
    K.DROPPED: "dropped",
}


def _ranked(counts: dict[tuple[str, ...], int], top: int, groups: int) -> list[tuple[object, ...]]:
    """(group..., rest..., n, rank): the *top* largest counts of each group (the
    first *groups* parts of the key), most first, ties by the key's text."""
    by_group: dict[tuple[str, ...], list[tuple[tuple[str, ...], int]]] = defaultdict(list)
    for key, n in counts.items():
        by_group[key[:groups]].append((key, n))
    out: list[tuple[object, ...]] = []
    for entries in by_group.values():
        entries.sort(key=lambda e: (-e[1], e[0][groups:]))
        out += [(*key, n, rank) for rank, (key, n) in enumerate(entries[:top], start=1)]
    return out


def attribute_keys(rows: Iterable[Row], top: int) -> set[tuple[object, ...]]:
    """{(node, key, items, rank)}."""
    counts: dict[tuple[str, ...], int] = defaultdict(int)
    for row in rows:
        if row.kind == K.PUBLISHED and row.attributes:
            for key in json.loads(row.attributes):
                counts[(row.node, key)] += 1
    return set(_ranked(counts, top, 1))


def attribute_values(rows: Iterable[Row], top: int) -> set[tuple[object, ...]]:
    """{(node, key, value, items, rank)}."""
    counts: dict[tuple[str, ...], int] = defaultdict(int)
    for row in rows:
        if row.kind == K.PUBLISHED and row.attributes:
            for key, value in json.loads(row.attributes).items():
                counts[(row.node, key, value)] += 1
    return set(_ranked(counts, top, 1))


def reasons(rows: Iterable[Row], top: int) -> set[tuple[object, ...]]:
    """{(node, category, reason, n, rank)}."""
    counts: dict[tuple[str, ...], int] = defaultdict(int)
    for row in rows:
        category = CATEGORY.get(K(row.kind))
        if category and row.reason is not None:
            counts[(row.node, category, row.reason)] += 1
    return set(_ranked(counts, top, 2))
