"""Read-only commands: what the queues and the service look like right now."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from slixmpp.plugins.xep_0004 import Form

import xmpp_queue
from xmpp_queue.admin.base import NODE_PREFIX, QUEUE_FIELDS, AdminCommand
from xmpp_queue.admin.flow import CommandSession
from xmpp_queue.admin.forms import (
    ATTRIBUTES,
    INTEGER,
    SECONDS,
    TIME,
    Cell,
    Column,
    Submitted,
    add_fixed,
    add_typed,
    new_form,
    table,
)
from xmpp_queue.admin.humanize import attributes_of, duration, redacted_url
from xmpp_queue.core.errors import NodeNotFound
from xmpp_queue.core.model import SYSTEM, Item
from xmpp_queue.core.node_config import render_value
from xmpp_queue.core.queue.deadlines import dead_letter_node
from xmpp_queue.core.queue.failures import LAST_ERROR
from xmpp_queue.core.reports import QueueDetails, QueueSummary, SubscriberLoad

DEAD_ROWS = 20
"""Dead letters listed in a queue's details (the dashboard and pipeline show more)."""

OVERVIEW_COLUMNS: tuple[Column, ...] = (
    ("node", "Node", None),
    ("backlog", "Waiting", INTEGER),
    ("delayed", "Delayed", INTEGER),
    ("in_flight", "In flight", INTEGER),
    ("subscribers", "Subscribers", INTEGER),
    ("oldest_waiting_seconds", "Oldest waiting (s)", SECONDS),
    ("dead_letters", "Dead letters", INTEGER),
    ("acks_last_hour", "Acks (1 h)", INTEGER),
    ("redeliveries_last_hour", "Redeliveries (1 h)", INTEGER),
)
SUBSCRIBER_COLUMNS: tuple[Column, ...] = (
    ("jid", "JID", None),
    ("subid", "Subscription id", None),
    ("queue_requests", "Window (queue_requests)", INTEGER),
    ("in_flight", "In flight", INTEGER),
    ("last_activity", "Last activity", TIME),
    ("idle_seconds", "Idle (s)", SECONDS),
)
LOCK_COLUMNS: tuple[Column, ...] = (
    ("item", "Item", None),
    ("holder", "Holder", None),
    ("locked_at", "Locked at", TIME),
    ("expires_at", "Deadline", TIME),
    ("expires_in_seconds", "Deadline in (s)", SECONDS),
    ("deliveries", "Deliveries", INTEGER),
    ("last_error", "Last error", None),
    ("attributes", "Attributes", ATTRIBUTES),
)
DEAD_LETTER_COLUMNS: tuple[Column, ...] = (
    ("item", "Item", None),
    ("reason", "Reason", None),
    ("deliveries", "Deliveries", INTEGER),
    ("dead_lettered_at", "Dead-lettered at", TIME),
    ("last_error", "Last error", None),
    ("attributes", "Attributes", ATTRIBUTES),
)


def _overview_row(row: QueueSummary) -> dict[str, Cell]:
    return {
        "node": row.node,
        "backlog": row.backlog,
        "delayed": row.delayed,
        "in_flight": row.in_flight,
        "subscribers": row.subscribers,
        "oldest_waiting_seconds": row.oldest_waiting_seconds,
        "dead_letters": row.dead_letters,
        "acks_last_hour": row.acks_last_hour,
        "redeliveries_last_hour": row.redeliveries_last_hour,
    }


def _seconds(later: datetime | None, earlier: datetime | None) -> float | None:
    if later is None or earlier is None:
        return None
    return (later - earlier).total_seconds()


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def subscriber_rows(loads: Sequence[SubscriberLoad], now: datetime) -> list[dict[str, Cell]]:
    return [
        {
            "jid": load.subscription.jid,
            "subid": load.subscription.subid,
            "queue_requests": load.subscription.queue_requests,
            "in_flight": load.in_flight,
            "last_activity": load.subscription.last_activity,
            "idle_seconds": _seconds(now, load.subscription.last_activity),
        }
        for load in loads
    ]


def lock_rows(locks: Sequence[Item], now: datetime) -> list[dict[str, Cell]]:
    return [
        {
            "item": item.item_id,
            "holder": item.lock_jid,
            "locked_at": item.locked_at,
            "expires_at": item.lock_expires_at,
            "expires_in_seconds": _seconds(item.lock_expires_at, now),
            "deliveries": item.deliveries,
            "last_error": item.headers.get(LAST_ERROR),
            "attributes": attributes_of(item.headers),
        }
        for item in locks
    ]


