"""XEP-0050 ad-hoc commands from the client link, and the replay commands on it.

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
