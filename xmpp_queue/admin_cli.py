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
    xmpp-queue admin -j ops@example.org --json list     # for scripts

Connection options are the client library's (``xmpp_queue/client/options.py``,
shared with the example worker and publisher): ``--connection`` reads the demo's
connection.json. The password comes from ``-p``, else ``$XMPP_QUEUE_PASSWORD``,
else a prompt. ``--json`` prints one JSON object: the command's notes and its
result forms (fields by var; a table's rows by column var), values as the
service wrote them (strings).

Exit status: 0 done, 1 the service refused or reported an error, 2 bad usage or
no connection.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from slixmpp import ClientXMPP, Iq
from slixmpp.exceptions import IqError, IqTimeout
from slixmpp.plugins.xep_0004 import Form

from xmpp_queue.client.options import add_login_options, fill_from_connection

COMMANDS_NS = "http://jabber.org/protocol/commands"
PREFIX = "xmpp-queue#"  # the service's command nodes (xmpp_queue/admin/base.py)
TIMEOUT = 15.0
EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2

Answers = Sequence[Mapping[str, str | list[str]]]

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
}
"""Sub-command -> the service's command node (without the prefix)."""


class AdminClient(ClientXMPP):
    """An XMPP client that drives the service's admin commands."""

    def __init__(self, jid: str, password: str, *, plain: bool = False) -> None:
        config = {"feature_mechanisms": {"unencrypted_plain": True}} if plain else {}
        super().__init__(jid, password, plugin_config=config)
        if plain:
            self.enable_starttls = False
            self.enable_direct_tls = False
            self.enable_plaintext = True
        self.register_plugin("xep_0030")  # service discovery: the command list
        self.register_plugin("xep_0004")  # data forms
        self.register_plugin("xep_0050")  # ad-hoc commands

    async def start(self, address: tuple[str, int] | None) -> None:
        """Connect and wait until the session is up (or fail with the reason)."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def fail(reason: str) -> Any:
            def handler(event: Any) -> None:
                if not ready.done():
                    ready.set_exception(ConnectionError(f"{reason}: {event}"))

            return handler

        def started(_: Any) -> None:
            if not ready.done():
                ready.set_result(None)

        self.add_event_handler("session_start", started, disposable=True)
        self.add_event_handler("failed_all_auth", fail("authentication failed"), disposable=True)
        self.add_event_handler("connection_failed", fail("cannot connect"), disposable=True)
        if address:
            self.connect(*address)
        else:
            self.connect()
        try:
            await asyncio.wait_for(ready, TIMEOUT)
        except BaseException:
            self.cancel_connection_attempt()
            self.abort()
            raise

    async def stop(self) -> None:
        await self.disconnect()

    async def commands(self, service: str) -> list[tuple[str, str]]:
        """(node, name) of each command the service offers this account."""
        reply = await self.plugin["xep_0050"].get_commands(service, timeout=TIMEOUT)
        found = reply.xml.findall("{http://jabber.org/protocol/disco#items}query/*")
        return [(item.get("node", ""), item.get("name", "")) for item in found]

    async def run(self, service: str, node: str, answers: Answers) -> Iq:
        """Execute a command and answer its forms in order; returns the last reply.

        Each answer fills the form of one stage; the stage's own actions decide
        whether it is sent with ``next`` or ``complete``. A stage left unanswered
        is cancelled, so no session stays open on the service.
        """
        adhoc = self.plugin["xep_0050"]
        reply: Iq = await adhoc.send_command(service, node, timeout=TIMEOUT)
        for values in answers:
            command = reply["command"]
            if command["status"] != "executing":
                break
            action = "complete" if "complete" in command["actions"] else "next"
            reply = await adhoc.send_command(
                service,
                node,
                action=action,
                sessionid=command["sessionid"],
                payload=submit(values),
                timeout=TIMEOUT,
            )
        command = reply["command"]
        if command["status"] == "executing":
            await adhoc.send_command(
                service, node, action="cancel", sessionid=command["sessionid"], timeout=TIMEOUT
            )
            raise UsageError(f"{node} asked for more input than the command line gave")
        return reply


class UsageError(Exception):
    """Bad arguments: one line on standard error, exit status 2."""


def submit(values: Mapping[str, str | list[str]]) -> Form:
    form = Form()
    form["type"] = "submit"
    for var, value in values.items():
        form.add_field(var=var, value=value)
    return form


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
        target = _node(args)
        return node, [{"node": target}, {"confirm": _confirmed(args)}]
    raise UsageError(f"unknown command {action}")


# --- printing --------------------------------------------------------------------------


def form_json(form: Form) -> dict[str, Any]:
    """A result form as plain data: fields by var, a table as columns and rows."""
    out: dict[str, Any] = {"title": form["title"] or None}
    reported = form.get_reported()
    if reported:
        out["columns"] = [{"var": var, "label": f["label"] or var} for var, f in reported.items()]
        out["rows"] = [{var: row.get(var) for var in reported} for row in form.get_items()]
        return out
    fields: dict[str, Any] = {}
    for var, field in form.get_fields().items():
        if field["type"] == "fixed" or not var:
            continue
        fields[var] = field.get_value(convert=False)
    out["fields"] = fields
    return out


def reply_json(node: str, reply: Iq) -> dict[str, Any]:
    command = reply["command"]
    return {
        "command": node,
        "status": command["status"],
        "notes": [{"type": level, "text": text} for level, text in command["notes"]],
        "forms": [form_json(f) for f in command["substanzas"] if isinstance(f, Form)],
    }


def status_of(reply: Iq) -> int:
    return EXIT_REFUSED if any(level == "error" for level, _ in reply["command"]["notes"]) else 0


def print_reply(reply: Iq) -> None:
    """Print the notes and result forms of a completed command."""
    for level, text in reply["command"]["notes"]:
        print(f"{level}: {text}")
    for item in reply["command"]["substanzas"]:
        if isinstance(item, Form):
            print()
            print_form(item)


def print_form(form: Form) -> None:
    if form["title"]:
        print(form["title"])
        print("=" * len(form["title"]))
    reported = form.get_reported()
    if reported:
        columns = [(var, field["label"] or var) for var, field in reported.items()]
        rows = [[str(row.get(var) or "") for var, _ in columns] for row in form.get_items()]
        print_table([label for _, label in columns], rows)
        return
    for field in form.get_fields().values():
        value = field.get_value(convert=False)
        if field["type"] == "fixed":
            print(f"\n{value or ''}")
        elif isinstance(value, list):
            print(f"{field['label'] or field['var']}:")
            for line in value or ["(none)"]:
                print(f"  {line}")
        else:
            print(f"{field['label'] or field['var']}: {value if value is not None else ''}")


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    if not rows:
        print("(no rows)")


# --- command line ----------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The shared login options, --json, and one sub-command per admin command."""
    add_login_options(parser, "admin")
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
        host, sep, port = args.server.rpartition(":")
        if sep and host and port.isdigit():
            return host, int(port)
        return args.server, 5222
    if args.host or args.port:
        return args.host or "127.0.0.1", int(args.port or 5222)
    return None


