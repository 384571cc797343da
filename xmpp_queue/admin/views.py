"""Read-only commands: what the queues and the service look like right now."""

from __future__ import annotations

from slixmpp.plugins.xep_0004 import Form

import xmpp_queue
from xmpp_queue.admin.base import NODE_PREFIX, QUEUE_FIELDS, AdminCommand
from xmpp_queue.admin.flow import CommandSession
from xmpp_queue.admin.forms import Submitted, add_fixed, add_result, new_form, table
from xmpp_queue.admin.humanize import (
    ago,
    attributes_text,
    duration,
    instant,
    redacted_url,
    until,
)
from xmpp_queue.core.errors import NodeNotFound
from xmpp_queue.core.model import SYSTEM, Item
from xmpp_queue.core.node_config import render_value
from xmpp_queue.core.queue.deadlines import dead_letter_node
from xmpp_queue.core.queue.failures import LAST_ERROR
from xmpp_queue.core.reports import QueueDetails, QueueSummary

DEAD_ROWS = 20
"""Dead letters listed in a queue's details (the dashboard and pipeline show more)."""

OVERVIEW_COLUMNS = (
    ("node", "Node"),
    ("backlog", "Waiting"),
    ("delayed", "Delayed"),
    ("in_flight", "In flight"),
    ("subscribers", "Subscribers"),
    ("oldest_waiting", "Oldest waiting"),
    ("dead_letters", "Dead letters"),
    ("acks_last_hour", "Acks (1 h)"),
    ("redeliveries_last_hour", "Redeliveries (1 h)"),
)


def _overview_row(row: QueueSummary) -> dict[str, str]:
    oldest = row.oldest_waiting_seconds
    return {
        "node": row.node,
        "backlog": str(row.backlog),
        "delayed": str(row.delayed),
        "in_flight": str(row.in_flight),
        "subscribers": str(row.subscribers),
        "oldest_waiting": duration(oldest) if oldest is not None else "-",
        "dead_letters": str(row.dead_letters),
        "acks_last_hour": str(row.acks_last_hour),
        "redeliveries_last_hour": str(row.redeliveries_last_hour),
    }


class QueueOverview(AdminCommand):
    node = NODE_PREFIX + "overview"
    name = "Queue overview"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        rows = await self.service.queue_overview(SYSTEM)
        result = table(self.name, OVERVIEW_COLUMNS, (_overview_row(r) for r in rows))
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
            self._render(details, letters),
        )

    def _render(self, d: QueueDetails, letters: tuple[Item, ...] = ()) -> Form:
        now = self.ctx.now()
        form = new_form(f"{self.name}: {d.node}", kind="result")
        add_result(form, "node", "Node", d.node)
        add_result(form, "backlog", "Waiting items", str(d.backlog))
        add_result(form, "delayed", "Of them delayed (held back until later)", str(d.delayed))
        add_result(form, "in_flight", "Locked items", str(len(d.locks)))
        add_fixed(form, "Configuration")
        for spec in QUEUE_FIELDS:
            add_result(form, spec.var, spec.label, render_value(getattr(d.config, spec.attr)))
        add_result(
            form,
            "subscribers",
            "Subscribers (JID, subid, queue_requests, in flight, last activity)",
            [
                f"{load.subscription.jid} | {load.subscription.subid} | "
                f"{load.subscription.queue_requests or '-'} | {load.in_flight} | "
                f"{ago(load.subscription.last_activity, now)}"
                for load in d.subscribers
            ],
        )
        add_result(
            form,
            "locks",
            "Locks (item, holder, locked, deadline, deliveries, last error, attributes)",
            [
                f"{item.item_id} | {item.lock_jid or '-'} | {ago(item.locked_at, now)} | "
                f"{until(item.lock_expires_at, now)} | {item.deliveries} | "
                f"{item.headers.get(LAST_ERROR, '-')} | {attributes_text(item.headers)}"
                for item in d.locks
            ],
        )
        add_result(
            form,
            "dead_letters",
            f"Dead letters, newest {DEAD_ROWS} (item, reason, deliveries, last error, attributes)",
            [
                f"{item.item_id} | {item.headers.get('reason', '-')} | "
                f"{item.headers.get('deliveries', '-')} | {item.headers.get(LAST_ERROR, '-')} | "
                f"{attributes_text(item.headers)}"
                for item in letters
            ],
        )
        return form


class ServiceStatusCommand(AdminCommand):
    node = NODE_PREFIX + "status"
    name = "Service status"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        status = await self.service.status(SYSTEM)
        now = self.ctx.now()
        uptime = duration((now - status.started_at).total_seconds())
        url = self.ctx.database_url
        result = new_form(self.name, kind="result")
        add_result(result, "version", "Version", xmpp_queue.__version__)
        add_result(result, "started", "Started", instant(status.started_at))
        add_result(result, "uptime", "Uptime", uptime)
        add_result(result, "database", "Database", redacted_url(url) if url else "(not given)")
        add_result(result, "nodes", "Nodes", str(status.nodes))
        add_result(result, "queues", "Queue nodes", str(status.queues))
        add_result(result, "items", "Items", str(status.items))
        add_result(result, "subscriptions", "Subscriptions", str(status.subscriptions))
        add_result(result, "locks", "Locked items", str(status.locks))
        s.finish(
            f"xmpp-queue {xmpp_queue.__version__}, up {uptime}: {status.nodes} node(s), "
            f"{status.items} item(s), {status.locks} locked.",
            result,
        )