def dead_letter_rows(letters: Sequence[Item]) -> list[dict[str, Cell]]:
    return [
        {
            "item": item.item_id,
            "reason": item.headers.get("reason"),
            "deliveries": _int(item.headers.get("deliveries")),
            "dead_lettered_at": item.headers.get("dead-lettered-at"),
            "last_error": item.headers.get(LAST_ERROR),
            "attributes": attributes_of(item.headers),
        }
        for item in letters
    ]


class QueueOverview(AdminCommand):
    node = NODE_PREFIX + "overview"
    name = "Queue overview"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        rows = await self.service.queue_overview(SYSTEM)
        result = table(self.name, OVERVIEW_COLUMNS, (_overview_row(r) for r in rows), "queues")
        waiting = sum(r.backlog for r in rows)
        in_flight = sum(r.in_flight for r in rows)
        dead = sum(r.dead_letters for r in rows)
        s.finish(
            f"{len(rows)} queue(s): {waiting} waiting, {in_flight} in flight, "
            f"{dead} dead letter(s).",
            result,
        )


class QueueDetailsCommand(AdminCommand):
    node = NODE_PREFIX + "details"
    name = "Queue details"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        self.ask_node(
            s,
            await self.queue_nodes(),
            self.show,
            instructions="Choose the queue to inspect.",
            desc="A queue node (pubsub#queue)",
            empty="There are no queue nodes.",
            final=True,
        )

    async def show(self, s: CommandSession, form: Submitted) -> None:
        details = await self.service.queue_details(SYSTEM, self.chosen_node(s, form))
        try:
            dead = await self.service.get_items(
                SYSTEM, dead_letter_node(details.node, details.config), max_items=DEAD_ROWS
            )
        except NodeNotFound:
            letters: tuple[Item, ...] = ()
        else:
            letters = dead.items
        s.finish(
            f"'{details.node}': {details.backlog} waiting ({details.delayed} delayed), "
            f"{len(details.locks)} locked, "
            f"{len(details.subscribers)} subscriber(s).",
            *self._render(details, letters),
        )

    def _render(self, d: QueueDetails, letters: tuple[Item, ...] = ()) -> list[Form]:
        now = self.ctx.now()
        form = new_form(f"{self.name}: {d.node}", kind="result")
        add_typed(form, "node", "Node", d.node)
        add_typed(form, "backlog", "Waiting items", d.backlog, INTEGER)
        add_typed(form, "delayed", "Of them delayed (held back until later)", d.delayed, INTEGER)
        add_typed(form, "in_flight", "Locked items", len(d.locks), INTEGER)
        if d.config.queue_single_active:
            active = [s.subscription for s in d.subscribers if s.subscription.subid == d.active]
            add_typed(
                form,
                "active",
                "Active subscriber (single active consumer)",
                f"{active[0].jid} {active[0].subid}" if active else None,
            )
        add_fixed(form, "Configuration")
        for spec in QUEUE_FIELDS:
            value = render_value(getattr(d.config, spec.attr))
            add_typed(form, spec.var, spec.label, value, spec.datatype)
        return [
            form,
            table(
                "Subscribers",
                SUBSCRIBER_COLUMNS,
                subscriber_rows(d.subscribers, now),
                "subscribers",
            ),
            table("Locks", LOCK_COLUMNS, lock_rows(d.locks, now), "locks"),
            table(
                f"Dead letters, newest {DEAD_ROWS}",
                DEAD_LETTER_COLUMNS,
                dead_letter_rows(letters),
                "dead_letters",
            ),
        ]


class ServiceStatusCommand(AdminCommand):
    node = NODE_PREFIX + "status"
    name = "Service status"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        status = await self.service.status(SYSTEM)
        now = self.ctx.now()
        uptime = (now - status.started_at).total_seconds()
        url = self.ctx.database_url
        result = new_form(self.name, kind="result")
        add_typed(result, "version", "Version", xmpp_queue.__version__)
        add_typed(result, "started", "Started", status.started_at, TIME)
        add_typed(result, "uptime_seconds", "Uptime (s)", uptime, SECONDS)
        add_typed(result, "database", "Database", redacted_url(url) if url else None)
        add_typed(result, "nodes", "Nodes", status.nodes, INTEGER)
        add_typed(result, "queues", "Queue nodes", status.queues, INTEGER)
        add_typed(result, "items", "Items", status.items, INTEGER)
        add_typed(result, "subscriptions", "Subscriptions", status.subscriptions, INTEGER)
        add_typed(result, "locks", "Locked items", status.locks, INTEGER)
        s.finish(
            f"xmpp-queue {xmpp_queue.__version__}, up {duration(uptime)}: "
            f"{status.nodes} node(s), "
            f"{status.items} item(s), {status.locks} locked.",
            result,
        )
