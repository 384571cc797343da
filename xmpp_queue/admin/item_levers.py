"""Commands on single items and on who consumes a queue: consumers, peek, publish,
move, delete-item.

Each is one form (final at once, so a script answers it in one go) and one
service call as the service's system actor: a peek is a paged read that locks
nothing, a publish is the protocol's publish (dispatched to a worker at once on a
queue), a move is the core's all-or-nothing ``move_item``, a delete is the
owner's retract (a holder is told). Results are typed forms (``forms.py``).
"""

from __future__ import annotations

from datetime import datetime

from xmpp_queue.admin.base import NODE_PREFIX, AdminCommand
from xmpp_queue.admin.errors import BadPayload
from xmpp_queue.admin.flow import CommandSession
from xmpp_queue.admin.forms import (
    ATTRIBUTES,
    INTEGER,
    TIME,
    Cell,
    Column,
    Submitted,
    add_field,
    add_node_choice,
    add_typed,
    new_form,
    table,
)
from xmpp_queue.admin.humanize import attributes_of
from xmpp_queue.admin.views import SUBSCRIBER_COLUMNS, subscriber_rows
from xmpp_queue.core.model import SYSTEM, Item, PageRequest

PEEK_PAGE = 20
"""Items a peek shows when it is not told how many."""
PEEK_MOST = 100
PAYLOAD_SHOWN = 2048
"""Characters of a payload a peek shows (``payload_size`` says how big it is): a
page of whole payloads could pass the XMPP server's stanza limit."""

ITEM_COLUMNS: tuple[Column, ...] = (
    ("item", "Item", None),
    ("state", "State", None),
    ("holder", "Holder", None),
    ("publisher", "Publisher", None),
    ("published_at", "Published at", TIME),
    ("available_at", "Offered from", TIME),
    ("deliveries", "Deliveries", INTEGER),
    ("attributes", "Attributes", ATTRIBUTES),
    ("payload_size", "Payload bytes", INTEGER),
    ("payload", f"Payload (first {PAYLOAD_SHOWN} characters)", None),
)


def _state(item: Item, now: datetime) -> str:
    if item.locked_by is not None:
        return "locked"
    if item.available_at is not None and item.available_at > now:
        return "delayed"
    return "waiting"


def item_row(item: Item, now: datetime) -> dict[str, Cell]:
    payload = item.payload
    return {
        "item": item.item_id,
        "state": _state(item, now),
        "holder": item.lock_jid,
        "publisher": item.publisher or None,
        "published_at": item.published_at,
        "available_at": item.available_at,
        "deliveries": item.deliveries,
        "attributes": attributes_of(item.headers),
        "payload_size": item.payload_size,
        "payload": payload[:PAYLOAD_SHOWN] if payload is not None else None,
    }


def parse_attributes(lines: tuple[str, ...]) -> dict[str, str]:
    """``name=value`` lines (the form's text-multi) as a mapping."""
    out: dict[str, str] = {}
    for line in lines:
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise BadPayload(f"Attributes: '{line}' is not name=value")
        out[name.strip()] = value
    return out


class QueueConsumers(AdminCommand):
    node = NODE_PREFIX + "consumers"
    name = "Queue consumers"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        self.ask_node(
            s,
            await self.queue_nodes(),
            self.show,
            instructions="Choose the queue whose consumers to list.",
            desc="A queue node (pubsub#queue)",
            empty="There are no queue nodes.",
            final=True,
        )

    async def show(self, s: CommandSession, form: Submitted) -> None:
        details = await self.service.queue_details(SYSTEM, self.chosen_node(s, form))
        rows = subscriber_rows(details.subscribers, self.ctx.now())
        s.finish(
            f"'{details.node}': {len(rows)} consumer(s), {len(details.locks)} item(s) in flight.",
            table(f"Consumers of {details.node}", SUBSCRIBER_COLUMNS, rows, "consumers"),
        )


