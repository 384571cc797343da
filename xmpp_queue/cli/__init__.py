"""The ``xmpp-queue`` command: run, migrate, check-config, pipeline, demo.

Exit statuses an operator (or systemd) can act on: 0 done; 1 a runtime
failure (the server refused the secret, the database is unreachable); 2 a
problem only the operator can fix by editing or migrating (a bad config key,
an un-migrated database, bad arguments). Every refusal is one line on
standard error that says what to do next.

The ``pipeline`` and ``demo`` sub-commands come from their own packages
(``xmpp_queue.pipeline.cli``, ``xmpp_queue.demo``); when one cannot be
imported (PySpark not installed) the command still exists and says why.

This package's ``__init__`` is the entry point (``xmpp-queue = xmpp_queue.cli:main``):
the parser and the dispatch. Each sub-command's work is in a module of its own:
``service`` (run, migrate, status), ``check_config``, ``probe``, ``extensions``
(admin, pipeline, demo); ``outcome`` (exit statuses, refusals) and ``startup``
(config file and logging) are what they share.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from xmpp_queue import __version__
from xmpp_queue.cli.check_config import cmd_check_config
from xmpp_queue.cli.extensions import EXTENSIONS
from xmpp_queue.cli.outcome import CommandError
from xmpp_queue.cli.probe import cmd_probe
from xmpp_queue.cli.service import cmd_migrate, cmd_run, cmd_status
from xmpp_queue.cli.startup import DEFAULT_CONFIG
from xmpp_queue.settings import LOG_LEVELS


def _log_level(value: str) -> str:
    level = value.upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(LOG_LEVELS)}")
    return level


def _add_config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-c",
        "--config",
        default=DEFAULT_CONFIG,
        metavar="FILE",
        help=f"configuration file (default: {DEFAULT_CONFIG}; see config.example.toml)",
    )
    parser.add_argument(
        "--log-level",
        type=_log_level,
        default=argparse.SUPPRESS,
        help="override [logging] level",
    )


def _placeholder(subparsers: Any, name: str, help_text: str) -> None:
    """List *name* in ``--help`` without importing its package (see :func:`build_parser`)."""
    stub = subparsers.add_parser(name, help=help_text, add_help=False)
    stub.add_argument("rest", nargs=argparse.REMAINDER)


def _command_of(argv: Sequence[str]) -> str | None:
    """The sub-command named on the command line (the first word that is no option)."""
    words = iter(argv)
    for word in words:
        if word == "--log-level":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser. ``pipeline`` and ``demo`` bring their own parsers, imported only when
    *argv* names them: ``run`` must not pay for PySpark or the demo's imports at start-up.
    ``argv=None`` builds them all."""
    command = None if argv is None else _command_of(argv)
    parser = argparse.ArgumentParser(
        prog="xmpp-queue",
        description="XEP-0060 publish-subscribe with XEP-0254 queueing, "
        "as an XEP-0114 component of Prosody or ejabberd.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--log-level", type=_log_level, default=None, help="override [logging] level"
    )
    subparsers = parser.add_subparsers(metavar="COMMAND", required=True)

    run = subparsers.add_parser("run", help="serve the component (after migrate)")
    _add_config_option(run)
    run.set_defaults(_handler=cmd_run)

    migrate = subparsers.add_parser("migrate", help="create or upgrade the database schema")
    _add_config_option(migrate)
    migrate.set_defaults(_handler=cmd_migrate)

    status = subparsers.add_parser(
        "status", help="which process serves the component, and the standbys"
    )
    _add_config_option(status)
    status.set_defaults(_handler=cmd_status)

    check = subparsers.add_parser("check-config", help="validate the config file, print it")
    _add_config_option(check)
    check.set_defaults(_handler=cmd_check_config)

    probe = subparsers.add_parser(
        "probe", help="ask a running component's /healthz or /readyz (systemd, scripts)"
    )
    _add_config_option(probe)
    probe.add_argument("check", choices=("healthz", "readyz"), help="alive, or ready to serve")
    probe.add_argument("--url", help="http://HOST:PORT of the listener (default: from -c FILE)")
    probe.add_argument(
        "--wait", type=float, default=0.0, metavar="SECONDS", help="retry for this long"
    )
    probe.set_defaults(_handler=cmd_probe)

    for name, (help_text, add) in EXTENSIONS.items():
        if argv is None or command == name:
            add(subparsers)
        else:
            _placeholder(subparsers, name, help_text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    try:
        return int(args._handler(args))
    except CommandError as exc:
        print(f"xmpp-queue: {exc}", file=sys.stderr)
        return exc.status
