"""``xmpp-queue demo``: a queue at work on this machine, in one command.

What it shows, in order: a private Prosody (Debian's package, free loopback
ports, its own config and data), a SQLite database migrated with alembic, the
component started as a user starts it (``python -m xmpp_queue run -c FILE``),
a queue node (lock timeout 5 s, 3 deliveries, then dead letters), a publisher,
and three workers of different speeds: *fast*, *flaky* (gives some items back
with an exception: unlock) and *crashy* (its connection is dropped a third of
the way through, without unsubscribing: the XMPP server's unavailable presence
makes the service hand its items to the others). A few *poison* items fail on
every worker and end on the dead-letter node after three deliveries.

The summary comes from the component's event ledger (the ``queue_events``
table), so it is the service's account, not the clients': every published item
must end acked or dead-lettered.

Everything it starts is a child process stopped in order on exit or Ctrl-C
(workers drain, then the component, then Prosody). With ``--serve`` the
servers stay up after the run for the examples; the connection details are in
``<dir>/connection.json`` (``python examples/worker.py --connection
xmpp-queue-demo/connection.json``).

The parts, one job each: :mod:`.plan` (the queue, the accounts, each worker's
character), :mod:`.directory` (the lock and the files it writes), :mod:`.processes`
(Prosody and the component), :mod:`.ledger` (the numbers, through the store's
ledger readers), :mod:`.display` (live and plain progress, the summary) and
:mod:`.run` (the steps in order).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from rich.console import Console

from xmpp_queue.demo.directory import lock_demo_dir
from xmpp_queue.demo.display import LiveDisplay, PlainDisplay
from xmpp_queue.demo.plan import DemoBusy, DemoFailure
from xmpp_queue.demo.run import Demo

__all__ = [
    "Demo",
    "DemoBusy",
    "DemoFailure",
    "LiveDisplay",
    "PlainDisplay",
    "add_demo_parser",
    "lock_demo_dir",
    "run_demo",
]


def add_demo_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="run a private Prosody, the component, a publisher and three workers",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("--items", type=_positive, default=200, help="items to publish (200)")
    parser.add_argument(
        "--no-live", action="store_true", help="plain progress lines instead of a live display"
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path("xmpp-queue-demo"),
        help="where the database, config, logs and connection.json go (./xmpp-queue-demo)",
    )
    parser.add_argument(
        "--serve",
        action="store_true",
        help="keep Prosody and the component running after the run (for the examples)",
    )
    parser.add_argument(
        "--timeout", type=float, default=0.0, help="give up after this many seconds (auto)"
    )
    return parser


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo; 0 when every item ended acked or dead-lettered, 130 on Ctrl-C."""
    console = Console(highlight=False)
    live = not args.no_live and console.is_terminal
    demo = Demo(args, console, live)
    try:
        return asyncio.run(demo.main())
    except KeyboardInterrupt:
        return 130
