#!/usr/bin/env python3
"""A queue publisher: put numbered JSON jobs on an xmpp-queue node.

Publishes ``--count`` items ``{"n": 0}``, ``{"n": 1}``... with up to
``--window`` publishes in flight (the publisher waits when the service falls
behind), then prints their item ids. ``--create`` makes the node a queue first
(nothing happens if it exists); new queues are whitelisted, so name the worker
accounts allowed to take jobs with ``--member`` (repeatable; also for a queue this
account owns already).

Against the demo (``xmpp-queue demo --serve`` keeps Prosody and the component
running and writes ``xmpp-queue-demo/connection.json``)::

    python examples/publisher.py --connection xmpp-queue-demo/connection.json --count 20
    python examples/worker.py --connection xmpp-queue-demo/connection.json

Against your own server::

    python examples/publisher.py --jid app@example.org --password secret \\
        --service queue.example.org --node jobs --host xmpp.example.org --create \\
        --member worker@example.org

An admin lets workers into an existing queue without Python, too:
``xmpp-queue admin -c config.toml affiliations jobs --set worker@example.org=member``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time

from xmpp_queue.client import ClientError, Publisher, PublishError, json_payload
from xmpp_queue.client.options import account_from_args, add_login_options, parse_login_args

log = logging.getLogger("publisher")


class JobSource:
    """What to publish: here, numbered jobs; in real life, your work items."""

    def __init__(self, count: int, start: int) -> None:
        self.count = count
        self.start = start

    def payloads(self) -> list[str]:
        return [json_payload({"n": n}) for n in range(self.start, self.start + self.count)]


async def main(args: argparse.Namespace) -> int:
    source = JobSource(args.count, args.start)
    try:
        return await publish(args, source)
    except ClientError as exc:  # could not log in, create the node, or the server went away
        log.error("publisher failed: %s", exc)
        return 1


async def publish(args: argparse.Namespace, source: JobSource) -> int:
    async with Publisher(account_from_args(args), window=args.window) as pub:
        if args.create:
            created = await pub.create_queue(
                args.node, members=args.member, lock_timeout=args.lock_timeout
            )
            log.info("node=%s %s", args.node, "created" if created else "exists")
        started = time.monotonic()
        futures = [await pub.submit(args.node, payload) for payload in source.payloads()]
        failed = 0
        for future in futures:
            try:
                log.info("published item=%s", await future)
            except PublishError as exc:
                failed += 1
                log.error("publish failed: %s", exc)
        elapsed = time.monotonic() - started
        log.info("%d published in %.2f s, %d failed", len(futures) - failed, elapsed, failed)
    return 1 if failed else 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_login_options(parser, "publisher")
    parser.add_argument("--count", type=int, default=10, help="items to publish (10)")
    parser.add_argument("--start", type=int, default=0, help="first n (0)")
    parser.add_argument("--window", type=int, default=32, help="publishes in flight (32)")
    parser.add_argument("--create", action="store_true", help="create the queue node first")
    parser.add_argument("--lock-timeout", type=int, default=60, help="for --create (60 s)")
    parser.add_argument(
        "--member",
        action="append",
        default=[],
        metavar="JID",
        help="with --create: a worker account (bare JID) allowed to take jobs (repeatable)",
    )
    return parse_login_args(parser, "publisher")


if __name__ == "__main__":
    arguments = parse_args()
    logging.basicConfig(level=arguments.level, format="%(levelname)-8s %(name)s %(message)s")
    logging.getLogger("slixmpp").setLevel(logging.WARNING)
    raise SystemExit(asyncio.run(main(arguments)))
