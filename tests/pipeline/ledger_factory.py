"""A small, seeded ledger with every kind of history the report must read.

It simulates items going through queues the way the service records them:
published, delivered to a worker, then acked, unlocked (nack), expired (lock
timeout), extended, dead-lettered after too many deliveries, retracted by the
publisher or purged; some items stay queued or in flight, one id is published
again while queued (a replace) and others are reused after an ack (a second
lifecycle). Rows come out in time order with ids in that order, like the
service's single writer appends them.

Topics as the service records them: ``mail`` and ``reports/eu`` are queues bound
to the topic ``billing`` (``jobs`` is not), so their ``published`` rows name it
(a fan-out copy's reason), and a topic item a bound queue's filter kept out is
counted, not listed: a ``filtered`` row with no item id, the count in
``deliveries`` and the topic as reason (one per committed batch in the service).

Details come as the service writes them: most published rows carry the
publisher's attributes (a JSON object; some none at all), unlocks and expiries
a failure reason (some nacks none), dead letters and drops theirs. They are
drawn from a second generator, so the history itself is the same as before
details existed.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from xmpp_queue.core.ledger import EventKind as K

START = datetime(2024, 3, 1, 10, 0, 0, tzinfo=UTC)
NODES = ("jobs", "mail", "reports/eu")
WORKERS = tuple(f"worker{i}@example.org/w" for i in range(1, 5))
TOPIC_OF = {"mail": "billing", "reports/eu": "billing"}
"""The queues bound to a topic (``pubsub#queue_topic``); ``jobs`` is unbound."""


@dataclass(frozen=True, slots=True)
class Row:
    id: int
    at: datetime
    kind: str
    node: str
    item_id: str
    subscriber: str | None
    deliveries: int
    payload_size: int
    attributes: str | None = None
    reason: str | None = None

    def as_tuple(self) -> tuple[object, ...]:
        return (
            self.id,
            self.at,
            self.kind,
            self.node,
            self.item_id,
            self.subscriber,
            self.deliveries,
            self.payload_size,
            self.attributes,
            self.reason,
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "at": self.at,
            "kind": self.kind,
            "node": self.node,
            "item_id": self.item_id,
            "subscriber": self.subscriber,
            "deliveries": self.deliveries,
            "payload_size": self.payload_size,
            "attributes": self.attributes,
            "reason": self.reason,
        }


def _micros(rng: random.Random, low: float, high: float) -> timedelta:
    return timedelta(microseconds=rng.randint(int(low * 1e6), int(high * 1e6)))


def _item_history(
    rng: random.Random, node: str, item_id: str, start: datetime
) -> tuple[list[tuple[datetime, str, str | None, int]], datetime]:
    """Events of one lifecycle: (at, kind, subscriber, deliveries); and its end time."""
    events: list[tuple[datetime, str, str | None, int]] = [(start, K.PUBLISHED, None, 0)]
    t = start
    fate = rng.random()
    if fate < 0.04:  # still queued, never delivered
        return events, t
    if fate < 0.06:  # topic items a bound queue's filter kept out: a counted row
        return [(start, K.FILTERED, None, 0)], t
    if fate < 0.09:  # waited past its expiry on a node that drops
        t += _micros(rng, 5, 60)
        events.append((t, K.DROPPED, None, 0))
        return events, t
    if fate < 0.12:  # retracted by its publisher before anyone took it
        t += _micros(rng, 0.5, 20)
        events.append((t, K.RETRACTED, None, 0))
        return events, t
    if fate < 0.13:  # replaced while queued: a second publish of the same id
        t += _micros(rng, 0.1, 5)
        events.append((t, K.PUBLISHED, None, 0))
    deliveries = 0
    while True:
        t += _micros(rng, 0.01, 40)
        deliveries += 1
        worker = rng.choice(WORKERS)
        events.append((t, K.DELIVERED, worker, deliveries))
        if rng.random() < 0.1:
            t += _micros(rng, 1, 30)
            events.append((t, K.EXTENDED, worker, deliveries))
        roll = rng.random()
        t += _micros(rng, 0.05, 90)
        if roll < 0.05:  # in flight at the end of the data
            return events, t
        if roll < 0.55:
            events.append((t, K.ACKED, worker, deliveries))
            if rng.random() < 0.15:  # the publisher's retry, inside the dedup window
                t += _micros(rng, 0.01, 2)
                events.append((t, K.DEDUPLICATED, None, 0))
            # Retention's rows, from a stream of their own (the main one stays as it was).
            side = random.Random(f"{node}/{item_id}/{start.isoformat()}")
            retention = side.random()
            if retention < 0.08:  # retained, then its retention ended
                t += _micros(side, 60, 120)
                events.append((t, K.RETENTION_ENDED, None, deliveries))
            elif retention < 0.16:  # retained, then a seek: waiting again at the end
                t += _micros(side, 1, 60)
                events.append((t, K.REPLAYED, None, 0))
            elif retention < 0.22:  # the owner took a snapshot (a row of the node)
                t += _micros(side, 0.01, 1)
                events.append((t, K.SNAPSHOT, None, 0))
            return events, t
        if roll < 0.75:
            events.append((t, K.UNLOCKED, worker, deliveries))
        elif roll < 0.95:
            events.append((t, K.EXPIRED, worker, deliveries))
        else:
            events.append((t, K.PURGED, None, deliveries))
            return events, t
        if deliveries >= 3:
            t += _micros(rng, 0, 1)
            events.append((t, K.DEAD_LETTERED, None, deliveries))
            return events, t


def simulate_ledger(seed: int = 7, items: int = 60, start: datetime = START) -> list[Row]:
    rng = random.Random(seed)
    raw: list[tuple[datetime, str, str, str, str | None, int, int]] = []
    for n in range(items):
        node = rng.choice(NODES)
        item_id = f"item-{n}"
        t0 = start + _micros(rng, 0, 900)
        history, end = _item_history(rng, node, item_id, t0)
        size = rng.randint(20, 900)
        raw += [(at, kind, node, item_id, sub, d, size) for at, kind, sub, d in history]
        if history[-1][1] == K.ACKED and rng.random() < 0.25:  # id reused later
            again, _ = _item_history(rng, node, item_id, end + _micros(rng, 1, 60))
            raw += [(at, kind, node, item_id, sub, d, size) for at, kind, sub, d in again]
    raw.sort(key=lambda r: r[0])
    rows = [
        Row(i + 1, at, str(kind), node, item_id, sub, d, size)
        for i, (at, kind, node, item_id, sub, d, size) in enumerate(raw)
    ]
    details = random.Random(seed + 1)
    rows = [with_details(details, row) for row in rows]
    counts = random.Random(f"filtered/{seed}")
    rows = [as_topic_row(counts, row) for row in rows]
    # An unused bound queue deleted (pubsub#queue_expire_after): a row of the node,
    # after every other and from a stream of its own, so no row above moves.
    unused = random.Random(f"unused/{seed}")
    last = rows[-1].at if rows else start
    node = unused.choice(NODES)
    at = last + _micros(unused, 1, 60)
    rows.append(Row(len(rows) + 1, at, str(K.EXPIRED_UNUSED), node, "", None, 0, 0, None, "600"))
    return rows


def as_topic_row(rng: random.Random, row: Row) -> Row:
    """*row* as the service writes it for a queue bound to a topic (see the module doc):
    a copy's ``published`` row names its topic; a ``filtered`` row is a count on a
    bound queue (one drawn for ``jobs``, which is bound to nothing, goes to ``mail``)."""
    if row.kind == K.PUBLISHED and row.node in TOPIC_OF:
        return replace(row, reason=TOPIC_OF[row.node])
    if row.kind == K.FILTERED:
        node = row.node if row.node in TOPIC_OF else "mail"
        n = rng.randint(1, 9)
        return replace(row, node=node, item_id="", deliveries=n, reason=TOPIC_OF[node])
    return row


TENANTS = ("acme", "globex", "initech", "umbrella")
NACKS = ("ValueError: bad row", "TimeoutError: upstream", "KeyError: 'sku'")


def with_details(rng: random.Random, row: Row) -> Row:
    """*row* with the attributes or reason the service would have written."""
    if row.kind == K.PUBLISHED:
        if rng.random() < 0.15:
            return row  # published without attributes
        attributes = {"tenant": rng.choice(TENANTS)}
        if rng.random() < 0.4:
            attributes["Urgency"] = rng.choice(("high", "low"))
        if rng.random() < 0.3:
            attributes["source"] = f"batch-{rng.randint(1, 3)}"
        return replace(row, attributes=json.dumps(attributes, sort_keys=True))
    if row.kind == K.UNLOCKED:
        return replace(row, reason=None if rng.random() < 0.2 else rng.choice(NACKS))
    if row.kind == K.EXPIRED:
        return replace(row, reason="lock timeout")
    if row.kind == K.DEAD_LETTERED:
        return replace(row, reason=rng.choice(("max-deliveries", "max-deliveries", "rejected")))
    if row.kind == K.DROPPED:
        return replace(row, reason=rng.choice(("expired", "truncated")))
    return row
