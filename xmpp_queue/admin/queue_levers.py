"""Commands that steer the work in a queue: unlock, redrive, kick, configure.

Each picks a node first, then shows what it can act on (the locks, the dead
letters, the subscribers, the current values) and makes one service call. The
service does the queue work and produces the notifications (a forced unlock
tells the holder, a kick releases the subscriber's items).
"""

from __future__ import annotations

from xmpp_queue.admin.base import NODE_PREFIX, QUEUE_FIELDS, AdminCommand
from xmpp_queue.admin.errors import BadPayload
from xmpp_queue.admin.flow import CommandSession
from xmpp_queue.admin.forms import Submitted, add_config_field, add_field, add_fixed, new_form
from xmpp_queue.admin.humanize import ago, until
from xmpp_queue.core.model import SYSTEM
from xmpp_queue.core.node_config import render_value


class UnlockItems(AdminCommand):
    node = NODE_PREFIX + "unlock"
    name = "Unlock item(s)"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        self.ask_node(
            s,
            await self.queue_nodes(),
            self.pick,
            instructions="Choose the queue whose items to unlock.",
            desc="A queue node (pubsub#queue)",
            empty="There are no queue nodes.",
        )

    async def pick(self, s: CommandSession, form: Submitted) -> None:
        details = await self.service.queue_details(SYSTEM, self.chosen_node(s, form))
        if not details.locks:
            s.finish(f"No item of '{details.node}' is locked; nothing to unlock.", level="warn")
            return
        now = self.ctx.now()
        question = new_form(
            self.name,
            "Unlock one item, or every item one subscriber holds. The holder is told; the "
            "item is offered again (or dead-lettered at its delivery limit).",
        )
        add_field(
            question,
            var="item",
            ftype="list-single",
            label="Item",
            desc="One locked item",
            options=[
                {
                    "value": item.item_id,
                    "label": f"{item.item_id}: {item.lock_jid}, locked {ago(item.locked_at, now)}, "
                    f"deadline {until(item.lock_expires_at, now)}",
                }
                for item in details.locks
            ],
        )
        holders = sorted({item.lock_jid for item in details.locks if item.lock_jid})
        add_field(
            question,
            var="holder",
            ftype="jid-single",
            label="Or every item held by",
            desc="A subscriber JID exactly as it subscribed (bare or full). Holders now: "
            + ", ".join(holders),
        )
        s.ask(question, self.unlock, final=True, back=self.start)

    async def unlock(self, s: CommandSession, form: Submitted) -> None:
        node = s.memory["node"]
        item = form.text("item", "Item")
        holder = form.jid("holder", "Holder JID")
        if (item is None) == (holder is None):
            raise BadPayload("Choose one item or give one holder JID (exactly one of the two)")
        released = s.changed(
            await self.service.force_unlock(SYSTEM, node, item_id=item, holder=holder)
        )
        if item is not None:
            if released:
                s.finish(f"Unlocked item '{item}' of '{node}'; its holder was told.")
            else:
                s.finish(f"Item '{item}' of '{node}' was no longer locked.", level="warn")
        elif released:
            s.finish(f"Unlocked {released} item(s) of '{node}' held by {holder}; it was told.")
        else:
            s.finish(f"{holder} holds no item of '{node}'; nothing changed.", level="warn")


