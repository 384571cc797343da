"""``xmpp-queue admin ...``: every admin command of the service, from a terminal.

It logs in as an admin (a JID listed in ``[admins]`` of config.toml) and runs the
service's XEP-0050 ad-hoc commands the way any XMPP client does: execute, answer
each form from the command line, print the result. No database access, no
private API: what works here works from Gajim, Psi or Conversations too, and it
works against a component on another machine.

One sub-command per command the service offers (``ADMIN_COMMANDS`` in
``xmpp_queue/admin/commands.py``; a test checks both lists stay equal)::

    xmpp-queue admin -j ops@example.org list
    xmpp-queue admin -j ops@example.org details jobs
    xmpp-queue admin -j ops@example.org unlock jobs --item 42
    xmpp-queue admin -j ops@example.org unlock jobs --holder worker@example.org/w1
    xmpp-queue admin -j ops@example.org redrive jobs/dead-letter --count 10
    xmpp-queue admin -j ops@example.org kick jobs worker@example.org/w1
    xmpp-queue admin -j ops@example.org configure jobs --set lock_timeout=60
    xmpp-queue admin -j ops@example.org create-node jobs --set max_deliveries=5
    xmpp-queue admin -j ops@example.org purge jobs --yes
    xmpp-queue admin -j ops@example.org delete-node jobs --yes
    xmpp-queue admin -j ops@example.org status
    xmpp-queue admin -c config.toml consumers jobs
    xmpp-queue admin -c config.toml peek jobs --max 50 --after 42
    xmpp-queue admin -c config.toml publish jobs --data '{"n": 1}' --attribute tenant=acme
    xmpp-queue admin -c config.toml move jobs/dead-letter 42 jobs
    xmpp-queue admin -c config.toml delete-item jobs 42
    xmpp-queue admin -c config.toml affiliations jobs --set worker@example.org=member
    xmpp-queue admin -c config.toml seek jobs --snapshot before-deploy   # owners too
    xmpp-queue admin -c config.toml push-add jobs https://hooks.example.com/jobs \\
        --secret-file /run/secrets/jobs-hmac     # secrets from files or env, never argv
    xmpp-queue admin -c config.toml push-list jobs
    xmpp-queue admin -c config.toml push-remove jobs 3f2a9c0d11b7
    xmpp-queue admin -c config.toml --json list     # for scripts

Connection options are the client library's (``xmpp_queue/client/options.py``,
shared with the example worker and publisher): ``--connection`` reads the demo's
connection.json; ``-c config.toml`` reads its optional ``[admin]`` section and
``[component] jid`` (``admin_client.py``). The password comes from ``-p``, else
``[admin]``, else ``$XMPP_QUEUE_PASSWORD``, else a prompt. ``--json`` prints one
JSON object with typed values (``admin_output.py``). Output into a closed pipe
(``| head``) ends quietly.

Exit status: 0 done, 1 the service refused or reported an error, 2 bad usage or
no connection.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import logging
import os
import sys
from collections.abc import Sequence

from slixmpp import JID
from slixmpp.exceptions import IqError, IqTimeout

from xmpp_queue.admin_cli_items import ITEM_SUBCOMMANDS, add_item_commands, plan_item
from xmpp_queue.admin_cli_push import PUSH_SUBCOMMANDS, add_push_commands, plan_push
from xmpp_queue.admin_cli_replay import REPLAY_SUBCOMMANDS, add_replay_commands, plan_replay
from xmpp_queue.admin_cli_shards import EVERY_QUEUE, run_on_every_shard, service_for
from xmpp_queue.admin_client import AdminClient, UsageError, login_from_config
from xmpp_queue.admin_output import dumps, print_reply, reply_json, status_of
from xmpp_queue.client.account import Account, split_server
from xmpp_queue.client.options import add_login_options, fill_from_connection

COMMANDS_NS = "http://jabber.org/protocol/commands"
PREFIX = "xmpp-queue#"  # the service's command nodes (xmpp_queue/admin/base.py)
EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2

QUEUE_SETTINGS = {
    "lock_timeout": "pubsub#queue_lock_timeout",
    "max_deliveries": "pubsub#queue_max_deliveries",
    "dead_letter": "pubsub#queue_dead_letter",
    "retry_delay": "pubsub#queue_retry_delay",
    "retry_delay_max": "pubsub#queue_retry_delay_max",
}
"""``--set NAME=VALUE`` names -> the node configuration fields the commands ask for."""

SUBCOMMANDS = {
    "list": "overview",
    "details": "details",
    "purge": "purge",
    "unlock": "unlock",
    "redrive": "redrive",
    "kick": "kick",
    "configure": "configure",
    "create-node": "create-node",
    "delete-node": "delete-node",
    "status": "status",
    **ITEM_SUBCOMMANDS,
    **REPLAY_SUBCOMMANDS,
    **PUSH_SUBCOMMANDS,
}
"""Sub-command -> the service's command node (without the prefix)."""


