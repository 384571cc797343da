"""Push subscriptions of a queue (HTTP endpoints), added, removed and listed by an
admin or by the queue's owner (``owners_may``: an owner acts as itself, and the
registry refuses a queue it does not own).

The admin's face of ``push/registry.py``: the registry is handed in by the
composition root (admin and push are sibling layers: the commands know it only by
:class:`PushManager`). Secrets are typed into ``text-private`` fields and never
echoed: the listing shows them masked (``bearer ****``). An endpoint the ``[push]``
rules refuse is a ``bad-payload`` error whose text names the rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from xmpp_queue.admin.base import NODE_PREFIX, AdminCommand
from xmpp_queue.admin.errors import BadPayload
from xmpp_queue.admin.flow import CommandSession
from xmpp_queue.admin.forms import Submitted, add_field, new_form, table
from xmpp_queue.core.model import Actor

PUSH_COLUMNS = (
    ("id", "Id", None),
    ("url", "Endpoint", None),
    ("auth", "Auth", None),
    ("max_in_flight", "Max in flight", None),
)


class PushView(Protocol):
    push_id: str

    def view(self) -> dict[str, str]: ...


class PushManager(Protocol):
    async def add(
        self,
        actor: Actor,
        node: str,
        url: str,
        *,
        bearer: str | None = None,
        secret: str | None = None,
        max_in_flight: int = 8,
    ) -> Any: ...

    async def remove(self, actor: Actor, node: str, push_id: str) -> Any: ...

    async def list(self, actor: Actor, node: str) -> Sequence[Any]: ...


def push_table(node: str, pushes: Sequence[PushView]) -> Any:
    return table(f"Push subscriptions of {node}", PUSH_COLUMNS, [p.view() for p in pushes], "push")


class _PushCommand(AdminCommand):
    owners_may = True

    @property
    def pushes(self) -> PushManager:
        manager: PushManager | None = self.ctx.push
        if manager is None:
            raise BadPayload("push subscriptions are not enabled in this service")
        return manager

    async def start(self, s: CommandSession, form: Submitted) -> None:
        self.ask_node(
            s,
            await self.own_queue_nodes(s),
            self.chosen,
            instructions="Choose the queue.",
            desc="A queue node",
            empty="There are no queues you own.",
        )

    async def chosen(self, s: CommandSession, form: Submitted) -> None:
        raise NotImplementedError


class PushList(_PushCommand):
    node = NODE_PREFIX + "push-list"
    name = "List push subscriptions"

    async def chosen(self, s: CommandSession, form: Submitted) -> None:
        node = self.chosen_node(s, form)
        found = await self.pushes.list(self.actor(s), node)
        s.finish(f"'{node}': {len(found)} push subscription(s).", push_table(node, found))


class PushAdd(_PushCommand):
    node = NODE_PREFIX + "push-add"
    name = "Add a push subscription"

    async def chosen(self, s: CommandSession, form: Submitted) -> None:
        node = self.chosen_node(s, form)
        question = new_form(
            f"{self.name}: {node}",
            "Items are POSTed as JSON to the endpoint; a 2xx answer acks, anything else "
            "nacks. The endpoint must pass the [push] rules of the service.",
        )
        add_field(question, var="url", label="Endpoint URL", required=True)
        add_field(question, var="bearer", ftype="text-private", label="Bearer token")
        add_field(question, var="secret", ftype="text-private", label="HMAC-SHA256 secret")
        add_field(question, var="max_in_flight", label="Max in flight", value="8")
        s.ask(question, self.add, final=True, back=self.start)

    async def add(self, s: CommandSession, form: Submitted) -> None:
        node = s.memory["node"]
        url = form.text("url", "Endpoint URL", required=True)
        assert url is not None
        most = form.count("max_in_flight", "Max in flight", minimum=1) or 8
        push = await self.pushes.add(
            self.actor(s),
            node,
            url.strip(),
            bearer=form.text("bearer", "Bearer token"),
            secret=form.text("secret", "HMAC-SHA256 secret"),
            max_in_flight=most,
        )
        s.finish(f"'{node}': push subscription {push.push_id} added.", push_table(node, [push]))


class PushRemove(_PushCommand):
    node = NODE_PREFIX + "push-remove"
    name = "Remove a push subscription"

    async def chosen(self, s: CommandSession, form: Submitted) -> None:
        node = self.chosen_node(s, form)
        found = await self.pushes.list(self.actor(s), node)
        if not found:
            s.finish(f"'{node}' has no push subscriptions; nothing to do.", level="warn")
            return
        question = new_form(
            self.name, "Items it holds go back to the queue at once (no lock timeout)."
        )
        options = [{"value": p.push_id, "label": p.view()["url"]} for p in found]
        add_field(
            question, var="id", ftype="list-single", label="Push subscription", options=options
        )
        s.ask(question, self.remove, final=True, back=self.start)

    async def remove(self, s: CommandSession, form: Submitted) -> None:
        node = s.memory["node"]
        push_id = form.choice("id", "Push subscription")
        await self.pushes.remove(self.actor(s), node, push_id)
        s.finish(f"'{node}': push subscription {push_id} removed.")
