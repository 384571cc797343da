"""``xmpp-queue admin`` on a sharded service (docs/scaling.md): which shard to ask.

Why: the admin commands are ad-hoc commands of one component, and a sharded
service has several (a shard per component domain, the directory on the public
name). The CLI names the public service like every client; from here:

- a command about one queue goes to the queue's shard, found by asking the
  public name (its redirect names the shard; an unsharded service answers itself);
- ``create-node`` asks the directory to place the new name (a pubsub create sent
  to the directory places it and redirects; sent only when ``-c`` names
  ``[shards]``, since an unsharded service would create the node itself);
- ``list`` and ``status`` (every queue) run on every shard of ``[shards]``, one
  answer per shard.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from slixmpp import Iq

from xmpp_queue.admin_client import AdminClient
from xmpp_queue.admin_output import dumps, print_reply, reply_json, status_of

EVERY_QUEUE = ("list", "status")


async def service_for(
    xmpp: AdminClient, args: argparse.Namespace, service: str, answers: Sequence[Any]
) -> str:
    """The component to run a one-queue command on."""
    queue = answers[0].get("node") if answers else None
    if not isinstance(queue, str) or not queue:
        return service
    if args.action == "create-node":
        return await xmpp.place_new(service, queue) if getattr(args, "shards", ()) else service
    return await xmpp.service_of(service, queue)


async def run_on_every_shard(
    xmpp: AdminClient, args: argparse.Namespace, node: str, answers: Any
) -> int:
    """Run a command about every queue on each shard; print each shard's answer."""
    replies: list[tuple[str, Iq]] = []
    for shard in args.shards:
        replies.append((shard, await xmpp.run(shard, node, answers)))
    if args.json:
        print(dumps([{"service": shard, **reply_json(node, r)} for shard, r in replies]))
    else:
        for shard, reply in replies:
            print(f"== {shard}")
            print_reply(reply)
    return max(status_of(r) for _, r in replies)
