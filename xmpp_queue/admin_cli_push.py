"""The ``xmpp-queue admin`` sub-commands on push subscriptions: push-add, push-list,
push-remove (the service's XEP-0050 commands of ``admin/push_levers.py``)::

    xmpp-queue admin -c config.toml push-add jobs https://hooks.example.com/jobs \\
        --bearer-file /run/secrets/jobs-token --secret-file /run/secrets/jobs-hmac
    xmpp-queue admin -c config.toml push-list jobs
    xmpp-queue admin -c config.toml push-remove jobs 3f2a9c0d11b7

Why secrets never come from the command line: argv is visible to every user of the
machine (``ps``, ``/proc/*/cmdline``) and lands in shell history. The bearer token
and the HMAC secret are read from a file (``--bearer-file``, ``--secret-file``; one
trailing newline is dropped) or, without one, from ``$XMPP_QUEUE_PUSH_BEARER`` and
``$XMPP_QUEUE_PUSH_SECRET``. The service masks them in every answer.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from xmpp_queue.admin_client import UsageError

PUSH_SUBCOMMANDS = {"push-add": "push-add", "push-list": "push-list", "push-remove": "push-remove"}
"""Sub-command -> the service's command node (without the prefix)."""

BEARER_ENV, SECRET_ENV = "XMPP_QUEUE_PUSH_BEARER", "XMPP_QUEUE_PUSH_SECRET"

Answer = dict[str, str | list[str]]
CommandMaker = Callable[..., argparse.ArgumentParser]


def add_push_commands(command: CommandMaker) -> None:
    """Add the sub-commands; *command(name, help, node_help)* makes one parser."""
    add = command("push-add", "POST a queue's items to an HTTP endpoint", "the queue")
    add.add_argument("url", metavar="URL", help="the endpoint (the service's [push] rules apply)")
    add.add_argument(
        "--bearer-file", metavar="FILE", help=f"the bearer token's file (else ${BEARER_ENV})"
    )
    add.add_argument(
        "--secret-file", metavar="FILE", help=f"the HMAC-SHA256 secret's file (else ${SECRET_ENV})"
    )
    add.add_argument(
        "--max-in-flight", type=int, default=8, metavar="N", help="most POSTs at once (default 8)"
    )
    command("push-list", "a queue's push subscriptions (secrets masked)", "the queue")
    remove = command("push-remove", "end a push subscription", "the queue")
    remove.add_argument("push_id", metavar="SUBID", help="its id (push-list shows it)")


def secret_from(path: str | None, env: str, flag: str) -> str:
    """The secret in file *path*, else in ``$env``, else ``""`` (none)."""
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{flag} {path}: {exc.strerror or exc}") from None
        text = text.removesuffix("\n")
        if not text:
            raise UsageError(f"{flag} {path}: the file is empty")
        return text
    return os.environ.get(env, "")


def plan_push(args: argparse.Namespace, node: str) -> list[Answer]:
    """The answers to the forms of one of these commands, for queue *node*."""
    if args.action == "push-list":
        return [{"node": node}]
    if args.action == "push-remove":
        return [{"node": node}, {"id": args.push_id}]
    if args.action == "push-add":
        if args.max_in_flight < 1:
            raise UsageError("--max-in-flight: at least 1")
        return [
            {"node": node},
            {
                "url": args.url,
                "bearer": secret_from(args.bearer_file, BEARER_ENV, "--bearer-file"),
                "secret": secret_from(args.secret_file, SECRET_ENV, "--secret-file"),
                "max_in_flight": str(args.max_in_flight),
            },
        ]
    raise UsageError(f"unknown command {args.action}")
