"""A sharded deployment for the integration tests: one config, several processes.

The public name ``shards.localhost`` (the directory) and three shards
``p0..p2.shards.localhost`` are declared on the session's Prosody and ejabberd
(``integration.COMPONENTS``). :class:`ShardedCluster` writes one config with a
``[shards]`` table and a short lease, migrates the database, and starts
``python -m xmpp_queue run`` processes; each process's log says which shards it
serves (``event=lease_acquired name=...`` then ``event=connected jid=...``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import signal
import time
from collections.abc import AsyncIterator, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.kit.integration import (
    SHARD_JIDS,
    SHARDED_JID,
    SHARDS_SECRET,
    ComponentProcess,
    XmppServer,
    make_component,
)
from xmpp_queue.cli.startup import LOG_DATE_FORMAT

LEASE = 2  # seconds: a hung shard process is replaced quickly in tests
_TERM = re.compile(r"event=lease_acquired name=(\S+)")


class ShardedCluster:
    """Processes of one sharded config; each writes its own log."""

    def __init__(self, base: ComponentProcess) -> None:
        self.base = base
        self.procs: list[ComponentProcess] = []
        self.paused: set[int] = set()  # pids stopped with SIGSTOP

    @classmethod
    def make(
        cls,
        server: XmppServer,
        url: str,
        workdir: Path,
        per_process: int = 1,
        http: dict[str, str] | None = None,
    ) -> ShardedCluster:
        base = make_component(
            server,
            url,
            workdir / "shards",
            jid=SHARDED_JID,
            secret=SHARDS_SECRET,
            access={"queue_access_model": "open"},
            http=http,
        )
        text = base.config_path.read_text().replace(
            f'url = "{url}"', f'url = "{url}"\nlease_seconds = {LEASE}'
        )
        domains = ", ".join(f'"{d}"' for d in SHARD_JIDS)
        text += f"\n[shards]\ndomains = [{domains}]\nper_process = {per_process}\n"
        base.config_path.write_text(text)
        base.migrate()
        return cls(base)

    def add(self) -> ComponentProcess:
        n = len(self.procs)
        proc = dataclasses.replace(
            self.base,
            log_path=self.base.log_path.with_name(f"{self.base.log_path.stem}-{n}.log"),
            process=None,
        )
        proc.spawn()
        self.procs.append(proc)
        return proc

    def serves(self, proc: ComponentProcess, *, paused_too: bool = False) -> set[str]:
        """The names (shards, the directory) *proc* serves now, from its log: alive,
        not paused (unless *paused_too*: a paused process still believes it serves),
        and for each name its latest term began after its latest step-down and has
        connected."""
        if not proc.running or proc.process is None:
            return set()
        if proc.process.pid in self.paused and not paused_too:
            return set()
        log = proc.run_log()
        held: set[str] = set()
        for name in set(_TERM.findall(log)):
            began = log.rfind(f"event=lease_acquired name={name} ")
            ended = log.rfind(f"event=stepped_down component={name} ")
            if began > ended and log.find(f"event=connected jid={name} ", began) >= 0:
                held.add(name)
        return held

    def serving(self) -> dict[str, ComponentProcess]:
        """Name -> the process serving it (shards and the directory)."""
        found: dict[str, ComponentProcess] = {}
        for proc in self.procs:
            for name in self.serves(proc):
                found[name] = proc
        return found

    def settled(self) -> bool:
        """Whether each name is claimed by exactly one process, none of them paused."""
        for name in (SHARDED_JID, *SHARD_JIDS):
            claims = [p.process.pid for p in self.claims(name) if p.process is not None]
            if len(claims) != 1 or claims[0] in self.paused:
                return False
        return True

    async def wait_all_served(
        self, within: float = 60.0, *, settled: bool = False
    ) -> dict[str, ComponentProcess]:
        """Until the directory and every shard are served (with *settled*, each by
        exactly one process: a resumed one has stepped down); name -> process."""
        wanted = {SHARDED_JID, *SHARD_JIDS}
        deadline = time.monotonic() + within
        while not wanted <= set(found := self.serving()) or (settled and not self.settled()):
            if time.monotonic() > deadline:
                logs = "\n".join(
                    f"--- {p.log_path.name}\n{p.run_log()[-4000:]}" for p in self.procs
                )
                raise AssertionError(f"not all served within {within}s ({found}):\n{logs}")
            await asyncio.sleep(0.1)
        return found

    def kill(self, proc: ComponentProcess) -> None:
        """SIGKILL: a crash (a paused process is killed as it is)."""
        if proc.process is not None:
            self.paused.discard(proc.process.pid)
        proc.kill()

    def pause(self, proc: ComponentProcess) -> None:
        """SIGSTOP: a hung process (its lease runs out; its sockets stay open)."""
        assert proc.process is not None
        os.kill(proc.process.pid, signal.SIGSTOP)
        self.paused.add(proc.process.pid)

    def resume(self, proc: ComponentProcess) -> None:
        assert proc.process is not None
        os.kill(proc.process.pid, signal.SIGCONT)
        self.paused.discard(proc.process.pid)

    def terms(self, name: str) -> list[float]:
        """When each term of *name* began (epoch seconds, the logs' clock: whole
        seconds, rounded down), over every process's whole log, in order."""
        found = re.compile(rf"^(\S+) .*event=lease_acquired name={re.escape(name)} ", re.M)
        return sorted(
            datetime.strptime(m.group(1), LOG_DATE_FORMAT).timestamp()
            for p in self.procs
            for m in found.finditer(p.log_text())
        )

    def takeovers(self, name: str) -> int:
        """Terms of *name* begun after its first one."""
        return max(0, len(self.terms(name)) - 1)

    def claims(self, name: str) -> list[ComponentProcess]:
        """Every live process whose log says it serves *name* now, paused ones too
        (a paused process still believes it serves; so would a fenced one)."""
        return [p for p in self.procs if name in self.serves(p, paused_too=True)]

    async def stop(self) -> None:
        for proc in self.procs:
            if proc.process is not None and proc.process.pid in self.paused:
                self.resume(proc)
        await asyncio.gather(*(p.astop() for p in self.procs))


