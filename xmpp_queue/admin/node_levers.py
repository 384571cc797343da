"""Commands that create, empty or remove whole nodes.

Purge and delete are not undoable, so each shows what it is about to remove and
asks for an explicit yes (a ``boolean`` that defaults to no) before calling the
service; a "no" completes the session with nothing changed.
"""

from __future__ import annotations

from slixmpp.plugins.xep_0004 import Form

from xmpp_queue.admin.base import NODE_PREFIX, AdminCommand
from xmpp_queue.admin.flow import CommandSession
from xmpp_queue.admin.forms import Submitted, add_config_field, add_field, add_fixed, new_form
from xmpp_queue.core.model import SYSTEM, Node
from xmpp_queue.core.node_config import NODE_CONFIG_FIELDS, render_value

QUEUE_FLAG = "pubsub#queue"
CREATE_FIELDS = tuple(
    f for f in NODE_CONFIG_FIELDS if f.var in ("pubsub#title", QUEUE_FLAG) or f.queue_only
)
"""What "Create node" asks: a title, queue mode, and the queue rows of the table."""


async def _contents(cmd: AdminCommand, node: Node) -> str:
    """What a node holds, in words, for a confirmation step."""
    if not node.config.queue:
        return f"'{node.node_id}' is not a queue; every stored item goes."
    details = await cmd.service.queue_details(SYSTEM, node.node_id)
    return (
        f"'{node.node_id}' holds {details.backlog} waiting and {len(details.locks)} locked "
        f"item(s); {len(details.subscribers)} subscriber(s) will be told."
    )


def _confirmation(title: str, lines: list[str], label: str) -> Form:
    form = new_form(title, "This cannot be undone.")
    for line in lines:
        add_fixed(form, line)
    field = add_field(form, var="confirm", ftype="boolean", label=label, required=True)
    field["value"] = False
    return form


class PurgeQueue(AdminCommand):
    node = NODE_PREFIX + "purge"
    name = "Purge queue"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        self.ask_node(
            s,
            await self.all_nodes(),
            self.confirm,
            instructions="Choose the node to empty. You will be asked to confirm.",
            desc="Every item of this node is removed; the node itself stays",
            empty="There are no nodes.",
        )

    async def confirm(self, s: CommandSession, form: Submitted) -> None:
        node = await self.service.get_node(SYSTEM, self.chosen_node(s, form))
        lines = [await _contents(self, node), "Lock holders hear that their item is gone."]
        question = _confirmation(self.name, lines, f"Yes, remove every item of '{node.node_id}'")
        s.ask(question, self.purge, final=True, back=self.start)

    async def purge(self, s: CommandSession, form: Submitted) -> None:
        node = s.memory["node"]
        if not form.flag("confirm", "Confirm"):
            s.finish(f"Nothing purged: '{node}' was not confirmed.", level="warn")
            return
        removed = s.changed(await self.service.purge_node(SYSTEM, node))
        s.finish(f"Purged {removed} item(s) from '{node}'; subscribers and lock holders were told.")


class DeleteNode(AdminCommand):
    node = NODE_PREFIX + "delete-node"
    name = "Delete node"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        self.ask_node(
            s,
            await self.all_nodes(),
            self.confirm,
            instructions="Choose the node to delete. You will be asked to confirm.",
            desc="The node, its items and its subscriptions are removed",
            empty="There are no nodes.",
        )

    async def confirm(self, s: CommandSession, form: Submitted) -> None:
        node = await self.service.get_node(SYSTEM, self.chosen_node(s, form))
        lines = [await _contents(self, node), "Subscribers are told the node is deleted."]
        question = _confirmation(self.name, lines, f"Yes, delete '{node.node_id}'")
        s.ask(question, self.delete, final=True, back=self.start)

    async def delete(self, s: CommandSession, form: Submitted) -> None:
        node = s.memory["node"]
        if not form.flag("confirm", "Confirm"):
            s.finish(f"Nothing deleted: '{node}' was not confirmed.", level="warn")
            return
        s.changed(await self.service.delete_node(SYSTEM, node))
        s.finish(f"Deleted node '{node}'; its subscribers were told.")


class CreateNode(AdminCommand):
    node = NODE_PREFIX + "create-node"
    name = "Create node"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        defaults = self.service.default_config(SYSTEM)
        question = new_form(
            self.name, "Name the node and set its queue behaviour; empty fields keep defaults."
        )
        add_field(
            question,
            var="node",
            ftype="text-single",
            label="Node id",
            desc="The new node's id, as publishers and workers will name it",
            required=True,
        )
        for spec in CREATE_FIELDS:
            value = True if spec.var == QUEUE_FLAG else getattr(defaults, spec.attr)
            add_config_field(question, spec, render_value(value))
        s.ask(question, self.create, final=True)

    async def create(self, s: CommandSession, form: Submitted) -> None:
        node_id = form.choice("node", "Node id")
        values = {var: v for var, v in form.raw(CREATE_FIELDS).items() if any(x.strip() for x in v)}
        created = s.changed(await self.service.create_node(SYSTEM, node_id, values))
        config = await self.service.get_config(SYSTEM, created)
        if config.queue:
            s.finish(
                f"Created queue node '{created}' (lock timeout {config.queue_lock_timeout} s, "
                f"max deliveries {config.queue_max_deliveries or 'unlimited'})."
            )
        else:
            s.finish(f"Created node '{created}' (not a queue).")
