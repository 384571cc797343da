"""Running a sharded deployment: the directory and a pool of shard terms per process.

Why: one active process is the ceiling of one component (one Python core, one
stream to the XMPP server). With ``[shards]`` (docs/scaling.md) the nodes are
spread over several component domains on one PostgreSQL, and every process
runs the same config:

- **the directory** (the public name, ``[component] jid``) has a lease of its
  own; whichever process holds it serves the directory component
  (``xmpp/directory_component.py``) besides its shards;
- **the shards**: each has its own lease and fencing token (the lease table is
  keyed by name). A process serves at most ``per_process`` shards; while it has
  room it tries every shard it does not serve (in an order of its own, so
  processes starting together spread out), and a process with no room is busy,
  not a standby. A shard whose process dies or hangs is taken by a process with
  room: the pool of standbys covers every shard, not one;
- **a shard's term** is the one-component term of ``app/term.py`` with the shard's
  domain, a store of only its nodes (``storage/shard_backend.py``) and a
  placement guard that redirects requests for other shards' nodes
  (``xmpp/redirect.py``). The HTTP listener (``[http]``) is started by a shard
  term only when ``per_process`` is 1 (two terms cannot share its port); then a
  process serving no shard answers ``/healthz`` (alive) and ``/readyz`` (503,
  standby) as an unsharded standby does.

A fatal error of a term (a shard domain the XMPP server refuses) ends the
process with its status, as it would end an unsharded one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import logging
from typing import Any

from xmpp_queue.app.core_inputs import service_settings
from xmpp_queue.app.ending import serve
from xmpp_queue.app.run import signals_set, standby_http
from xmpp_queue.app.term import serve_term, warm_up
from xmpp_queue.config import Settings

log = logging.getLogger("xmpp_queue.sharding")


def shard_settings(settings: Settings, domain: str) -> Settings:
    """*settings* as one shard's term sees them: its domain is the component's."""
    shards = settings.shards
    assert shards is not None
    return dataclasses.replace(
        settings,
        component=dataclasses.replace(settings.component, jid=domain),
        http=settings.http if shards.per_process == 1 else None,
    )


@dataclasses.dataclass
class ShardTerm:
    """What a shard's term adds to ``app.term.serve_term`` (``app.term.ShardTerm``)."""

    url: str
    domain: str
    placements: Any  # storage.placement.PlacementTable
    shards: tuple[str, ...] = ()  # every shard of [shards] (the targets of a move)
    # The dashboard's reads of every shard's queues: a connection of their own, so a
    # grouped pass over the items never holds up the guard's lookups and claims.
    dashboard: Any = None

    async def open_store(self, fence: Any, backlog_bytes: int | None = None) -> Any:
        from xmpp_queue.storage.shard_backend import open_shard_store

        return await open_shard_store(self.url, fence, self.domain, backlog_bytes)

    def guard(self, store: Any, mover: Any) -> Any:
        from xmpp_queue.xmpp.redirect import PlacementGuard

        return PlacementGuard(
            self.domain,
            lambda node: node in store.state.nodes,
            self.placements.owner,
            self.placements.claim,
            mover.adopt,
        )

    def mover(self, store: Any, service: Any, send_effects: Any) -> Any:
        from xmpp_queue.sharding_moves import ShardMover

        return ShardMover(self.domain, self.shards, store, self.placements, service, send_effects)

    def deployment(self) -> Any:
        """Every shard's queues for this shard's dashboard (the placement table reads
        them from the shared database: ``core/deployment.py``)."""
        return self.dashboard if self.dashboard is not None else self.placements


def trial_order(domains: tuple[str, ...], holder: str) -> list[str]:
    """The order in which *holder* tries the shards: rotated by a hash of its
    name, so processes started together do not all wait on the first shard."""
    start = int.from_bytes(hashlib.sha256(holder.encode()).digest()[:4], "big") % len(domains)
    return [*domains[start:], *domains[:start]]


async def run_sharded(settings: Settings) -> int:
    """Serve the directory and shards until a signal; the exit status."""
    from xmpp_queue.storage.engine import is_sqlite

    if is_sqlite(settings.database.url):
        log.error("event=shards_need_postgresql hint='[shards] needs one shared PostgreSQL'")
        return 1
    _warm_up()
    stop = asyncio.Event()
    with signals_set(stop):
        directory = asyncio.ensure_future(_directory_loop(settings, stop))
        pool = asyncio.ensure_future(_shard_pool(settings, stop))
        await asyncio.wait({directory, pool}, return_when=asyncio.FIRST_COMPLETED)
        stop.set()  # one ended (a signal, or a fatal error): end the other too
        statuses = [await task for task in (directory, pool)]
    return max(statuses)


def _warm_up() -> None:
    """Import what a term needs before taking any lease: a term's first seconds are
    inside its lease, and the imports of a cold process take a good part of one."""
    warm_up()
    import xmpp_queue.storage.shard_backend
    import xmpp_queue.xmpp.directory_component  # noqa: F401