def admin_config(cluster: ShardedCluster, server: XmppServer, accounts: Any) -> Path:
    """A copy of the cluster's config with an ``[admin]`` login (the admin CLI's -c)."""
    config = cluster.base.config_path
    admin = config.with_name("admin.toml")
    admin.write_text(
        config.read_text() + f'\n[admin]\njid = "{accounts.admin_jid}"\n'
        f'password = "{accounts.password}"\n'
        f'server = "{server.host}:{server.c2s_port}"\nplain = true\n'
    )
    return admin


async def _fetch(url: str, query: str, *args: Any) -> list[Any]:
    import asyncpg

    from xmpp_queue.storage.lease import asyncpg_dsn

    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        return list(await conn.fetch(query, *args))
    finally:
        await conn.close()


async def placement_rows(url: str) -> dict[str, tuple[str, int]]:
    """node -> (shard, epoch) as ``node_placement`` holds them now."""
    rows = await _fetch(url, "SELECT node_id, shard, epoch FROM node_placement")
    return {str(r[0]): (str(r[1]), int(r[2])) for r in rows}


async def ledger_of(url: str, node: str) -> list[tuple[str, str]]:
    """(kind, item id) of every ledger event of *node*, in order."""
    query = "SELECT kind, item_id FROM queue_events WHERE node = $1 ORDER BY id"
    return [(str(r[0]), str(r[1])) for r in await _fetch(url, query, node)]


async def locks_per_holder(url: str, nodes: Iterable[str]) -> dict[str, int]:
    """Full JID -> how many items of *nodes* are locked to it now (the service's
    own count, what a subscription's ``queue_requests`` bounds)."""
    query = (
        "SELECT lock_jid, count(*) FROM items WHERE node_id = ANY($1::text[]) "
        "AND locked_by IS NOT NULL GROUP BY lock_jid"
    )
    return {str(r[0]): int(r[1]) for r in await _fetch(url, query, list(nodes))}


async def stored_items(url: str, nodes: Iterable[str]) -> dict[str, int]:
    """node -> items still stored (waiting or locked); a node with none is absent."""
    query = "SELECT node_id, count(*) FROM items WHERE node_id = ANY($1::text[]) GROUP BY node_id"
    return {str(r[0]): int(r[1]) for r in await _fetch(url, query, list(nodes))}


async def lease_holders(url: str) -> dict[str, str]:
    """name -> holder (``host:pid``) of every unexpired lease, by the database's clock."""
    query = "SELECT name, holder FROM leader_leases WHERE expires_at > now()"
    return {str(r[0]): str(r[1]) for r in await _fetch(url, query)}


@pytest.fixture
async def sharded(xmpp_server: Any, pg_database: str, tmp_path: Any) -> AsyncIterator[Any]:
    """A :class:`ShardedCluster` on the session's server and a fresh PostgreSQL
    database; its processes are stopped after the test."""
    cluster = ShardedCluster.make(xmpp_server, pg_database, tmp_path)
    yield cluster
    await cluster.stop()


async def close_clients(workers: Iterable[Any], publisher: Any, grace: float) -> None:
    """Stop *workers* (each within 20 s, else abort) and close *publisher* likewise."""
    for worker in workers:
        try:
            await asyncio.wait_for(worker.stop(grace=grace), 20)
        except TimeoutError:
            worker.abort()
    try:
        await asyncio.wait_for(publisher.close(), 20)
    except TimeoutError:
        publisher.abort()
