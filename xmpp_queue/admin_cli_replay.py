"""The ``xmpp-queue admin`` sub-commands on retention and replay: seek, snapshot,
snapshots, snapshot-delete (their argument lists and the answers they give the
service's command forms, ``xmpp_queue/admin/replay_levers.py``).

These commands are open to a queue's owners as well as to admins, so the
``admin`` CLI works for a team that owns its queue without being an operator::

    xmpp-queue admin -c config.toml seek jobs --to 2024-05-01T12:00:00Z
    xmpp-queue admin -c config.toml snapshot jobs before-deploy
    xmpp-queue admin -c config.toml seek jobs --snapshot before-deploy
    xmpp-queue admin -c config.toml snapshots jobs
    xmpp-queue admin -c config.toml snapshot-delete jobs before-deploy
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime

from xmpp_queue.admin_client import UsageError

REPLAY_SUBCOMMANDS = {
    "seek": "seek",
    "snapshot": "snapshot",
    "snapshots": "snapshots",
    "snapshot-delete": "snapshot-delete",
}
"""Sub-command -> the service's command node (without the prefix)."""

Answer = dict[str, str | list[str]]
CommandMaker = Callable[..., argparse.ArgumentParser]


def add_replay_commands(command: CommandMaker) -> None:
    """Add the sub-commands; *command(name, help, node_help)* makes one parser."""
    seek = command("seek", "bring retained (acked) items of a queue back", "the queue")
    target = seek.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--to", metavar="TIME", help="items published at or after TIME (ISO 8601 with zone)"
    )
    target.add_argument("--snapshot", metavar="NAME", help="items unacked when NAME was taken")
    take = command("snapshot", "take a named snapshot of a queue", "the queue")
    take.add_argument("name", metavar="NAME", help="the snapshot's name")
    command("snapshots", "a queue's snapshots and retained items", "the queue")
    drop = command("snapshot-delete", "delete a snapshot", "the queue")
    drop.add_argument("name", metavar="NAME", help="the snapshot's name")


def _instant(text: str) -> str:
    """Checked here so that a typo fails before any connection."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--to {text}: not a date-time (e.g. 2024-05-01T12:00:00Z)") from None
    if value.tzinfo is None:
        raise UsageError(f"--to {text}: add a time zone (Z or +02:00)")
    return value.isoformat()


def plan_replay(args: argparse.Namespace, node: str) -> list[Answer]:
    """The answers to the one form of these commands, for queue *node*."""
    action = args.action
    if action == "seek":
        if args.to is not None:
            return [{"node": node, "to": _instant(args.to)}]
        return [{"node": node, "snapshot": args.snapshot}]
    if action in ("snapshot", "snapshot-delete"):
        return [{"node": node, "name": args.name}]
    if action == "snapshots":
        return [{"node": node}]
    raise UsageError(f"unknown command {action}")