async def _directory_loop(settings: Settings, stop: asyncio.Event) -> int:
    """Stand by for the directory's lease, serve the directory, again if lost."""
    from xmpp_queue.core.account_lists import AccountLists
    from xmpp_queue.storage.lease import PostgresLease
    from xmpp_queue.storage.placement import PlacementTable
    from xmpp_queue.xmpp.directory import Directory
    from xmpp_queue.xmpp.directory_component import DirectoryComponent
    from xmpp_queue.xmpp.reconnect import HandshakeRejected

    comp, shards = settings.component, settings.shards
    assert shards is not None
    lease = PostgresLease(settings.database.url, comp.jid, ttl=settings.database.lease_seconds)
    placements = PlacementTable(settings.database.url)
    core = service_settings(settings)
    try:
        while not stop.is_set():
            if await lease.acquire(stop) is None:
                break
            directory = Directory(
                comp.jid,
                shards.domains,
                placements,
                core.access,
                core.admins,
                queue_defaults=core.defaults_for(True),
                lists=AccountLists(placements),
            )
            component = DirectoryComponent(
                comp.jid, comp.secret, comp.server_host, comp.server_port, directory
            )
            keeper = asyncio.ensure_future(lease.keep())
            log.info("event=starting role=directory component=%s token=%s", comp.jid, lease.token)
            server = f"{comp.server_host}:{comp.server_port}"
            try:
                status = await serve(component, stop, HandshakeRejected, comp.jid, server, keeper)
            finally:
                keeper.cancel()
            if status is not None:
                return status
            log.warning("event=stepped_down component=%s action=standby", comp.jid)
        return 0
    finally:
        await lease.release()
        await lease.close()
        await placements.close()


async def _shard_pool(settings: Settings, stop: asyncio.Event) -> int:
    """Serve up to ``per_process`` shards; take any shard whose lease is free."""
    from xmpp_queue.storage.lease import DATABASE_ERRORS, PostgresLease
    from xmpp_queue.storage.placement import PlacementTable

    shards = settings.shards
    assert shards is not None
    url, ttl = settings.database.url, settings.database.lease_seconds
    leases = {d: PostgresLease(url, d, ttl=ttl) for d in shards.domains}
    holder = next(iter(leases.values())).holder
    order = trial_order(shards.domains, holder)
    placements = PlacementTable(url)
    dashboard = PlacementTable(url)  # connects on the first page read (core/deployment.py)
    terms: dict[str, asyncio.Task[int | None]] = {}
    status = 0
    standby: Any = None  # /healthz and /readyz (503) while this process serves no shard
    listens = settings.http is not None and shards.per_process == 1
    try:
        while not stop.is_set():
            for domain, task in list(terms.items()):
                if task.done():
                    del terms[domain]
                    ended = task.result()
                    if ended:  # a fatal error of the term: the process ends with it
                        stop.set()
                        return ended
                    log.warning("event=stepped_down component=%s action=standby", domain)
            if listens and not terms and standby is None:
                standby = await standby_http(settings, holder)
            for domain in order:
                if len(terms) >= shards.per_process or stop.is_set():
                    break
                if domain in terms:
                    continue
                lease = leases[domain]
                try:
                    token = await asyncio.wait_for(lease.try_acquire(), ttl)
                except DATABASE_ERRORS as exc:
                    log.warning("event=lease_unreachable name=%s error=%s", domain, exc)
                    lease._drop_connection()
                    continue
                if token is None:
                    continue
                log.info("event=lease_acquired name=%s holder=%s token=%d", domain, holder, token)
                if standby is not None:  # the term's own listener takes the port
                    await standby.stop()
                    standby = None
                term = ShardTerm(url, domain, placements, shards.domains, dashboard)
                terms[domain] = asyncio.ensure_future(
                    serve_term(shard_settings(settings, domain), stop, lease, term)
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), leases[order[0]].poll)
        return status
    finally:
        if standby is not None:
            await standby.stop()
        for task in terms.values():
            with contextlib.suppress(Exception):
                await task
        for lease in leases.values():
            await lease.release()
            await lease.close()
        await placements.close()
        await dashboard.close()


async def shards_status(settings: Settings) -> tuple[str, bool]:
    """``xmpp-queue status`` of a sharded deployment: who serves the directory and
    each shard (with its node count), and the processes standing by. The flag:
    whether the directory and every shard are served."""
    from xmpp_queue.storage.lease import lease_status
    from xmpp_queue.storage.placement import PlacementTable

    shards = settings.shards
    assert shards is not None
    url = settings.database.url
    names = (settings.component.jid, *shards.domains)
    statuses = [await lease_status(url, name) for name in names]
    table = PlacementTable(url)
    try:
        counts = await table.counts()
    finally:
        await table.close()
    lines, serving, standing = [], True, {}
    for n, status in enumerate(statuses):
        role = "directory" if n == 0 else f"shard, {counts.get(status.name, 0)} nodes"
        if status.holder and status.expires_at is not None and status.acquired_at is not None:
            left = (status.expires_at - status.now).total_seconds()
            lines.append(
                f"{status.name} ({role}): active {status.holder} since "
                f"{status.acquired_at:%Y-%m-%d %H:%M:%S}Z (term {status.token}, "
                f"lease {left:.1f}s left)"
            )
        else:
            serving = False
            lines.append(f"{status.name} ({role}): no active process (last term {status.token})")
        for m in status.standbys(settings.database.lease_seconds):
            standing[m.holder] = m.seen_at
    busy = {s.holder for s in statuses[1:] if s.holder}
    idle = sorted(h for h in standing if h not in busy)
    lines.append(f"standbys: {len(idle)}")
    lines += [f"  {holder} standing by for any shard" for holder in idle]
    return "\n".join(lines), serving
