"""XEP-0050 ad-hoc commands from the client link: the replay and push commands on it.

The service's seek and snapshot commands (``xmpp_queue/admin/replay_levers.py``)
are open to a queue's owners, so an application that owns its queue can replay
it from code as an operator does from the CLI. Each of these commands is one
form, final at once: :func:`run_command` executes it and completes it with the
given values in two IQs, and reads the result (the note, the result forms'
fields, a table's rows).

:class:`ReplayCommands` is mixed into :class:`~xmpp_queue.client.Publisher`::

    async with Publisher(account) as pub:
        await pub.snapshot("jobs", "before-deploy")
        ...
        replayed = await pub.seek_to_snapshot("jobs", "before-deploy")
        replayed = await pub.seek("jobs", to=datetime(2024, 5, 1, tzinfo=UTC))

:class:`PushCommands` (also on the Publisher) adds, lists and removes a queue's push
subscriptions (``xmpp_queue/admin/push_levers.py``, open to the queue's owners), so
an application that owns a queue can point it at its own HTTP endpoint::

        push_id = await pub.add_push("jobs", "https://hooks.example.com/jobs",
                                     secret="...", max_in_flight=8)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from xml.etree import ElementTree as ET

from xmpp_queue.client.errors import StanzaError
from xmpp_queue.client.link import PubSubLink
from xmpp_queue.client.payload import escape_text
from xmpp_queue.client.wire import DATA_NS, quote_attr

COMMANDS_NS = "http://jabber.org/protocol/commands"
PREFIX = "xmpp-queue#"
_X = f"{{{DATA_NS}}}x"
_FIELD = f"{{{DATA_NS}}}field"
_VALUE = f"{{{DATA_NS}}}value"
_ITEM = f"{{{DATA_NS}}}item"


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What a completed command said: its note, the fields of its result forms
    (var -> values), and its tables' rows (table name -> rows of var -> value)."""

    note: str
    fields: dict[str, list[str]] = field(default_factory=dict)
    tables: dict[str, list[dict[str, str]]] = field(default_factory=dict)


def _command(node: str, action: str, sessionid: str = "", form: str = "") -> str:
    session = f" sessionid='{quote_attr(sessionid)}'" if sessionid else ""
    return (
        f"<command xmlns='{COMMANDS_NS}' node='{quote_attr(node)}' action='{action}'{session}>"
        f"{form}</command>"
    )


def _submit(values: Mapping[str, str]) -> str:
    inner = "".join(
        f"<field var='{quote_attr(k)}'><value>{escape_text(v)}</value></field>"
        for k, v in values.items()
    )
    return f"<x xmlns='{DATA_NS}' type='submit'>{inner}</x>"


def _values(f: ET.Element) -> list[str]:
    return [v.text or "" for v in f.findall(_VALUE)]


def read_result(reply: ET.Element) -> CommandResult:
    command = reply.find(f"{{{COMMANDS_NS}}}command")
    if command is None:
        raise StanzaError("bad-request", "the service's reply holds no command")
    notes = [n.text or "" for n in command.findall(f"{{{COMMANDS_NS}}}note")]
    result = CommandResult(" ".join(notes))
    for form in command.findall(_X):
        items = form.findall(_ITEM)
        direct = {f.get("var", ""): _values(f) for f in form.findall(_FIELD) if f.get("var")}
        if items:
            name = (direct.get("table") or [""])[0]
            result.tables[name] = [
                {f.get("var", ""): "\n".join(_values(f)) for f in item.findall(_FIELD)}
                for item in items
            ]
        else:
            result.fields.update(direct)
    return result


async def run_command(link: PubSubLink, node: str, values: Mapping[str, str]) -> CommandResult:
    """Execute command *node* and complete its one form with *values*."""
    first = await link.call(_command(node, "execute"))
    command = first.find(f"{{{COMMANDS_NS}}}command")
    if command is None:
        raise StanzaError("bad-request", "the service's reply holds no command")
    if command.get("status") != "executing":
        return read_result(first)  # finished at once (nothing to choose from)
    sessionid = command.get("sessionid", "")
    return read_result(await link.call(_command(node, "complete", sessionid, _submit(values))))


