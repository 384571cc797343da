"""A busy queue on a StateStore, run as a child process by the kill -9 test.

``python -m tests.storage.store_workload URL`` publishes to the queue
node ``q`` (created by the test) at full speed with four workers that ack
everything they get, and prints one line per fact the outside world was told:

- ``P <item id>``: the publish was answered (its commit returned);
- ``A <item id>``: the ack was answered (its delete committed).

Lines are flushed at once, so when the parent kills this process with SIGKILL
it knows which answers were given. It runs until killed.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from datetime import UTC, datetime

from xmpp_queue.core.effects import Effect, ItemNotice
from xmpp_queue.core.limits import Limits
from xmpp_queue.core.model import Actor
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.storage.store import StateStore

OWNER = Actor("owner@example.org/test")
WORKERS = {f"w{n}@example.org/r": Actor(f"w{n}@example.org/r") for n in range(4)}
WINDOW = 32


def tell(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main(url: str) -> None:
    store = await StateStore.open(url)
    service = PubSubService(
        store,
        lambda: datetime.now(UTC),
        lambda: uuid.uuid4().hex,
        # Full speed on purpose: this measures durability under load, not the
        # per-JID publish rate ([limits] publish_rate), so the rate is off here.
        ServiceSettings(
            access=ServiceAccess.for_domain("example.org"), limits=Limits(publish_rate=0)
        ),
    )
    await service.start()
    tasks: set[asyncio.Task[None]] = set()

    async def ack(worker: Actor, item_id: str) -> None:
        outcome = await service.retract(worker, "q", item_id)
        tell(f"A {item_id}")
        route(outcome.effects)

    def route(effects: tuple[Effect, ...]) -> None:
        for effect in effects:
            if isinstance(effect, ItemNotice) and effect.to in WORKERS:
                task = asyncio.create_task(ack(WORKERS[effect.to], effect.items[0].item_id))
                tasks.add(task)
                task.add_done_callback(tasks.discard)

    async def publisher(first: int) -> None:
        n = first
        while True:
            item_id = f"item-{n}"
            outcome = await service.publish(OWNER, "q", item_id, f"<job n='{n}'/>", 12)
            tell(f"P {item_id}")
            route(outcome.effects)
            n += WINDOW

    tell("READY")
    await asyncio.gather(*(publisher(k) for k in range(WINDOW)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
