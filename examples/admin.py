# mypy: disable-error-code="no-untyped-call"
# (slixmpp's plugin APIs are untyped: send_command, Form, get_reported ...)
"""A small command-line admin client for xmpp-queue, over XEP-0050 ad-hoc commands.

It logs in as an admin (a JID listed in ``[admins]`` of config.toml) and runs
the service's admin commands the way any XMPP client does: execute, answer each
form from the command line, print the result. No database access, no private
API: what works here works from Gajim, Psi or Conversations too.

    python examples/admin.py -j admin@example.org list
    python examples/admin.py -j admin@example.org details jobs
    python examples/admin.py -j admin@example.org unlock jobs --item 42
    python examples/admin.py -j admin@example.org unlock jobs --holder worker@example.org/w1
    python examples/admin.py -j admin@example.org redrive jobs/dead-letter --count 10
    python examples/admin.py -j admin@example.org status
    python examples/admin.py -j admin@example.org commands

The password comes from ``-p``, else ``$XMPP_QUEUE_PASSWORD``, else a prompt.
``--server HOST:PORT`` skips DNS; ``--plain`` allows an unencrypted loopback
stream (a private test server), never use it across a network.
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
from pathlib import Path
from typing import Any

from slixmpp import ClientXMPP, Iq
from slixmpp.exceptions import IqError, IqTimeout
from slixmpp.plugins.xep_0004 import Form

COMMANDS_NS = "http://jabber.org/protocol/commands"
PREFIX = "xmpp-queue#"  # the service's command nodes (xmpp_queue/admin/base.py)
TIMEOUT = 15.0

Answers = Sequence[Mapping[str, str]]


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
        await asyncio.wait_for(ready, TIMEOUT)

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
            raise SystemExit(f"{node} asked for more input than the command line gave")
        return reply


def submit(values: Mapping[str, str]) -> Form:
    form = Form()
    form["type"] = "submit"
    for var, value in values.items():
        form.add_field(var=var, value=value)
    return form


# --- printing -------------------------------------------------------------------------------


def print_reply(reply: Iq) -> int:
    """Print the notes and result forms of a completed command; 1 if it reported an error."""
    status = 0
    for level, text in reply["command"]["notes"]:
        print(f"{level}: {text}")
        status = status or int(level == "error")
    for item in reply["command"]["substanzas"]:
        if isinstance(item, Form):
            print()
            print_form(item)
    return status


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


# --- command line ---------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--connection",
        help="connection.json written by `xmpp-queue demo` (fills jid, password, service, "
        "server; implies --plain)",
    )
    parser.add_argument("-j", "--jid", help="admin JID to log in as")
    parser.add_argument("-p", "--password", help="password (default: $XMPP_QUEUE_PASSWORD)")
    parser.add_argument("-s", "--service", help="the queue component's JID (default: queue.DOMAIN)")
    parser.add_argument("--server", help="HOST:PORT of the XMPP server (default: from DNS)")
    parser.add_argument("--plain", action="store_true", help="allow an unencrypted stream")
    parser.add_argument("-v", "--verbose", action="store_true", help="log the XMPP traffic")
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("list", help="every queue with its backlog, in-flight and dead letters")
    details = sub.add_parser("details", help="one queue: configuration, subscribers, locks")
    details.add_argument("node")
    unlock = sub.add_parser("unlock", help="give locked items back to the queue")
    unlock.add_argument("node")
    which = unlock.add_mutually_exclusive_group(required=True)
    which.add_argument("--item", help="one locked item id")
    which.add_argument("--holder", help="every item held by this subscriber JID")
    redrive = sub.add_parser("redrive", help="move dead letters back to their queue")
    redrive.add_argument("node", help="the dead-letter node, e.g. jobs/dead-letter")
    redrive.add_argument("--count", type=int, help="how many, oldest first (default: all)")
    sub.add_parser("status", help="version, uptime, database and counts")
    sub.add_parser("commands", help="the commands this account may run")
    return parser.parse_args(argv)


def plan(args: argparse.Namespace) -> tuple[str, list[dict[str, str]]]:
    """The command node to run and the answer to each of its forms."""
    if args.action == "list":
        return PREFIX + "overview", []
    if args.action == "details":
        return PREFIX + "details", [{"node": args.node}]
    if args.action == "unlock":
        target = {"item": args.item} if args.item else {"holder": args.holder}
        return PREFIX + "unlock", [{"node": args.node}, target]
    if args.action == "redrive":
        count = "" if args.count is None else str(args.count)
        return PREFIX + "redrive", [{"node": args.node, "count": count}]
    return PREFIX + "status", []


def apply_demo_connection(args: argparse.Namespace) -> None:
    """Fill the login from the connection.json that ``xmpp-queue demo`` writes."""
    demo = json.loads(Path(args.connection).read_text())
    account = demo["accounts"]["admin"]
    args.jid = args.jid or account["jid"]
    args.password = args.password or account["password"]
    args.service = args.service or demo["service"]
    args.server = args.server or f"{demo['host']}:{demo['port']}"
    args.plain = True


async def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.connection:
        apply_demo_connection(args)
    if not args.jid:
        print("error: give --jid or --connection", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.ERROR,
        format="%(levelname)-8s %(message)s",
    )
    password = args.password or os.environ.get("XMPP_QUEUE_PASSWORD") or getpass.getpass()
    xmpp = AdminClient(args.jid, password, plain=args.plain)
    service = args.service or f"queue.{xmpp.boundjid.domain}"
    address = None
    if args.server:
        host, _, port = args.server.rpartition(":")
        address = (host, int(port))
    try:
        await xmpp.start(address)
    except (ConnectionError, TimeoutError) as exc:
        print(f"error: {exc or 'no session within the timeout'}", file=sys.stderr)
        return 2
    try:
        if args.action == "commands":
            for node, name in await xmpp.commands(service):
                print(f"{node:28} {name}")
            return 0
        node, answers = plan(args)
        return print_reply(await xmpp.run(service, node, answers))
    except IqError as exc:
        error = exc.iq["error"]
        print(f"error: {error['condition']} ({error['type']}): {error['text']}", file=sys.stderr)
        return 1
    except IqTimeout:
        print(f"error: {service} did not answer", file=sys.stderr)
        return 1
    finally:
        await xmpp.stop()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
