"""What the dashboard and ``/metrics`` read: the queues, one queue, its dead letters.

Every figure comes from the service's admin reads (``queue_overview``,
``queue_details``, ``get_items``) made as the system actor, exactly as the
XEP-0050 "Queue overview" and "Queue details" commands make them, so the web
page, the scrape and ``xmpp-queue admin list`` never disagree.

The overview is cached for ``max_age`` seconds and shared by concurrent
requests: several open dashboards and a scraper then cost one read, not one
each (each read is an operation of the commit batcher, in line with the
publishes and acks).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from xmpp_queue.core.attributes import RESERVED
from xmpp_queue.core.errors import NodeNotFound
from xmpp_queue.core.model import SYSTEM, Item, PageRequest
from xmpp_queue.core.queue.deadlines import dead_letter_node
from xmpp_queue.core.queue.failures import LAST_ERROR, history
from xmpp_queue.core.reports import QueueDetails, QueueSummary
from xmpp_queue.core.service import PubSubService
from xmpp_queue.http.single_flight import SingleFlight

log = logging.getLogger("xmpp_queue.http.queues")

ITEMS_SHOWN = 50
"""Items of a queue listed on its page, oldest first (the counts are exact)."""
PAYLOAD_SHOWN = 2048
"""Characters of a payload shown (the size column says how big it is)."""
MAX_ROWS = 200
"""Locks and dead letters shown on a queue's page (the counts are always exact)."""


