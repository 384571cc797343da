"""Command-line options for client programs: who logs in, where, and to which queue.

The example worker and publisher (and programs built like them, such as the
admin client) take the same login options; ``--connection`` fills them from the
``connection.json`` that ``xmpp-queue demo --serve`` writes, so the examples run
against the demo with one option. Explicit options win over the file.

The XMPP server is ``--server HOST[:PORT]`` (port 5222 by default) and a
plain-text login is ``--plain``; ``--host``, ``--port`` and ``--allow-plain``
are kept as older spellings of the same options. :func:`account_from_args`
turns the result into the :class:`~xmpp_queue.client.Account` that ``Worker``
and ``Publisher`` take.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from xmpp_queue.client.account import Account

REQUIRED = ("jid", "password", "service", "node")


def add_login_options(parser: argparse.ArgumentParser, who: str) -> None:
    """The account, the service, the node and the server, plus -q/-d for the log level."""
    parser.add_argument("--connection", type=Path, help="the demo's connection.json")
    parser.add_argument("-j", "--jid", help=f"the {who}'s JID")
    parser.add_argument("-p", "--password", help="its password")
    parser.add_argument("-s", "--service", help="the component's JID (queue.localhost)")
    parser.add_argument("-n", "--node", help="the queue node")
    parser.add_argument("--server", help="the XMPP server as HOST[:PORT] (default 127.0.0.1:5222)")
    parser.add_argument("--host", help=argparse.SUPPRESS)  # older spelling of --server HOST
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)  # ... and of :PORT
    parser.add_argument(
        "--plain",
        "--allow-plain",
        dest="allow_plain",
        action="store_true",
        help="plain-text login (loopback servers only)",
    )
    if who == "worker":
        parser.add_argument(
            "--name", help="this worker's name: its XMPP resource, shown in reports"
        )
    parser.add_argument("-q", "--quiet", action="store_const", dest="level", const=logging.ERROR)
    parser.add_argument("-d", "--debug", action="store_const", dest="level", const=logging.DEBUG)
    parser.set_defaults(level=logging.INFO)


def parse_login_args(parser: argparse.ArgumentParser, role: str) -> argparse.Namespace:
    """Parse, fill the gaps from ``--connection`` (the demo's *role* account), and
    stop with a usage error naming what is still missing."""
    args = parser.parse_args()
    if args.server:
        host, sep, port = args.server.rpartition(":")
        if sep and port.isdigit() and host:
            args.host = args.host or host
            args.port = args.port or int(port)
        else:
            args.host = args.host or args.server
    fill_from_connection(args, role)
    missing = [name for name in REQUIRED if not getattr(args, name)]
    if missing:
        parser.error("give --connection, or " + ", ".join(f"--{m}" for m in missing))
    return args


def fill_from_connection(args: argparse.Namespace, role: str) -> None:
    """Defaults from the demo's connection.json; explicit options win."""
    details = json.loads(args.connection.read_text()) if args.connection else {}
    account = details.get("accounts", {}).get(role, {})
    args.jid = args.jid or account.get("jid")
    args.password = args.password or account.get("password")
    args.service = args.service or details.get("service")
    args.node = args.node or details.get("node")
    args.host = args.host or details.get("host", "127.0.0.1")
    args.port = args.port or details.get("port", 5222)
    # The demo's Prosody listens on loopback without TLS.
    args.allow_plain = args.allow_plain or bool(details)


def account_from_args(args: argparse.Namespace) -> Account:
    """The parsed login options (after :func:`parse_login_args`) as an :class:`Account`."""
    return Account(
        jid=args.jid,
        password=args.password,
        service=args.service,
        host=args.host,
        port=args.port,
        allow_plain=args.allow_plain,
    )
