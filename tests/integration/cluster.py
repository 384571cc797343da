"""Several ``xmpp-queue run`` processes of one component on one PostgreSQL database.

Used by the high-availability tests and by ``bench/takeover.py``: start
processes with one config, find the active one by its log, kill or pause it,
and time how long until a client's publish is answered again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from slixmpp import ClientXMPP
from slixmpp.exceptions import IqError, IqTimeout

from tests.integration.queue_helpers import (
    WORKER_ACCOUNTS,
    create_node,
    is_transient,
    publish,
    set_affiliations,
    unique,
)
from tests.kit.integration import ComponentProcess, XmppServer, make_component

ACQUIRED = "event=lease_acquired"
STEPPED_DOWN = "event=stepped_down"
STANDING_BY = "event=standing_by"
CONNECTED = "event=connected"

T = TypeVar("T")

LEASE = 2  # seconds: short, so a paused process is replaced quickly in tests


class Cluster:
    """Processes sharing ``base``'s config file; each writes its own log."""

    def __init__(self, base: ComponentProcess) -> None:
        self.base = base
        self.procs: list[ComponentProcess] = []
        self.paused: set[int] = set()  # pids stopped with SIGSTOP

    def add(self) -> ComponentProcess:
        """Spawn one more process (it becomes active or stands by)."""
        n = len(self.procs)
        proc = dataclasses.replace(
            self.base,
            log_path=self.base.log_path.with_name(f"{self.base.log_path.stem}-{n}.log"),
            process=None,
        )
        proc.spawn()
        self.procs.append(proc)
        return proc

    def _serving(self, proc: ComponentProcess) -> bool:
        """Alive, not paused, and its latest term began after its latest step-down
        and is connected."""
        if not proc.running or proc.process is None or proc.process.pid in self.paused:
            return False
        log = proc.run_log()
        acquired = log.rfind(ACQUIRED)
        return acquired > log.rfind(STEPPED_DOWN) and log.find(CONNECTED, acquired) >= 0

    def active(self) -> ComponentProcess | None:
        serving = [p for p in self.procs if self._serving(p)]
        return serving[0] if len(serving) == 1 else None

    def standing_by(self, proc: ComponentProcess) -> bool:
        log = proc.run_log()
        return proc.running and log.rfind(STANDING_BY) > log.rfind(ACQUIRED)

    async def wait_active(self, within: float = 30.0) -> ComponentProcess:
        deadline = time.monotonic() + within
        while (found := self.active()) is None:
            if time.monotonic() > deadline:
                logs = "\n".join(
                    f"--- {p.log_path.name}\n{p.run_log()[-3000:]}" for p in self.procs
                )
                raise AssertionError(f"no single active process within {within}s:\n{logs}")
            await asyncio.sleep(0.05)
        return found

    async def wait_standing_by(self, proc: ComponentProcess, within: float = 30.0) -> None:
        deadline = time.monotonic() + within
        while not self.standing_by(proc):
            if time.monotonic() > deadline:
                raise AssertionError(f"{proc.log_path.name} not standing by:\n{proc.run_log()}")
            await asyncio.sleep(0.05)

    def kill(self, proc: ComponentProcess) -> None:
        proc.kill()

    def pause(self, proc: ComponentProcess) -> None:
        assert proc.process is not None
        os.kill(proc.process.pid, signal.SIGSTOP)
        self.paused.add(proc.process.pid)

    def resume(self, proc: ComponentProcess) -> None:
        assert proc.process is not None
        os.kill(proc.process.pid, signal.SIGCONT)
        self.paused.discard(proc.process.pid)

    def takeovers(self) -> int:
        """Terms begun after the first one, over every process's whole log."""
        return sum(p.log_text().count(ACQUIRED) for p in self.procs) - 1

    async def stop(self) -> None:
        for proc in self.procs:
            if proc.process is not None and proc.process.pid in self.paused:
                self.resume(proc)
        await asyncio.gather(*(p.astop() for p in self.procs))


async def until_answered(
    client: ClientXMPP, node: str, item_id: str, within: float = 30.0
) -> float:
    """Publish *item_id* again and again until a publish is answered; when (monotonic)."""
    deadline = time.monotonic() + within
    while True:
        try:
            await publish(client, node, item_id, f"probe {item_id}", within=1.0)
            return time.monotonic()
        except (IqError, IqTimeout):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def across_takeovers(request: Callable[[], Awaitable[T]], within: float = 30.0) -> T:
    """*request* (idempotent), sent again while the component changes hands: a
    process that took the lease may still be connecting, or lose the lease again on
    a loaded machine, and a reply may be lost with the stream."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await request()
        except IqError as exc:
            if not is_transient(exc) or time.monotonic() > deadline:
                raise
        except IqTimeout:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.1)


async def create_queue_across_takeovers(client: ClientXMPP, **config: object) -> str:
    """``create_queue`` for tests that start while processes still race for the
    lease: a create whose answer was lost is found as ``conflict`` when sent again."""
    node = unique("q")

    async def create() -> str:
        try:
            return await create_node(client, node, queue=True, **config)
        except IqError as exc:
            if exc.condition == "conflict":
                return node
            raise

    node = await across_takeovers(create)
    rows = [(jid, "member") for jid in WORKER_ACCOUNTS if jid != client.boundjid.bare]
    await across_takeovers(lambda: set_affiliations(client, node, rows))
    return node


async def timed_takeover(
    cluster: Cluster,
    client: ClientXMPP,
    node: str,
    item_id: str,
    fail: Callable[[ComponentProcess], None],
    refill: Callable[[], Awaitable[None]] | None = None,
) -> float:
    """Fail the active process; seconds until a publish is answered again."""
    active = await cluster.wait_active()
    started = time.monotonic()
    fail(active)
    answered = await until_answered(client, node, item_id)
    if refill is not None:
        await refill()
    return answered - started


def make_cluster(server: XmppServer, url: str, tmp_path: Path, **options: object) -> Cluster:
    """A migrated database *url* and a config with a short lease; no process yet."""
    base = make_component(server, url, tmp_path / "cluster", **options)  # type: ignore[arg-type]
    text = base.config_path.read_text().replace(
        f'url = "{url}"', f'url = "{url}"\nlease_seconds = {LEASE}'
    )
    base.config_path.write_text(text)
    base.migrate()
    return Cluster(base)


async def held_locks(url: str, node: str) -> dict[str, tuple[str | None, object]]:
    """item id -> (lock holder's JID, lock deadline) of *node*'s locked items."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    from tests.integration.queue_helpers import async_database_url

    engine = create_async_engine(async_database_url(url))
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                text(
                    "SELECT item_id, lock_jid, lock_expires_at FROM items "
                    "WHERE node_id = :node AND locked_by IS NOT NULL"
                ),
                {"node": node},
            )
            return {r[0]: (r[1], r[2]) for r in rows}
    finally:
        await engine.dispose()