async def run_steps(link: PubSubLink, node: str, answers: list[Mapping[str, str]]) -> CommandResult:
    """Execute command *node* and answer its forms with *answers*, one per stage,
    each with the action the stage offers (``next``, else ``complete``)."""
    reply = await link.call(_command(node, "execute"))
    for values in answers:
        command = reply.find(f"{{{COMMANDS_NS}}}command")
        if command is None or command.get("status") != "executing":
            break  # finished early (an empty choice, a warning)
        offered = command.find(f"{{{COMMANDS_NS}}}actions")
        has_next = offered is not None and offered.find(f"{{{COMMANDS_NS}}}next") is not None
        action = "next" if has_next else "complete"
        form = _command(node, action, command.get("sessionid", ""), _submit(values))
        reply = await link.call(form)
    return read_result(reply)


class ReplayCommands:
    """Seek and snapshots for a client that owns the queue (see the module docstring)."""

    async def _link_up(self) -> PubSubLink:
        raise NotImplementedError  # the client's live link (Publisher has it)

    async def _replay(self, command: str, values: dict[str, str]) -> CommandResult:
        return await run_command(await self._link_up(), PREFIX + command, values)

    async def seek(self, node: str, *, to: datetime) -> int:
        """Bring back the retained items published at or after *to* (an aware
        datetime); returns how many are waiting again."""
        if to.tzinfo is None:
            raise ValueError("seek: 'to' needs a time zone (datetime(..., tzinfo=UTC))")
        done = await self._replay("seek", {"node": node, "to": to.isoformat()})
        return int(done.fields["replayed"][0])

    async def seek_to_snapshot(self, node: str, name: str) -> int:
        """Bring back the retained items unacked when snapshot *name* was taken."""
        done = await self._replay("seek", {"node": node, "snapshot": name})
        return int(done.fields["replayed"][0])

    async def snapshot(self, node: str, name: str) -> datetime:
        """Take snapshot *name* of queue *node*; returns when it was taken."""
        done = await self._replay("snapshot", {"node": node, "name": name})
        return datetime.fromisoformat(done.fields["created_at"][0])

    async def snapshots(self, node: str) -> dict[str, datetime]:
        """The queue's snapshots: name -> when taken."""
        done = await self._replay("snapshots", {"node": node})
        rows = done.tables.get("snapshots", [])
        return {r["name"]: datetime.fromisoformat(r["created_at"]) for r in rows}

    async def delete_snapshot(self, node: str, name: str) -> None:
        await self._replay("snapshot-delete", {"node": node, "name": name})


class PushCommands:
    """A queue's push subscriptions, for a client that owns the queue."""

    async def _link_up(self) -> PubSubLink:
        raise NotImplementedError  # the client's live link (Publisher has it)

    async def _command_link(self, node: str) -> PubSubLink:
        """The link toward *node*'s service (a sharded service: its shard)."""
        return await self._link_up()

    async def add_push(
        self,
        node: str,
        url: str,
        *,
        bearer: str | None = None,
        secret: str | None = None,
        max_in_flight: int = 8,
    ) -> str:
        """POST queue *node*'s items to *url* (the service's ``[push]`` rules apply:
        a refused endpoint raises the error that names the rule); returns its id."""
        values = {"url": url, "max_in_flight": str(max_in_flight)}
        values |= {"bearer": bearer} if bearer else {}
        values |= {"secret": secret} if secret else {}
        done = await run_steps(
            await self._command_link(node), PREFIX + "push-add", [{"node": node}, values]
        )
        [row] = done.tables.get("push", [])
        return row["id"]

    async def push_subscriptions(self, node: str) -> list[dict[str, str]]:
        """The queue's push subscriptions: id, url, auth (secrets masked), max in flight."""
        done = await run_steps(
            await self._command_link(node), PREFIX + "push-list", [{"node": node}]
        )
        return done.tables.get("push", [])

    async def remove_push(self, node: str, push_id: str) -> None:
        """End push subscription *push_id*: the items it holds go back to the queue."""
        answers: list[Mapping[str, str]] = [{"node": node}, {"id": push_id}]
        await run_steps(await self._command_link(node), PREFIX + "push-remove", answers)