class PeekItems(AdminCommand):
    node = NODE_PREFIX + "peek"
    name = "Peek at items"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        nodes = await self.all_nodes()
        if not nodes:
            s.finish("There are no nodes.", level="warn")
            return
        question = new_form(
            self.name,
            "Browse a node's items oldest first, without locking or delivering any. "
            "Give the last item id of a page as 'After' for the next page.",
        )
        add_node_choice(question, nodes, label="Node", desc="Any node")
        add_field(question, var="max", label="How many", desc=f"1 to {PEEK_MOST}")
        add_field(question, var="after", label="After item", desc="Empty: from the oldest")
        s.ask(question, self.show, final=True)

    async def show(self, s: CommandSession, form: Submitted) -> None:
        node = self.chosen_node(s, form)
        wanted = form.count("max", "How many", minimum=1) or PEEK_PAGE
        if wanted > PEEK_MOST:
            raise BadPayload(f"How many: at most {PEEK_MOST} (got {wanted})")
        after = form.text("after", "After item")
        page = await self.service.get_items(SYSTEM, node, page=PageRequest(max=wanted, after=after))
        now = self.ctx.now()
        shown = page.items
        more = (page.first_index or 0) + len(shown) < page.count
        summary = new_form(f"{self.name}: {node}", kind="result")
        add_typed(summary, "node", "Node", node)
        add_typed(summary, "count", "Items in the node", page.count, INTEGER)
        add_typed(summary, "next", "Next page after", shown[-1].item_id if more else None)
        s.finish(
            f"'{node}': {len(shown)} of {page.count} item(s)"
            + (f"; more after '{shown[-1].item_id}'." if more else "."),
            summary,
            table("Items", ITEM_COLUMNS, (item_row(i, now) for i in shown), "items"),
        )


class PublishItem(AdminCommand):
    node = NODE_PREFIX + "publish"
    name = "Publish an item"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        nodes = await self.all_nodes()
        if not nodes:
            s.finish("There are no nodes.", level="warn")
            return
        question = new_form(self.name, "Publish one item, as a publisher would.")
        add_node_choice(question, nodes, label="Node", desc="Any node")
        add_field(question, var="item", label="Item id", desc="Empty: the service makes one")
        add_field(
            question,
            var="payload",
            label="Payload",
            desc="One XML element, e.g. <json xmlns='urn:xmpp:json:0'>{...}</json>",
            required=True,
        )
        add_field(question, var="attributes", ftype="text-multi", label="Attributes (name=value)")
        s.ask(question, self.publish, final=True)

    async def publish(self, s: CommandSession, form: Submitted) -> None:
        node = self.chosen_node(s, form)
        reader = self.ctx.read_payload
        if reader is None:
            raise BadPayload("this service offers no payload reader to the admin commands")
        text = form.text("payload", "Payload", required=True)
        assert text is not None
        attributes = parse_attributes(form.values.get("attributes", ()))
        payload, size = reader(text)
        item_id = s.changed(
            await self.service.publish(
                SYSTEM, node, form.text("item", "Item id"), payload, size, attributes=attributes
            )
        )
        result = new_form(self.name, kind="result")
        add_typed(result, "node", "Node", node)
        add_typed(result, "item", "Item id", item_id)
        s.finish(f"Published item '{item_id}' to '{node}'.", result)


class MoveItem(AdminCommand):
    node = NODE_PREFIX + "move"
    name = "Move an item"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        nodes = await self.all_nodes()
        if len(nodes) < 2:
            s.finish("A move needs two nodes.", level="warn")
            return
        question = new_form(
            self.name,
            "Move one item (not locked) to another node in one step: it is in exactly one "
            "of the two, and arrives with a fresh delivery count.",
        )
        add_node_choice(question, nodes, label="From node", desc="Where the item is")
        add_field(question, var="item", label="Item id", required=True)
        add_node_choice(question, nodes, label="To node", desc="Where it goes", var="target")
        add_field(question, var="target_item", label="New id", desc="Empty: the same id")
        s.ask(question, self.move, final=True)

    async def move(self, s: CommandSession, form: Submitted) -> None:
        node = self.chosen_node(s, form)
        item = form.choice("item", "Item id")
        target = form.choice("target", "To node")
        new_id = s.changed(
            await self.service.move_item(
                SYSTEM, node, item, target, form.text("target_item", "New id")
            )
        )
        s.finish(f"Moved item '{item}' of '{node}' to '{target}' as '{new_id}'.")


class DeleteItem(AdminCommand):
    node = NODE_PREFIX + "delete-item"
    name = "Delete an item"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        nodes = await self.all_nodes()
        if not nodes:
            s.finish("There are no nodes.", level="warn")
            return
        question = new_form(self.name, "Retract one item; a worker holding it is told.")
        add_node_choice(question, nodes, label="Node", desc="Where the item is")
        add_field(question, var="item", label="Item id", required=True)
        s.ask(question, self.delete, final=True)

    async def delete(self, s: CommandSession, form: Submitted) -> None:
        node = self.chosen_node(s, form)
        item = form.choice("item", "Item id")
        s.changed(await self.service.retract(SYSTEM, node, item, notify=True))
        s.finish(f"Deleted item '{item}' of '{node}'.")