# --- what to run -----------------------------------------------------------------------


def _settings(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in QUEUE_SETTINGS:
            raise UsageError(
                f"--set {pair}: expected NAME=VALUE with NAME one of {', '.join(QUEUE_SETTINGS)}"
            )
        out[QUEUE_SETTINGS[name]] = value.strip()
    return out


def _node(args: argparse.Namespace) -> str:
    node = args.target or args.node
    if not node:
        raise UsageError(f"{args.action}: name the node (NODE, or -n NODE)")
    return str(node)


def _confirmed(args: argparse.Namespace) -> str:
    if not args.yes:
        raise UsageError(f"{args.action} cannot be undone: add --yes to confirm")
    return "true"


def plan(args: argparse.Namespace) -> tuple[str, list[dict[str, str | list[str]]]]:
    """The command node to run and the answer to each of its forms."""
    action = args.action
    node = PREFIX + SUBCOMMANDS[action]
    if action in ("list", "status"):
        return node, []
    if action in ITEM_SUBCOMMANDS:
        return node, plan_item(args, _node(args))
    if action in REPLAY_SUBCOMMANDS:
        return node, plan_replay(args, _node(args))
    if action in PUSH_SUBCOMMANDS:
        return node, plan_push(args, _node(args))
    if action == "details":
        return node, [{"node": _node(args)}]
    if action == "unlock":
        target = {"item": args.item} if args.item else {"holder": args.holder}
        return node, [{"node": _node(args)}, target]
    if action == "redrive":
        count = "" if args.count is None else str(args.count)
        return node, [{"node": _node(args), "count": count}]
    if action == "kick":
        return node, [{"node": _node(args)}, {"jid": args.subscriber}]
    if action == "configure":
        values = _settings(args.set)
        if not values:
            raise UsageError("configure: give at least one --set NAME=VALUE")
        return node, [{"node": _node(args)}, dict(values)]
    if action == "create-node":
        form: dict[str, str | list[str]] = {"node": _node(args)}
        form["pubsub#queue"] = "false" if args.not_queue else "true"
        if args.title:
            form["pubsub#title"] = args.title
        form.update(_settings(args.set))
        return node, [form]
    if action in ("purge", "delete-node"):
        return node, [{"node": _node(args)}, {"confirm": _confirmed(args)}]
    raise UsageError(f"unknown command {action}")


# --- command line ----------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The shared login options, --json, and one sub-command per admin command."""
    add_login_options(parser, "admin")
    parser.add_argument("-c", "--config", help="config.toml: its [admin] login and [component] jid")
    parser.add_argument("--json", action="store_true", help="print one JSON object (scripts)")
    sub = parser.add_subparsers(dest="action", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, node: str | None = None) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        # also after the sub-command (SUPPRESS: absent here keeps the value given before)
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="JSON out")
        if node:
            p.add_argument("target", metavar="NODE", nargs="?", help=node)
        return p

    command("list", "every queue with its waiting, in-flight and dead-letter counts")
    command("details", "one queue: configuration, subscribers, locks", "the queue node")
    unlock = command("unlock", "give locked items back to the queue", "the queue node")
    which = unlock.add_mutually_exclusive_group(required=True)
    which.add_argument("--item", help="one locked item id")
    which.add_argument("--holder", help="every item held by this subscriber JID")
    redrive = command(
        "redrive", "move dead letters back to their queue", "the dead-letter node (q/dead-letter)"
    )
    redrive.add_argument("--count", type=int, help="how many, oldest first (default: all)")
    kick = command("kick", "unsubscribe a subscriber and release its items", "the node")
    kick.add_argument(
        "subscriber", metavar="JID", help="the subscriber JID, exactly as it subscribed"
    )
    settings = f"NAME=VALUE, NAME one of {', '.join(QUEUE_SETTINGS)} (repeatable)"
    configure = command("configure", "change a queue's settings", "the queue node")
    configure.add_argument("--set", action="append", default=[], metavar="N=V", help=settings)
    create = command("create-node", "create a node (a queue unless --not-queue)", "the new node id")
    create.add_argument("--title", help="a friendly name")
    create.add_argument("--not-queue", action="store_true", help="an ordinary pubsub node")
    create.add_argument("--set", action="append", default=[], metavar="N=V", help=settings)
    for name, what in (("purge", "remove every item of a node"), ("delete-node", "delete a node")):
        p = command(name, f"{what} (asks for --yes)", "the node")
        p.add_argument("--yes", action="store_true", help="confirm: this cannot be undone")
    command("status", "version, uptime, database and counts")
    add_item_commands(command)
    add_replay_commands(command)
    add_push_commands(command)
    command("commands", "the commands this account may run")