def _normalise(args: argparse.Namespace) -> None:
    """Fill the login from --connection; the legacy flags; defaults from the JID."""
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
        raise UsageError("give --jid (an admin's JID) or --connection")
    if args.action != "commands":
        node, answers = plan(args)  # usage errors before any connection
    logging.basicConfig(level=logging.DEBUG if args.level == logging.DEBUG else logging.ERROR)
    xmpp = AdminClient(args.jid, _password(args), plain=args.allow_plain)
    service = args.service or f"queue.{xmpp.boundjid.domain}"
    try:
        await xmpp.start(_address(args))
    except (ConnectionError, TimeoutError) as exc:
        print(f"error: {exc or 'no session within the timeout'}", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.action == "commands":
            found = await xmpp.commands(service)
            if args.json:
                print(json.dumps([{"node": n, "name": name} for n, name in found], indent=2))
            else:
                for n, name in found:
                    print(f"{n:28} {name}")
            return EXIT_OK
        reply = await xmpp.run(service, node, answers)
        if args.json:
            print(json.dumps(reply_json(node, reply), indent=2))
        else:
            print_reply(reply)
        return status_of(reply)
    except IqError as exc:
        error = exc.iq["error"]
        if args.json:
            body = {"condition": error["condition"], "type": error["type"], "text": error["text"]}
            print(json.dumps({"error": body}))
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
