#!/usr/bin/env python3
"""A queue worker: take jobs from an xmpp-queue node, square numbers, ack.

Each item the service hands over is one job: its payload is XEP-0335 JSON such
as ``{"n": 7}``. A job that returns normally is acked (retracted); one that
raises is given back (unlocked) for another worker, and the service gives up on
it after the node's ``max_deliveries`` (it then goes to the dead-letter node).
Ctrl-C drains: no new jobs, the running ones finish, then the worker leaves.

Against the demo (it keeps Prosody and the component running with ``--serve``
and writes the connection details to ``xmpp-queue-demo/connection.json``)::

    xmpp-queue demo --serve                                  # terminal 1
    python examples/worker.py --connection xmpp-queue-demo/connection.json
    python examples/publisher.py --connection xmpp-queue-demo/connection.json

Against your own server, give everything on the command line::

    python examples/worker.py --jid bee@example.org --password secret \\
        --service queue.example.org --node jobs --host xmpp.example.org --port 5222
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random

from xmpp_queue.client import ClientError, Job, Worker
from xmpp_queue.client.options import account_from_args, add_login_options, parse_login_args

log = logging.getLogger("worker")


class SquareWorker:
    """The job logic, kept apart from the plumbing: one async method per job."""

    def __init__(self, fail_rate: float, max_items: int | None) -> None:
        self.fail_rate = fail_rate
        self.max_items = max_items
        self.done = 0
        self.enough = asyncio.Event()

    async def handle(self, job: Job) -> None:
        """Square ``n``; raising gives the job back to the queue."""
        data = job.json()
        if random.random() < self.fail_rate:
            raise RuntimeError(f"could not square {data!r} this time")
        await asyncio.sleep(0.05)  # the "work"
        n = data.get("n", 0) if isinstance(data, dict) else data
        log.info("item=%s n=%s square=%s delivery=%d", job.item_id, n, n * n, job.delivery)
        self.done += 1
        if self.max_items is not None and self.done >= self.max_items:
            self.enough.set()


async def main(args: argparse.Namespace) -> int:
    logic = SquareWorker(args.fail_rate, args.max_items)
    worker = Worker(
        account_from_args(args),  # who logs in, where, and the service
        args.node,
        logic.handle,
        queue_requests=args.queue_requests,
        name=args.name,
    )
    run = asyncio.ensure_future(worker.run())  # Ctrl-C / SIGTERM drain it
    enough = asyncio.ensure_future(logic.enough.wait())
    await asyncio.wait({run, enough}, return_when=asyncio.FIRST_COMPLETED)
    if not run.done():
        await worker.stop()
    enough.cancel()
    try:
        stats = await run
    except ClientError as exc:  # could not log in or subscribe, or the server went away
        log.error("worker failed: %s", exc)
        return 1
    log.info("stopped: acked=%d failed=%d lost=%d", stats.acked, stats.failed, stats.lost)
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_login_options(parser, "worker")
    parser.add_argument("--queue-requests", type=int, default=2, help="jobs at a time (2)")
    parser.add_argument("--fail-rate", type=float, default=0.0, help="share of jobs to fail")
    parser.add_argument("--max-items", type=int, help="stop after this many jobs")
    return parse_login_args(parser, "worker")


if __name__ == "__main__":
    arguments = parse_args()
    logging.basicConfig(level=arguments.level, format="%(levelname)-8s %(name)s %(message)s")
    logging.getLogger("slixmpp").setLevel(logging.WARNING)
    raise SystemExit(asyncio.run(main(arguments)))