class RedriveDeadLetters(AdminCommand):
    node = NODE_PREFIX + "redrive"
    name = "Redrive dead letters"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        pairs = await self.dead_letter_nodes()
        if not pairs:
            s.finish("No dead-letter node exists yet.", level="warn")
            return
        question = new_form(
            self.name,
            "Move items of a dead-letter node back to the queue they came from, oldest "
            "first, with a fresh delivery count.",
        )
        add_field(
            question,
            var="node",
            ftype="list-single",
            label="Dead-letter node",
            desc="A node that receives a queue's dead letters",
            required=True,
            options=[
                {"value": d.node_id, "label": f"{d.node_id} (of {q.node_id})"} for d, q in pairs
            ],
        )
        add_field(
            question,
            var="count",
            ftype="text-single",
            label="How many",
            desc="Number of items to move, oldest first; leave empty to move all",
        )
        s.ask(question, self.redrive, final=True)

    async def redrive(self, s: CommandSession, form: Submitted) -> None:
        node = self.chosen_node(s, form)
        count = form.count("count", "How many", minimum=1)
        moved = s.changed(await self.service.redrive(SYSTEM, node, count))
        if self.ctx.on_redrive is not None:
            queues = [q.node_id for d, q in await self.dead_letter_nodes() if d.node_id == node]
            self.ctx.on_redrive(queues[0] if queues else node, moved)
        if moved:
            s.finish(f"Moved {moved} item(s) from '{node}' back to their queue.")
        else:
            s.finish(
                f"Nothing moved: '{node}' holds no dead letter whose queue still exists.",
                level="warn",
            )


class KickSubscriber(AdminCommand):
    node = NODE_PREFIX + "kick"
    name = "Kick subscriber"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        self.ask_node(
            s,
            await self.all_nodes(),
            self.pick,
            instructions="Choose the node to remove a subscriber from.",
            desc="The node the subscriber is subscribed to",
            empty="There are no nodes.",
        )

    async def pick(self, s: CommandSession, form: Submitted) -> None:
        node = self.chosen_node(s, form)
        subs = await self.service.get_node_subscriptions(SYSTEM, node)
        if not subs:
            s.finish(f"'{node}' has no subscribers; nothing to do.", level="warn")
            return
        question = new_form(
            self.name,
            "The subscriber is unsubscribed; items it holds are unlocked (it is told) and "
            "offered to the others.",
        )
        add_fixed(question, "Subscribers now:")
        for sub in subs:
            window = f", queue_requests {sub.queue_requests}" if sub.queue_requests else ""
            add_fixed(question, f"{sub.jid} (subid {sub.subid}, {sub.state}{window})")
        add_field(
            question,
            var="jid",
            ftype="jid-single",
            label="Subscriber JID",
            desc="Exactly as subscribed (bare or full); every subscription of it goes",
            required=True,
        )
        s.ask(question, self.kick, final=True, back=self.start)

    async def kick(self, s: CommandSession, form: Submitted) -> None:
        node = s.memory["node"]
        jid = form.jid("jid", "Subscriber JID", required=True)
        assert jid is not None
        released = s.changed(await self.service.kick_subscriber(SYSTEM, node, jid))
        s.finish(f"Unsubscribed {jid} from '{node}'; {released} locked item(s) were released.")


class ConfigureQueue(AdminCommand):
    node = NODE_PREFIX + "configure"
    name = "Configure queue"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        self.ask_node(
            s,
            await self.queue_nodes(),
            self.edit,
            instructions="Choose the queue to configure.",
            desc="A queue node (pubsub#queue)",
            empty="There are no queue nodes.",
        )

    async def edit(self, s: CommandSession, form: Submitted) -> None:
        node = self.chosen_node(s, form)
        config = await self.service.get_config(SYSTEM, node)
        if not config.queue:
            raise BadPayload(f"'{node}' is not a queue node")
        question = new_form(f"{self.name}: {node}", "Change the values; the others stay.")
        for spec in QUEUE_FIELDS:
            add_config_field(question, spec, render_value(getattr(config, spec.attr)))
        s.ask(question, self.apply, final=True, back=self.start)

    async def apply(self, s: CommandSession, form: Submitted) -> None:
        node = s.memory["node"]
        before = await self.service.get_config(SYSTEM, node)
        after = s.changed(await self.service.configure_node(SYSTEM, node, form.raw(QUEUE_FIELDS)))
        changes = [
            f"{spec.label}: {render_value(getattr(before, spec.attr))} -> "
            f"{render_value(getattr(after, spec.attr))}"
            for spec in QUEUE_FIELDS
            if getattr(before, spec.attr) != getattr(after, spec.attr)
        ]
        if changes:
            s.finish(f"Configured '{node}'. " + "; ".join(changes))
        else:
            s.finish(f"No value of '{node}' changed.")
