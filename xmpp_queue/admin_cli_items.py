"""The ``xmpp-queue admin`` sub-commands on items and members: consumers, peek,
publish, move, delete-item, affiliations (their argument lists and the answers
they give the service's command forms). ``admin_cli.py`` holds the rest."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path

from xmpp_queue.admin_client import UsageError
from xmpp_queue.client.payload import json_payload

AFFILIATIONS = ("owner", "publisher", "publish-only", "member", "outcast", "none")

ITEM_SUBCOMMANDS = {
    "consumers": "consumers",
    "peek": "peek",
    "publish": "publish",
    "move": "move",
    "delete-item": "delete-item",
    "affiliations": "affiliations",
}
"""Sub-command -> the service's command node (without the prefix)."""

Answer = dict[str, str | list[str]]
CommandMaker = Callable[..., argparse.ArgumentParser]


def add_item_commands(command: CommandMaker) -> None:
    """Add the sub-commands; *command(name, help, node_help)* makes one parser."""
    command("consumers", "a queue's subscribers: window, items in flight, idle", "the queue")
    peek = command("peek", "browse items oldest first, locking nothing", "the node")
    peek.add_argument("--max", type=int, default=20, help="items per page (1-100, default 20)")
    peek.add_argument("--after", help="the last item id of the previous page")
    publish = command("publish", "publish one item", "the node")
    body = publish.add_mutually_exclusive_group(required=True)
    body.add_argument("--payload", help="one XML element (or @FILE)")
    body.add_argument(
        "--data",
        dest="json_body",
        metavar="JSON",
        help="JSON text (or @FILE), sent as XEP-0335 <json/>",
    )
    publish.add_argument("--id", dest="item_id", help="the item id (default: the service's)")
    publish.add_argument(
        "--attribute",
        action="append",
        default=[],
        metavar="K=V",
        help="an attribute (repeatable)",
    )
    move = command("move", "move one item (not locked) to another node", "the node it is in")
    move.add_argument("item", metavar="ITEM", help="the item id")
    move.add_argument("to", metavar="TO_NODE", help="the node it goes to")
    move.add_argument("--as", dest="new_id", help="its id there (default: the same)")
    delete = command("delete-item", "delete one item (its holder is told)", "the node")
    delete.add_argument("item", metavar="ITEM", help="the item id")
    affs = command(
        "affiliations", "list or set a node's members, publishers and owners", "the node"
    )
    affs.add_argument(
        "--set",
        dest="affiliate",
        action="append",
        default=[],
        metavar="JID=AFF",
        help=f"give JID an affiliation, one of {', '.join(AFFILIATIONS)} (repeatable)",
    )
    affs.add_argument(
        "--remove", action="append", default=[], metavar="JID", help="= --set JID=none"
    )


def _text(value: str) -> str:
    if value.startswith("@"):
        try:
            return Path(value[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{value}: {exc.strerror or exc}") from None
    return value


def _attributes(pairs: Sequence[str]) -> list[str]:
    for pair in pairs:
        if "=" not in pair or not pair.partition("=")[0].strip():
            raise UsageError(f"--attribute {pair}: expected NAME=VALUE")
    return list(pairs)


def _affiliations(args: argparse.Namespace) -> Answer:
    by_affiliation: dict[str, list[str]] = {}
    pairs = [*args.affiliate, *(f"{jid}=none" for jid in args.remove)]
    for pair in pairs:
        jid, _, aff = pair.rpartition("=")
        if not jid or aff not in AFFILIATIONS:
            raise UsageError(
                f"--set {pair}: expected JID=AFF, AFF one of {', '.join(AFFILIATIONS)}"
            )
        by_affiliation.setdefault(aff, []).append(jid)
    return dict(by_affiliation)


def plan_item(args: argparse.Namespace, node: str) -> list[Answer]:
    """The answers to the forms of one of these commands, for queue/node *node*."""
    action = args.action
    if action == "consumers":
        return [{"node": node}]
    if action == "peek":
        return [{"node": node, "max": str(args.max), "after": args.after or ""}]
    if action == "publish":
        if args.json_body is not None:
            text = _text(args.json_body)
            try:
                payload = json_payload(json.loads(text))
            except ValueError as exc:
                raise UsageError(f"--data: not JSON: {exc}") from None
        else:
            payload = _text(args.payload)
        answer: Answer = {"node": node, "payload": payload, "item": args.item_id or ""}
        answer["attributes"] = _attributes(args.attribute)
        return [answer]
    if action == "move":
        return [
            {"node": node, "item": args.item, "target": args.to, "target_item": args.new_id or ""}
        ]
    if action == "delete-item":
        return [{"node": node, "item": args.item}]
    if action == "affiliations":
        return [{"node": node}, _affiliations(args)]
    raise UsageError(f"unknown command {action}")
