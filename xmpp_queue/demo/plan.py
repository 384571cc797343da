"""What the demo runs: its queue, its accounts, and the character of each worker.

Why a module of its own: these few numbers are the demo's script (the queue's
limits, which items are poison, when *crashy* crashes). The parts that start
servers, read the ledger or draw the display only act on them.
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from typing import Any

from xmpp_queue.client import Account, Job

SERVICE = "queue.localhost"
NODE = "demo"
DEAD_LETTER_NODE = "demo/dead-letter"
LOCK_TIMEOUT = 5
MAX_DELIVERIES = 3
POISON_EVERY, POISON_AT = 40, 17  # item n with n % 40 == 17 fails on every worker
CRASH_AT = 0.3  # crashy's connection drops when this share of the items is done
DEMO_FILES = ("demo.sqlite", "demo.sqlite-wal", "demo.sqlite-shm", "component.toml")
EXAMPLE_ROLES = {"worker": "example-worker", "publisher": "example-publisher", "admin": "admin"}
"""The accounts connection.json offers the examples, by role."""


class DemoFailure(Exception):
    """The demo cannot go on; the message says what to do."""


class DemoBusy(DemoFailure):
    """Another demo runs in the same directory: starting would delete its database."""


@dataclass
class WorkerPlan:
    """One demo worker's character."""

    name: str
    queue_requests: int
    seconds_per_item: float
    fail_first_of_every: int = 0  # gives back item n on first sight when n % this == 0
    crashes: bool = False

    def handler(self) -> Any:
        """The worker's job: sleep, fail on poison, give some items back once."""

        async def handle(job: Job) -> None:
            data = job.json()
            await asyncio.sleep(self.seconds_per_item)
            if data.get("poison"):
                raise ValueError(f"poison item {data['n']}")
            if self.fail_first_of_every and data["n"] % self.fail_first_of_every == 0:
                if job.delivery == 1:
                    raise RuntimeError(f"{self.name} gives item {data['n']} back")

        return handle


PLANS = (
    WorkerPlan("fast", queue_requests=4, seconds_per_item=0.005),
    WorkerPlan("flaky", queue_requests=3, seconds_per_item=0.015, fail_first_of_every=5),
    WorkerPlan("crashy", queue_requests=2, seconds_per_item=0.04, crashes=True),
)


def is_poison(n: int) -> bool:
    return n % POISON_EVERY == POISON_AT


@dataclass
class Accounts:
    """The demo's XMPP accounts (fresh passwords each run), registered on its Prosody."""

    passwords: dict[str, str] = field(default_factory=dict)

    @classmethod
    def generate(cls) -> Accounts:
        names = [f"worker-{p.name}" for p in PLANS]
        names += ["publisher", "example-worker", "example-publisher", "admin"]
        return cls({n: secrets.token_urlsafe(9) for n in names})

    def jid(self, name: str) -> str:
        return f"{name}@localhost"

    def account(self, name: str, port: int) -> Account:
        """*name*'s login to the demo's Prosody (loopback, plain text)."""
        return Account(
            jid=self.jid(name),
            password=self.passwords[name],
            service=SERVICE,
            host="127.0.0.1",
            port=port,
            allow_plain=True,
        )
