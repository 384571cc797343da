"""The command that moves a queue to another shard of a sharded service.

Why a command of the shard that serves the node: only that shard's process may
let go of the node (it holds the node in memory and its lease fences the
placement rewrite), so the admin runs it there; the admin CLI finds the shard
by asking the public name, as for every one-queue command. How a move works is
in ``sharding_moves.py`` and docs/scaling.md.
"""

from __future__ import annotations

from xmpp_queue.admin.base import NODE_PREFIX, AdminCommand
from xmpp_queue.admin.flow import CommandSession
from xmpp_queue.admin.forms import Submitted, add_field, add_fixed, add_node_choice, new_form


class MoveNode(AdminCommand):
    node = NODE_PREFIX + "move-node"
    name = "Move node to another shard"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        mover = self.ctx.shards
        if mover is None:
            s.finish("This service is not sharded: no other shard to move to.", level="warn")
            return
        nodes = await self.all_nodes()
        targets = mover.targets()
        if not nodes or not targets:
            s.finish("Nothing to move: no node here, or no other shard.", level="warn")
            return
        question = new_form(
            self.name,
            "The node moves with its family (its dead-letter node and every node named "
            "'NODE/...'). Clients in flight are redirected to the new shard and send again.",
        )
        add_fixed(question, f"This shard: {mover.shard}")
        add_node_choice(question, nodes, label="Node", desc="The node to move")
        add_field(
            question,
            var="shard",
            ftype="list-single",
            label="New shard",
            desc="The shard that serves the node from now on",
            required=True,
            options=[{"value": t, "label": t} for t in targets],
        )
        s.ask(question, self.move, final=True)

    async def move(self, s: CommandSession, form: Submitted) -> None:
        node = self.chosen_node(s, form)
        target = form.choice("shard", "New shard")
        try:
            moved = await self.ctx.shards.move(node, target)
        except ValueError as exc:  # the mover's MoveRefused: a wrong shard or node
            s.finish(f"Not moved: {exc}", level="error")
            return
        s.finish(f"Moved {', '.join(moved)} to {target}.")
