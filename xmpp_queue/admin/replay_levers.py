"""Replay commands: seek a queue to a time or to a snapshot, take, list and delete
snapshots (docs/queueing.md, "Retention, seek and snapshots").

Unlike the other commands these are open to a queue's **owners** as well as to
the service's admins: replaying one's own queue is everyday work for the team
that owns it, not an operator's lever. The guard in ``commands.py`` lets anyone
the service admits start them (``owners_may``); each step then calls the
core with the requester as its actor, and the core's owner-or-admin check
(``core/replay.py``) refuses the others with ``forbidden`` before anything
changes. An admin of the commands acts as the service's system actor, as in
every other command.

Each is one form, final at once, so a script (the CLI, the client library's
``Publisher.seek``) answers it in one go.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from slixmpp.plugins.xep_0004 import Form

from xmpp_queue.admin.base import NODE_PREFIX, AdminCommand
from xmpp_queue.admin.errors import BadPayload
from xmpp_queue.admin.flow import CommandSession
from xmpp_queue.admin.forms import (
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
from xmpp_queue.core.model import Node
from xmpp_queue.core.replay import SeekReport

SNAPSHOT_COLUMNS: tuple[Column, ...] = (
    ("name", "Snapshot", None),
    ("created_at", "Taken at", TIME),
)


def parse_instant(raw: str, label: str) -> datetime:
    """A XEP-0082 date-time with its offset (``2024-05-01T12:00:00Z``): a seek
    target without one would mean a different moment on every machine."""
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        raise BadPayload(
            f"{label}: '{raw}' is not a date-time (e.g. 2024-05-01T12:00:00Z)"
        ) from None
    if value.tzinfo is None:
        raise BadPayload(f"{label}: '{raw}' has no time zone (add Z or +02:00)")
    return value


class ReplayCommand(AdminCommand):
    """Shared by the replay commands: who acts, and the queue picker."""

    owners_may: ClassVar[bool] = True
    instructions: ClassVar[str] = ""

    async def _queues(self, s: CommandSession) -> list[Node]:
        nodes = await self.service.list_nodes(self.actor(s))
        return sorted((n for n in nodes if n.config.queue), key=lambda n: n.node_id)

    async def start(self, s: CommandSession, form: Submitted) -> None:
        queues = await self._queues(s)
        if not queues:
            s.finish("There are no queue nodes you may replay.", level="warn")
            return
        question = new_form(self.name, self.instructions)
        add_node_choice(question, queues, label="Node", desc="A queue you own")
        self.add_fields(question)
        s.ask(question, self.act, final=True)

    def add_fields(self, question: Form) -> None:
        """The command's own fields after the node."""

    async def act(self, s: CommandSession, form: Submitted) -> None:
        raise NotImplementedError


def _seek_result(name: str, node: str, target: str, report: SeekReport) -> Form:
    result = new_form(name, kind="result")
    add_typed(result, "node", "Node", node)
    add_typed(result, "target", "Sought to", target)
    add_typed(result, "replayed", "Items waiting again", report.replayed, INTEGER)
    add_typed(result, "still_acked", "Items still acked", report.still_acked, INTEGER)
    return result


class SeekQueue(ReplayCommand):
    node = NODE_PREFIX + "seek"
    name = "Seek a queue"
    instructions = (
        "Bring retained (acked) items back: those published at or after a time, or "
        "those unacked when a snapshot was taken. Give exactly one of the two. "
        "Waiting and locked items are not touched."
    )

    def add_fields(self, question: Form) -> None:
        add_field(question, var="to", label="To time", desc="e.g. 2024-05-01T12:00:00Z")
        add_field(question, var="snapshot", label="To snapshot", desc="A snapshot's name")

    async def act(self, s: CommandSession, form: Submitted) -> None:
        node = self.chosen_node(s, form)
        when = form.text("to", "To time")
        snapshot = form.text("snapshot", "To snapshot")
        if (when is None) == (snapshot is None):
            raise BadPayload("give exactly one of 'To time' and 'To snapshot'")
        actor = self.actor(s)
        if when is not None:
            instant = parse_instant(when, "To time")
            report = s.changed(await self.service.replay.seek_time(actor, node, instant))
            target = instant.isoformat()
        else:
            assert snapshot is not None
            report = s.changed(await self.service.replay.seek_snapshot(actor, node, snapshot))
            target = f"snapshot {snapshot}"
        s.finish(
            f"Sought '{node}' to {target}: {report.replayed} item(s) waiting again, "
            f"{report.still_acked} still acked.",
            _seek_result(self.name, node, target, report),
        )


class TakeSnapshot(ReplayCommand):
    node = NODE_PREFIX + "snapshot"
    name = "Take a snapshot"
    instructions = (
        "Remember this moment: a later seek to the snapshot brings back every item "
        "unacked now or published after (while the queue retains acked items)."
    )

    def add_fields(self, question: Form) -> None:
        add_field(question, var="name", label="Snapshot name", required=True)

    async def act(self, s: CommandSession, form: Submitted) -> None:
        node = self.chosen_node(s, form)
        name = form.choice("name", "Snapshot name")
        taken = s.changed(await self.service.replay.take_snapshot(self.actor(s), node, name))
        result = new_form(self.name, kind="result")
        add_typed(result, "node", "Node", node)
        add_typed(result, "name", "Snapshot", taken.name)
        add_typed(result, "created_at", "Taken at", taken.created_at, TIME)
        s.finish(f"Took snapshot '{taken.name}' of '{node}'.", result)


class ListSnapshots(ReplayCommand):
    node = NODE_PREFIX + "snapshots"
    name = "List snapshots"
    instructions = "A queue's snapshots and how many acked items it retains."

    async def act(self, s: CommandSession, form: Submitted) -> None:
        node = self.chosen_node(s, form)
        found, retained = await self.service.replay.snapshots(self.actor(s), node)
        rows: list[dict[str, Cell]] = [
            {"name": snap.name, "created_at": snap.created_at} for snap in found
        ]
        summary = new_form(self.name, kind="result")
        add_typed(summary, "node", "Node", node)
        add_typed(summary, "retained", "Acked items retained", retained, INTEGER)
        s.finish(
            f"'{node}': {len(rows)} snapshot(s), {retained} acked item(s) retained.",
            summary,
            table(f"Snapshots of {node}", SNAPSHOT_COLUMNS, rows, "snapshots"),
        )


class DeleteSnapshot(ReplayCommand):
    node = NODE_PREFIX + "snapshot-delete"
    name = "Delete a snapshot"
    instructions = "Forget a snapshot (the retained items stay until their retention ends)."

    def add_fields(self, question: Form) -> None:
        add_field(question, var="name", label="Snapshot name", required=True)

    async def act(self, s: CommandSession, form: Submitted) -> None:
        node = self.chosen_node(s, form)
        name = form.choice("name", "Snapshot name")
        s.changed(await self.service.replay.delete_snapshot(self.actor(s), node, name))
        s.finish(f"Deleted snapshot '{name}' of '{node}'.")