def _password(args: argparse.Namespace) -> str:
    if args.password:
        return str(args.password)
    env = os.environ.get("XMPP_QUEUE_PASSWORD")
    if env:
        return env
    if not sys.stdin.isatty():
        raise UsageError("no password: give -p, $XMPP_QUEUE_PASSWORD or --connection")
    return getpass.getpass(f"password for {args.jid}: ")


def _address(args: argparse.Namespace) -> tuple[str, int] | None:
    if args.server:
        host, port = split_server(args.server)
        return host, port or 5222
    if args.host or args.port:
        return args.host or "127.0.0.1", int(args.port or 5222)
    return None


def login_account(args: argparse.Namespace) -> Account:
    """The login the flags, ``-c`` and ``--connection`` gave, as one :class:`Account`
    (no server given: ``host=None``, DNS finds it; no service: ``queue.<domain>``)."""
    address = _address(args)
    service = args.service or f"queue.{JID(args.jid).domain}"
    host, port = address if address else (None, 5222)
    plain = bool(args.allow_plain)
    return Account(
        jid=args.jid,
        password=_password(args),
        service=service,
        host=host,
        port=port,
        allow_plain=plain,
    )


def _normalise(args: argparse.Namespace) -> None:
    """Fill the login from -c or --connection; the legacy flags; defaults from the JID."""
    if getattr(args, "config", None):
        login_from_config(args)
    host, port = args.host, args.port
    fill_from_connection(args, "admin")
    if not args.connection:
        # Without the demo's file, no loopback defaults: DNS finds the server.
        args.host, args.port = host, port
    if not getattr(args, "target", None):
        args.target = None


async def run(args: argparse.Namespace) -> int:
    _normalise(args)
    if not args.jid:
        raise UsageError(
            "give --jid (an admin's JID), -c config.toml with [admin], or --connection"
        )
    if args.action != "commands":
        node, answers = plan(args)  # usage errors before any connection
    logging.basicConfig(level=logging.DEBUG if args.level == logging.DEBUG else logging.ERROR)
    xmpp = AdminClient(login_account(args))
    service = xmpp.account.service
    try:
        await xmpp.start()
    except (ConnectionError, TimeoutError) as exc:
        print(f"error: {exc or 'no session within the timeout'}", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.action == "commands":
            found = await xmpp.commands(service)
            if args.json:
                print(dumps([{"node": n, "name": name} for n, name in found]))
            else:
                for n, name in found:
                    print(f"{n:28} {name}")
            return EXIT_OK
        if args.action in EVERY_QUEUE and bool(getattr(args, "shards", None)):
            return await run_on_every_shard(xmpp, args, node, answers)
        service = await service_for(xmpp, args, service, answers)  # sharded: the shard
        reply = await xmpp.run(service, node, answers)
        if args.json:
            print(dumps(reply_json(node, reply)))
        else:
            print_reply(reply)
        return status_of(reply)
    except IqError as exc:
        error = exc.iq["error"]
        if args.json:
            body = {"condition": error["condition"], "type": error["type"], "text": error["text"]}
            print(dumps({"error": body}))
        print(f"error: {error['condition']} ({error['type']}): {error['text']}", file=sys.stderr)
        return EXIT_REFUSED
    except IqTimeout:
        print(f"error: {service} did not answer", file=sys.stderr)
        return EXIT_REFUSED
    finally:
        await xmpp.stop()


def build_parser(prog: str = "xmpp-queue admin") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run the service's admin commands (XEP-0050) as an admin account.",
    )
    add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "xmpp-queue admin") -> int:
    args = build_parser(prog).parse_args(argv)
    return run_args(args)


def run_args(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(run(args))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `| head` closed the pipe: stop quietly. Point stdout at /dev/null so the
        # interpreter's final flush does not raise (and print) again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