class OverviewCache:
    """``queue_overview`` at most once per ``max_age`` seconds, shared by callers."""

    def __init__(
        self,
        service: PubSubService,
        max_age: float = 0.5,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._service = service
        self._max_age = max_age
        self._monotonic = monotonic
        self._rows: list[QueueSummary] = []
        self._at = float("-inf")
        self._reads: SingleFlight[list[QueueSummary]] = SingleFlight()

    async def rows(self, fresh: bool = False, stale: float = 0.0) -> list[QueueSummary]:
        """The overview, at most ``max_age`` old; with *stale* > 0 (``/metrics``),
        rows up to *stale* seconds old come back at once while a fresh read runs in
        the background: a scrape under load does not wait for the overview (it took
        0.4 s of each scrape); the per-queue gauges are then those of the read the
        previous scrape started (or the dashboard's, when one is open)."""
        age = self._monotonic() - self._at
        if not fresh and age < self._max_age:
            return self._rows
        if not fresh and age < stale:
            self._reads.begin(self._refresh)
            return self._rows
        rows = await self._reads.join(lambda: self._service.queue_overview(SYSTEM))
        self._rows, self._at = rows, self._monotonic()
        return rows

    async def _refresh(self) -> list[QueueSummary]:
        try:
            rows = await self._service.queue_overview(SYSTEM)
        except Exception:  # nobody awaits a background read: keep the rows, say why once
            log.exception("event=overview_refresh_failed")
            return self._rows
        self._rows, self._at = rows, self._monotonic()
        return rows


def _seconds(later: datetime, earlier: datetime | None) -> float | None:
    return None if earlier is None else round((later - earlier).total_seconds(), 3)


def summary_json(row: QueueSummary) -> dict[str, Any]:
    return {
        "node": row.node,
        "waiting": row.backlog,
        "delayed": row.delayed,
        "in_flight": row.in_flight,
        "subscribers": row.subscribers,
        "oldest_waiting_seconds": row.oldest_waiting_seconds,
        "dead_letters": row.dead_letters,
        "acks_last_hour": row.acks_last_hour,
        "redeliveries_last_hour": row.redeliveries_last_hour,
    }


def lock_json(item: Item, now: datetime) -> dict[str, Any]:
    return {
        "item": item.item_id,
        "holder": item.lock_jid,
        "subid": item.locked_by,
        "locked_seconds": _seconds(now, item.locked_at),
        "deadline_in_seconds": (
            None if item.lock_expires_at is None else _seconds(item.lock_expires_at, now)
        ),
        "deliveries": item.deliveries,
        **failures_json(item),
        "attributes": publisher_attributes(item),
    }


def failures_json(item: Item) -> dict[str, Any]:
    """Why its deliveries failed (``core/queue/failures.py``): the last reason and
    the bounded history, oldest first."""
    return {"last_error": item.headers.get(LAST_ERROR), "errors": history(item.headers)}


def publisher_attributes(item: Item) -> dict[str, str]:
    """The item's attributes as its publisher gave them (without the service's own
    headers, such as a dead letter's ``reason``, shown in their own columns)."""
    return {k: v for k, v in item.headers.items() if k not in RESERVED}


def _cut(payload: str | None) -> str | None:
    return None if payload is None else payload[:PAYLOAD_SHOWN]


def item_json(item: Item, now: datetime) -> dict[str, Any]:
    """A stored item as the queue page lists it (the admin peek's row)."""
    delayed = item.available_at is not None and item.available_at > now
    return {
        "item": item.item_id,
        "state": "locked" if item.locked_by else "delayed" if delayed else "waiting",
        "holder": item.lock_jid,
        "deliveries": item.deliveries,
        "age_seconds": _seconds(now, item.published_at),
        "size": item.payload_size,
        "attributes": publisher_attributes(item),
        "payload": _cut(item.payload),
    }


def dead_letter_json(item: Item) -> dict[str, Any]:
    h = item.headers
    return {
        "item": item.item_id,
        "origin_item": h.get("origin-item", item.item_id),
        "deliveries": int(h["deliveries"]) if h.get("deliveries", "").isdigit() else None,
        "reason": h.get("reason"),
        "dead_lettered_at": h.get("dead-lettered-at"),
        **failures_json(item),
        "size": item.payload_size,
        "attributes": publisher_attributes(item),
    }


def details_json(
    d: QueueDetails,
    now: datetime,
    activity: Mapping[tuple[str, str], datetime] | None = None,
) -> dict[str, Any]:
    """*activity*: each subscriber's last delivery, ack or nack on this node (the
    metrics' record); its idle time counts from that, or from subscribing."""
    seen = activity or {}

    def last(jid: str, subscribed: datetime | None) -> datetime | None:
        latest = seen.get((d.node, jid))
        if subscribed is None or (latest is not None and latest > subscribed):
            return latest
        return subscribed

    c = d.config
    return {
        "node": d.node,
        "title": c.title,
        "waiting": d.backlog,
        "delayed": d.delayed,
        "in_flight": len(d.locks),
        "config": {
            "lock_timeout": c.queue_lock_timeout,
            "max_deliveries": c.queue_max_deliveries,
            "retry_delay": c.queue_retry_delay,
            "retry_delay_max": c.queue_retry_delay_max,
            "dead_letter": dead_letter_node(d.node, c),
            "ordered": c.queue_ordered,
            "single_active": c.queue_single_active,
        },
        "active": d.active,
        "subscribers": [
            {
                "jid": load.subscription.jid,
                "subid": load.subscription.subid,
                "state": str(load.subscription.state),
                "queue_requests": load.subscription.queue_requests,
                "in_flight": load.in_flight,
                "idle_seconds": _seconds(
                    now, last(load.subscription.jid, load.subscription.last_activity)
                ),
                "active": load.subscription.subid == d.active,
            }
            for load in d.subscribers
        ],
        "locks": [lock_json(i, now) for i in sorted(d.locks, key=lambda i: i.seq)[:MAX_ROWS]],
    }


async def queue_page(
    service: PubSubService,
    node: str,
    activity: Mapping[tuple[str, str], datetime] | None = None,
) -> dict[str, Any]:
    """One queue: configuration, subscribers, locks, the oldest items waiting and its
    dead letters (oldest first), items with their payload (cut) and attributes."""
    details = await service.queue_details(SYSTEM, node)
    now = service.clock()
    out = details_json(details, now, activity)
    waiting = await service.get_items(SYSTEM, node, page=PageRequest(max=ITEMS_SHOWN))
    out["items"] = [item_json(i, now) for i in waiting.items]
    target = out["config"]["dead_letter"]
    try:
        page = await service.get_items(SYSTEM, target, max_items=MAX_ROWS)
    except NodeNotFound:
        out["dead_letters"] = []
    else:
        out["dead_letters"] = [
            {**dead_letter_json(i), "payload": _cut(i.payload)} for i in page.items
        ]
    entries = await service.get_node_affiliations(SYSTEM, node)
    out["affiliations"] = [{"jid": e.jid, "affiliation": e.affiliation.value} for e in entries]
    return out
