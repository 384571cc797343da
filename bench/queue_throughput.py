"""Queue throughput of xmpp-queue through a private Prosody, read against a null component.

What it measures (issue 3, "Speed"): one publisher keeping a window of publishes
outstanding (or publishing at a fixed rate), workers with `pubsub#queue_requests` that ack
(retract) each item at once. Per scenario it prints items/s end to end (first publish to
last ack), publish-to-delivery latency p50/p99/max, and CPU microseconds per item of the
component, of Prosody and of the load generator itself (read from /proc).

The same light clients first drive a do-nothing component through the same Prosody:
`null-iq` (publish round trips only) and `null-message` (the full queue stanza flow, no
storage, no logic), so the component's figures read as a share of what the server allows.

Run from the repository root:
    python bench/queue_throughput.py                       # SQLite + PostgreSQL, window 32
    python bench/queue_throughput.py --window 32,1 --rate 500 --items 5000
    python bench/queue_throughput.py --null-only           # the baseline alone
    python bench/queue_throughput.py --rabbitmq --batch 1,8 --repeat 3  # issue 14's run
    python bench/queue_throughput.py --backends sqlite --rate 500 --skip-null \
        --metrics both --repeat 3                          # the cost of [http] metrics
    python bench/queue_throughput.py --rate 500 --raw-commit --rabbitmq --rabbitmq-ack both \
        --compare-src /tmp/prev --repeat 3                 # issue 26: the floor, one run
    python bench/queue_throughput.py --backends sqlite --window 0 --rate 500 --skip-null \
        --samples /tmp/samples                             # each item's times, a CSV per run
`--samples DIR` writes, per run, each measured item's send, answer, delivery and ack
times (seconds from the run's first send; the first line gives that origin on the
machine's monotonic clock, `time.perf_counter`, so the rows line up with timestamps
taken in another process).
Everything it starts (Prosody, components, py-spy) is stopped at the end; a global
`--timeout` bounds the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from load import (
    Latency,
    Publisher,
    Tracker,
    Worker,
    create_queue_node,
    disco_probe,
    is_result,
    ordered_model,
    queue_members,
    subscribe_queue,
)
from processes import (
    REPO,
    Child,
    component_config,
    cpu_seconds,
    drop_postgres_db,
    machine_busy_seconds,
    migrate,
    prosody_version,
    recreate_postgres_db,
    run_prosody,
    scratch_db_name,
    start_component,
    start_null_component,
)
from wire import LightClient

if TYPE_CHECKING:
    from xmpp_queue.servers.prosody import PrivateProsody

DOMAIN = "localhost"
QUEUE_DOMAIN = "queue.localhost"
NULL_DOMAIN = "null.localhost"
SECRET = "bench-secret"
PASSWORD = "bench-password"
NODE = "bench-queue"
PG_DB = scratch_db_name("xq_bench")  # this run's own, dropped at its end
T = TypeVar("T")
PG_URL = f"postgresql://postgres@127.0.0.1:5432/{PG_DB}"


@dataclass(frozen=True)
class Scenario:
    target: str  # null-iq | null-message | null-durable-BACKEND | sqlite | postgresql | rabbitmq
    window: int = 0  # closed loop: publishes outstanding
    rate: float = 0.0  # open loop: publishes per second
    metrics: bool = False  # [http] on, /metrics scraped during the measurement
    batch: int = 1  # workers' pubsub#queue_max_batch (and acks per retract); 1 = plain
    publish_batch: int = 1  # items per publish (XEP-0060 §13.11); 1 = plain
    model: str = "plain"  # item headers: plain | attrs3 | delay100 | keysN (load.item_headers)
    src: str = ""  # another checkout's component (--compare-src), "" = this one
    linger_ms: float = 0.0  # workers group acks (the client library's ack_linger); 0 = off
    wait_ms: float = 0.0  # workers' pubsub#queue_batch_wait (with batch > 1); 0 = off

    @property
    def label(self) -> str:
        load = f"rate {self.rate:g}/s" if self.rate else f"window {self.window}"
        batch = f", batch {self.batch}" if self.batch > 1 else ""
        batch += f", publish batch {self.publish_batch}" if self.publish_batch > 1 else ""
        batch += f", {self.model}" if self.model != "plain" else ""
        batch += f", ack linger {self.linger_ms:g} ms" if self.linger_ms else ""
        batch += f", batch wait {self.wait_ms:g} ms" if self.wait_ms else ""
        batch += ", previous commit" if self.src else ""
        return f"{self.target}{batch}, {load}" + (", metrics" if self.metrics else "")


@dataclass
class Figures:
    scenario: str
    items: int
    completed: bool
    seconds: float
    items_per_s: float
    delivery: Latency | None
    publish_rtt: Latency | None
    publish_to_ack: Latency | None
    component_us: float
    prosody_us: float
    loadgen_us: float
    other_cores: float
    steal_cores: float
    duplicates: int
    errors: int
    error_samples: list[str]
    max_in_flight: int = 0
    database_us: float = 0.0  # PostgreSQL's sessions of the component (0: SQLite, in it)


class SetupError(RuntimeError):
    """A step before the measurement failed (login, node creation, subscription)."""


async def wait_ready(client: LightClient, domain: str, server: Child, seconds: float) -> None:
    """Poll disco#info until the component answers (Prosody bounces until it connects)."""
    deadline = time.monotonic() + seconds
    n = 0
    while True:
        n += 1
        try:
            answer = await asyncio.wait_for(client.request(disco_probe(domain, n), f"probe{n}"), 5)
            if is_result(answer):
                return
        except TimeoutError:
            pass
        if not server.alive():
            raise SetupError(f"{server.name} exited:\n{server.tail()}")
        if time.monotonic() > deadline:
            raise SetupError(f"{domain} not reachable after {seconds:.0f} s:\n{server.tail()}")
        await asyncio.sleep(0.1)


async def _exited(server: Child) -> None:
    """Raises once the component process is gone (a pidfd turns readable at its exit)."""
    loop = asyncio.get_running_loop()
    gone = asyncio.Event()
    pidfd = os.pidfd_open(server.pid)
    loop.add_reader(pidfd, gone.set)
    try:
        await gone.wait()
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
    raise SetupError(f"{server.name} exited during the run:\n{server.tail()}")


async def wait_done(
    tracker: Tracker, clients: list[LightClient], server: Child, seconds: float
) -> bool:
    """True when the tracker's batch completes, False at the timeout.

    A client stream that closes or a component that dies ends the wait at once, loudly,
    instead of leaving it to the timeout.
    """
    done_wait: asyncio.Future[Any] = asyncio.ensure_future(tracker.done.wait())
    watch: asyncio.Future[Any] = asyncio.ensure_future(_exited(server))
    watched: list[asyncio.Future[Any]] = [c.closed for c in clients if c.closed is not None]
    try:
        finished, _ = await asyncio.wait(
            [done_wait, watch, *watched], timeout=seconds, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        done_wait.cancel()
        watch.cancel()
    for future in finished:
        if future is not done_wait:
            future.result()  # raises the stream's or the component's error
            raise SetupError("a client stream ended")
    return done_wait in finished


class CpuMeter:
    """CPU seconds of the component, Prosody and this process over the measured batch.

    Also what the rest of the machine used meanwhile (in cores): the machine is shared,
    and a run disturbed by someone else's load should say so.
    """

    def __init__(
        self, component_pid: int, prosody_pid: int, database_pids: list[int] | None = None
    ) -> None:
        self._pids = (component_pid, prosody_pid)
        self._database_pids = database_pids or []
        self._database_start = self._database()
        self._start = self._sample()
        self._machine = machine_busy_seconds()
        self._wall = time.perf_counter()
        self.spent = (0.0, 0.0, 0.0)
        self.database = 0.0
        self.other_cores = 0.0
        self.steal_cores = 0.0

    def _sample(self) -> tuple[float, float, float]:
        return (cpu_seconds(self._pids[0]), cpu_seconds(self._pids[1]), time.process_time())

    def _database(self) -> float:
        """CPU seconds of the component's PostgreSQL sessions (0 on SQLite: there the
        database works inside the component)."""
        total = 0.0
        for pid in self._database_pids:
            try:
                total += cpu_seconds(pid)
            except OSError:  # the session ended
                pass
        return total

    def stop(self) -> None:
        end = self._sample()
        self.database = self._database() - self._database_start
        busy, steal = machine_busy_seconds()
        wall = time.perf_counter() - self._wall
        self.spent = (end[0] - self._start[0], end[1] - self._start[1], end[2] - self._start[2])
        others = busy - self._machine[0] - sum(self.spent) - self.database
        self.other_cores = max(0.0, others / wall)
        self.steal_cores = (steal - self._machine[1]) / wall


def database_sessions(scenario: Scenario) -> list[int]:
    """The server processes of the bench database's sessions (the component's)."""
    if scenario.target not in ("postgresql", "null-durable-postgresql"):
        return []
    query = f"SELECT pid FROM pg_stat_activity WHERE datname = '{PG_DB}'"
    done = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-tAc", query],
        capture_output=True,
        text=True,
        check=True,
    )
    return [int(line) for line in done.stdout.split()]


class Bench:
    def __init__(self, args: argparse.Namespace, prosody: PrivateProsody, workdir: Path) -> None:
        self.args, self.prosody, self.workdir = args, prosody, workdir
        self.profiles: list[Path] = []
        self.metrics_address = ""
        self.runs = 0

    def _client(self, user: str, resource: str) -> LightClient:
        port = self.prosody.c2s_port
        return LightClient("127.0.0.1", port, DOMAIN, user, PASSWORD, resource)

    async def run(self, scenario: Scenario) -> Figures:
        if scenario.target.startswith("rabbitmq"):
            return await self._rabbitmq(scenario)
        if scenario.target == "raw-commit":
            return await self._raw_commit(scenario)
        tmp = Path(tempfile.mkdtemp(prefix="scenario-", dir=self.workdir))
        if scenario.target.startswith("null-"):
            mode, _, backend = scenario.target.removeprefix("null-").partition("-")
            database, extra = "", []
            if backend == "postgresql":
                recreate_postgres_db(PG_DB)
                database = PG_URL
            elif backend:  # sqlite, or sqlite-checkpointer
                database = str(tmp / "null.db")
                extra = ["--checkpointer"] if backend == "sqlite-checkpointer" else []
            port = self.prosody.component_port
            server = start_null_component(
                port, NULL_DOMAIN, SECRET, mode, tmp / "null.log", database, *extra
            )
            domain = NULL_DOMAIN
        else:
            server = self._start_component(
                scenario.target, tmp, scenario.metrics, Path(scenario.src or REPO)
            )
            domain = QUEUE_DOMAIN
        try:
            return await self._drive(scenario, domain, server, tmp)
        finally:
            server.stop()

    async def _raw_commit(self, scenario: Scenario) -> Figures:
        """One small durable SQLite commit at a time (``raw_commit``), paced at the
        scenario's rate, in the scratch directory of the bench databases: the disk's
        floor at this moment. Its commit time is shown as publish→delivery."""
        from raw_commit import commit_loop

        tmp = Path(tempfile.mkdtemp(prefix="scenario-", dir=self.workdir))
        busy0, steal0 = machine_busy_seconds()
        cpu0, started = cpu_seconds(os.getpid()), time.monotonic()
        samples = await asyncio.to_thread(
            commit_loop, tmp, self.args.items, scenario.rate, self.args.warmup
        )
        elapsed = time.monotonic() - started
        cpu1 = cpu_seconds(os.getpid())
        busy1, steal1 = machine_busy_seconds()
        return Figures(
            scenario=scenario.label,
            items=self.args.items,
            completed=True,
            seconds=elapsed,
            items_per_s=self.args.items / sum(samples) if not scenario.rate else scenario.rate,
            delivery=Latency.of(samples),
            publish_rtt=None,
            publish_to_ack=None,
            component_us=0.0,
            prosody_us=0.0,
            loadgen_us=(cpu1 - cpu0) / self.args.items * 1e6,
            other_cores=max(0.0, (busy1 - busy0) - (cpu1 - cpu0)) / elapsed,
            steal_cores=(steal1 - steal0) / elapsed,
            duplicates=0,
            errors=0,
            error_samples=[],
        )

    async def _rabbitmq(self, scenario: Scenario) -> Figures:
        """The same job on the machine's RabbitMQ (``rabbitmq_reference``), in this run,
        so the comparison shares the machine's load of the moment."""
        from rabbitmq_reference import one_run

        a = self.args
        options = argparse.Namespace(
            url=a.rabbitmq_url,
            items=a.items,
            warmup=a.warmup,
            window=scenario.window,
            rate=scenario.rate,
            workers=a.workers,
            prefetch=a.queue_requests,
            timeout=a.batch_timeout,
            ack_multiple=scenario.target == "rabbitmq-multiple",
        )
        r = await one_run(options)
        return Figures(
            scenario=scenario.label,
            items=a.items,
            completed=True,
            seconds=a.items / r["items_s"],
            items_per_s=r["items_s"],
            delivery=Latency(r["deliver_p50"], r["deliver_p99"], 0.0),
            publish_rtt=Latency(r["confirm_p50"], r["confirm_p99"], 0.0),
            publish_to_ack=None,
            component_us=r["broker_us"],
            prosody_us=0.0,
            loadgen_us=r["client_us"],
            other_cores=r["others"],
            steal_cores=0.0,
            duplicates=int(r["duplicates"]),
            errors=0,
            error_samples=[],
        )

    def _start_component(
        self, backend: str, tmp: Path, metrics: bool = False, src: Path = REPO
    ) -> Child:
        if backend == "postgresql":
            recreate_postgres_db(PG_DB)
            url = PG_URL
        else:
            url = f"sqlite:///{tmp / 'queue.db'}"
        config = component_config(
            tmp / "config.toml",
            jid=QUEUE_DOMAIN,
            secret=SECRET,
            port=self.prosody.component_port,
            database_url=url,
            log_level=self.args.log_level,
        )
        if metrics:
            self.metrics_address = f"127.0.0.1:{free_port()}"
            with config.open("a") as f:
                f.write(f'\n[http]\nlisten = "{self.metrics_address}"\n')
        migrate(config, tmp / "component.log", src=src)
        return start_component(config, tmp / "component.log", src)

    async def _drive(self, scenario: Scenario, domain: str, server: Child, tmp: Path) -> Figures:
        args = self.args
        n_workers = 0 if scenario.target == "null-iq" else args.workers
        pub = self._client("publisher", "load")
        workers = [self._client(f"worker{k}", "load") for k in range(n_workers)]
        clients = [pub, *workers]
        try:
            await asyncio.gather(*(c.connect() for c in clients))
            await self._set_up(
                domain,
                server,
                pub,
                workers,
                scenario.batch,
                ordered_model(scenario.model),
                round(scenario.wait_ms),
            )
            warm, n = args.warmup, args.items
            tracker = Tracker(warm + n)
            publisher = Publisher(
                pub, domain, NODE, tracker, scenario.publish_batch, scenario.model
            )
            pub.hand_over(publisher.handle)
            roles = [
                Worker(
                    *(w, domain, NODE, tracker, scenario.batch),
                    linger=scenario.linger_ms / 1000,
                    flush_at=max(1, args.queue_requests // 2),
                )
                for w in workers
            ]
            for w, role in zip(workers, roles, strict=True):
                w.hand_over(role.handle)
            only_publish = n_workers == 0
            tracker.expect(0, warm, publish_results_only=only_publish)
            publisher.start_window(0, warm, scenario.window or 32)
            if not await wait_done(tracker, clients, server, args.batch_timeout):
                raise SetupError("warm-up did not complete")
            tracker.expect(warm, warm + n, publish_results_only=only_publish)
            assert self.prosody.pid is not None
            meter = CpuMeter(server.pid, self.prosody.pid, database_sessions(scenario))
            profiler = self._start_profiler(scenario, server, tmp)
            last_scrape: list[bytes] = []
            scraper = (
                asyncio.create_task(scrape(self.metrics_address, args.scrape_interval, last_scrape))
                if scenario.metrics
                else None
            )
            sender: asyncio.Task[None] | None = None
            try:
                if scenario.rate:
                    sender = asyncio.create_task(
                        publisher.send_at_rate(warm, warm + n, scenario.rate)
                    )
                else:
                    publisher.start_window(warm, warm + n, scenario.window)
                completed = await wait_done(tracker, clients, server, args.batch_timeout)
                meter.stop()
            finally:
                if sender is not None:
                    sender.cancel()
                if scraper is not None:
                    scraper.cancel()
                    scrapes = await asyncio.gather(scraper, return_exceptions=True)
                    print(f"    /metrics scrapes: {scrapes[0]}", file=sys.stderr)
                    if last_scrape:
                        print(commit_places(last_scrape[0]), file=sys.stderr)
                if profiler is not None:
                    self._stop_profiler(profiler)
            figures = self._figures(scenario, tracker, warm, n, only_publish, completed, meter)
            if args.samples is not None:
                self._write_samples(scenario, tracker, range(warm, warm + n))
                if last_scrape:  # the component's histograms (commit time, batch sizes)
                    (args.samples / f"{self.runs:03d}-metrics.prom").write_bytes(last_scrape[0])
            figures.max_in_flight = max((r.max_in_flight for r in roles), default=0)
            return figures
        finally:
            await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)

    async def _set_up(
        self,
        domain: str,
        server: Child,
        pub: LightClient,
        workers: list[LightClient],
        batch: int = 1,
        ordered: bool = False,
        wait_ms: int = 0,
    ) -> None:
        """Wait for the component, create the queue node, subscribe every worker."""
        args = self.args
        await wait_ready(pub, domain, server, args.start_timeout)
        answer = await pub.request(create_queue_node(domain, NODE, ordered), "create1")
        if not is_result(answer):
            raise SetupError(f"create failed: {answer[:600]!r}")
        answer = await pub.request(queue_members(domain, NODE, [w.bare for w in workers]), "aff1")
        if not is_result(answer):
            raise SetupError(f"affiliations failed: {answer[:600]!r}")
        for w in workers:
            # Available (bare-JID notifications need it) and known to the component.
            w.send(f"<presence/><presence to='{domain}'/>")
            jid = w.bare if args.subscribe_jid == "bare" else w.jid
            answer = await w.request(
                subscribe_queue(domain, NODE, jid, args.queue_requests, batch, wait_ms), "sub1"
            )
            if not is_result(answer):
                raise SetupError(f"subscribe failed: {answer[:600]!r}")

    def _write_samples(self, scenario: Scenario, t: Tracker, span: range) -> None:
        """Each measured item's times (seconds from the first send, t0; empty: never), one CSV
        per run, to see where in a run the tail sits: spread out (queueing) or in bursts
        (a stall of the component, the disk or Prosody)."""
        self.args.samples.mkdir(parents=True, exist_ok=True)
        self.runs += 1
        name = scenario.label.replace(", ", "-").replace(" ", "").replace("/", "")
        out = self.args.samples / f"{self.runs:03d}-{name}.csv"
        t0 = min(t.sent[i] for i in span if t.sent[i])

        def at(x: float) -> str:
            return f"{x - t0:.6f}" if x else ""

        # The origin on the monotonic clock (time.perf_counter, the same in every process
        # of the machine), to line the rows up with timestamps taken elsewhere.
        rows = [f"# t0={t0:.6f}", "item,sent,published,delivered,acked"]
        rows += [
            f"{i},{at(t.sent[i])},{at(t.published[i])},{at(t.delivered[i])},{at(t.acked[i])}"
            for i in span
        ]
        out.write_text("\n".join(rows) + "\n")

    def _start_profiler(
        self, scenario: Scenario, server: Child, tmp: Path
    ) -> subprocess.Popen[bytes] | None:
        if self.args.profile is None or scenario.target.startswith("null-"):
            return None
        self.args.profile.mkdir(parents=True, exist_ok=True)
        name = scenario.label.replace(", ", "-").replace(" ", "").replace("/", "")
        out = self.args.profile / f"{name}.txt"
        self.profiles.append(out)
        argv = ["py-spy", "record", "--pid", str(server.pid), "--format", "raw", "-o", str(out)]
        argv += ["--rate", "200", "--nonblocking", "--gil"]
        with open(tmp / "pyspy.log", "wb") as log:
            return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log)

    @staticmethod
    def _stop_profiler(profiler: subprocess.Popen[bytes]) -> None:
        profiler.send_signal(signal.SIGINT)
        try:
            profiler.wait(timeout=30)
        except subprocess.TimeoutExpired:
            profiler.kill()
            profiler.wait()

    @staticmethod
    def _figures(
        scenario: Scenario,
        t: Tracker,
        warm: int,
        n: int,
        only_publish: bool,
        completed: bool,
        meter: CpuMeter,
    ) -> Figures:
        span = range(warm, warm + n)
        ends = t.published if only_publish else t.acked
        finished = [i for i in span if ends[i]]
        first = min(t.sent[i] for i in span if t.sent[i]) if finished else 0.0
        last = max(ends[i] for i in finished) if finished else 0.0
        seconds = last - first
        per_item = [cpu * 1e6 / max(1, len(finished)) for cpu in meter.spent]
        return Figures(
            scenario=scenario.label,
            items=len(finished),
            completed=completed,
            seconds=seconds,
            items_per_s=len(finished) / seconds if seconds > 0 else 0.0,
            delivery=Latency.of([t.delivered[i] - t.sent[i] for i in span if t.delivered[i]]),
            publish_rtt=Latency.of([t.published[i] - t.sent[i] for i in span if t.published[i]]),
            publish_to_ack=Latency.of([t.acked[i] - t.sent[i] for i in span if t.acked[i]]),
            component_us=per_item[0],
            prosody_us=per_item[1],
            loadgen_us=per_item[2],
            database_us=meter.database * 1e6 / max(1, len(finished)),
            other_cores=meter.other_cores,
            steal_cores=meter.steal_cores,
            duplicates=t.duplicates,
            errors=t.errors,
            error_samples=[s.decode(errors="replace") for s in t.error_samples],
        )


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def commit_places(text: bytes) -> str:
    """Where the run's SQLite commits ran, from its last scrape (a round whose
    commits went to the writer thread is slower for it: storage/commit_place.py)."""
    from prometheus_client.parser import text_string_to_metric_families

    loop = thread = backs = 0
    found = False
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            if s.name == "xmpp_queue_sqlite_commits_total":
                found = True
                if s.labels.get("place") == "loop":
                    loop = int(s.value)
                else:
                    thread = int(s.value)
            elif s.name == "xmpp_queue_sqlite_back_offs_total":
                backs += int(s.value)
    if not found:
        return "    commits: not SQLite"
    return f"    commits on the loop / thread: {loop} / {thread}, back-offs {backs}"


async def scrape(address: str, interval: float, last: list[bytes]) -> int:
    """GET /metrics every *interval* seconds, as Prometheus would (it scrapes every
    15 s by default; 1 s here is the worst case), the last body kept in *last*:
    once cancelled (the measurement is over), one more, so it holds the whole run.
    Returns how many scrapes succeeded during the run."""
    import aiohttp

    done = 0
    async with aiohttp.ClientSession() as session:

        async def once() -> None:
            async with session.get(f"http://{address}/metrics") as r:
                body = await r.read()
                if r.status == 200:
                    last[:] = [body]

        try:
            while True:
                await once()
                done += 1
                await asyncio.sleep(interval)
        except asyncio.CancelledError:
            try:
                await asyncio.wait_for(once(), 5)
            except (OSError, TimeoutError, aiohttp.ClientError):
                pass
            return done


def scenarios(args: argparse.Namespace) -> list[Scenario]:
    loads = [Scenario("", window=w) for w in args.window] + [
        Scenario("", rate=r) for r in args.rate
    ]
    out: list[Scenario] = []
    if not args.skip_null:
        out += [Scenario("null-iq", window=s.window) for s in loads if s.window]
        out += [Scenario("null-message", s.window, s.rate) for s in loads]
    for backend in args.null_durable:  # the batch matrix of the backends' scenarios
        for batch in args.batch:
            for pb in args.publish_batch if batch > 1 else [1]:
                out += [
                    Scenario(f"null-durable-{backend}", s.window, s.rate, False, batch, pb)
                    for s in loads
                ]
    if args.raw_commit:
        out += [Scenario("raw-commit", 0, s.rate) for s in loads if s.rate]
    if args.rabbitmq:
        acks = {"each": ["rabbitmq"], "multiple": ["rabbitmq-multiple"]}.get(
            args.rabbitmq_ack, ["rabbitmq", "rabbitmq-multiple"]
        )
        out += [Scenario(target, s.window, s.rate) for s in loads for target in acks]
    if not args.null_only:
        for backend in args.backends:
            for metrics in {"off": [False], "on": [True], "both": [False, True]}[args.metrics]:
                for batch in args.batch:
                    pub_batches = args.publish_batch if batch > 1 else [1]
                    for pb in pub_batches:
                        for s in loads:
                            for model in args.model:
                                out += [
                                    Scenario(
                                        *(backend, s.window, s.rate, metrics, batch, pb, model),
                                        linger_ms=linger,
                                        wait_ms=wait if batch > 1 else 0.0,
                                    )
                                    for linger in args.ack_linger_ms
                                    for wait in (args.batch_wait_ms if batch > 1 else [0.0])
                                ]
                                if args.compare_src and model == "plain":
                                    out.append(
                                        Scenario(
                                            backend,
                                            s.window,
                                            s.rate,
                                            metrics,
                                            batch,
                                            pb,
                                            model,
                                            str(args.compare_src),
                                        )
                                    )
    return out


def in_round_order(plan: list[Scenario], round_no: int) -> list[Scenario]:
    """*plan* for round *round_no*: odd rounds run each --compare-src scenario before its
    twin of this checkout. Of two runs back to back the second gained about 5 % items/s
    on this machine (measured by swapping the checkouts' roles), so always running this
    checkout first made it look slower; alternating keeps that out of the medians."""
    out = list(plan)
    if round_no % 2 == 0:
        return out
    i = 0
    while i < len(out) - 1:
        first, second = out[i], out[i + 1]
        if not first.src and second.src and replace(second, src="") == first:
            out[i], out[i + 1] = second, first
            i += 2
        else:
            i += 1
    return out


def machine_facts() -> dict[str, str]:
    model = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    pg = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-tAc", "show server_version"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return {
        "nproc": str(os.cpu_count()),
        "cpu": model,
        "python": platform.python_version(),
        "prosody": prosody_version(),
        "sqlite": sqlite3.sqlite_version,
        "postgresql": pg or "unavailable",
    }


def print_table(rows: list[Figures]) -> None:
    head = (
        f"{'scenario':<30} {'items':>6} {'items/s':>8} {'deliver p50/p99/max ms':>23} "
        f"{'publish rtt p50/p99':>20} {'to ack p50/p99':>15} "
        f"{'comp µs':>8} {'db µs':>6} {'prosody µs':>10} {'load µs':>8} {'others':>6} "
        f"{'infl':>4} {'dup':>4} {'err':>4}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:

        def two(lat: Latency | None) -> str:
            return f"{lat.p50_ms:.1f}/{lat.p99_ms:.1f}" if lat else "-"

        flag = "" if r.completed else "  INCOMPLETE"
        print(
            f"{r.scenario:<30} {r.items:>6} {r.items_per_s:>8.0f} {r.delivery or '-'!s:>23} "
            f"{two(r.publish_rtt):>20} {two(r.publish_to_ack):>15} "
            f"{r.component_us:>8.0f} {r.database_us:>6.0f} {r.prosody_us:>10.0f} "
            f"{r.loadgen_us:>8.0f} "
            f"{r.other_cores:>6.2f} {r.max_in_flight:>4} "
            f"{r.duplicates:>4} {r.errors:>4}{flag}"
        )
        for sample in r.error_samples:
            print(f"    error: {sample}")


def median_runs(results: list[Figures]) -> list[Figures]:
    """Per scenario, the run with the median items/s (the whole run, so figures agree)."""
    groups: dict[str, list[Figures]] = {}
    for r in results:
        groups.setdefault(r.scenario, []).append(r)
    out = []
    for runs in groups.values():
        runs.sort(key=lambda r: r.items_per_s)
        out.append(runs[(len(runs) - 1) // 2])
    return out


def markdown_table(rows: list[Figures]) -> str:
    """The figures as a Markdown table, for docs/benchmarks.md."""

    def two(lat: Latency | None) -> str:
        return f"{lat.p50_ms:.1f} / {lat.p99_ms:.1f}" if lat else "-"

    out = [
        "| scenario | items/s | publish rtt p50 / p99 ms | publish→delivery p50 / p99 ms "
        "| publish→ack p50 / p99 ms "
        "| component µs/item | PostgreSQL µs/item | Prosody µs/item | load µs/item "
        "| other load (cores) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        flag = "" if r.completed and not r.errors else " (incomplete)"
        out.append(
            f"| {r.scenario}{flag} | {r.items_per_s:.0f} | {two(r.publish_rtt)} "
            f"| {two(r.delivery)} "
            f"| {two(r.publish_to_ack)} | {r.component_us:.0f} | {r.database_us:.0f} "
            f"| {r.prosody_us:.0f} "
            f"| {r.loadgen_us:.0f} | {r.other_cores:.2f} |"
        )
    return "\n".join(out)


async def run_all(args: argparse.Namespace) -> list[Figures]:
    users = {"publisher": PASSWORD} | {f"worker{k}": PASSWORD for k in range(args.workers)}
    results: list[Figures] = []

    def new_prosody() -> PrivateProsody:
        return run_prosody(
            {QUEUE_DOMAIN: SECRET, NULL_DOMAIN: SECRET}, users, args, nagle=args.nagle
        )

    # One Prosody for the whole run, or (--prosody-per-round) a fresh one per round: in
    # long runs with the stock incremental GC, Prosody's CPU per item grew round by
    # round (the null component's 748, 850, 1,035 µs at 500/s in one run), which later
    # rounds of every scenario paid alike; a fresh Prosody takes its state out of it.
    rounds = [in_round_order(scenarios(args), n) for n in range(args.repeat)]
    if not args.prosody_per_round:
        rounds = [[s for r in rounds for s in r]]
    with tempfile.TemporaryDirectory(prefix="xq-bench-") as workdir:
        bench: Bench | None = None
        try:
            for plan in rounds:
                with new_prosody() as prosody:
                    if bench is None:
                        bench = Bench(args, prosody, Path(workdir))
                    bench.prosody = prosody
                    for scenario in plan:
                        print(f"... {scenario.label}", file=sys.stderr, flush=True)
                        try:
                            figures = await bench.run(scenario)
                        except (SetupError, RuntimeError, OSError) as exc:
                            print(f"!!! {scenario.label}: {exc}", file=sys.stderr, flush=True)
                            if args.keep_going:
                                continue
                            raise
                        results.append(figures)
                        print_table([figures])
        finally:
            if ("postgresql" in args.backends and not args.null_only) or (
                "postgresql" in args.null_durable
            ):
                drop_postgres_db(PG_DB)
        for path in bench.profiles if bench is not None else []:
            from profile_summary import report

            print(report(path, top=args.top))
    return results


def _list(kind: Callable[[str], T]) -> Callable[[str], list[T]]:
    """An argparse type for comma-separated values: `--window 32,1`."""

    def parse(text: str) -> list[T]:
        return [kind(x) for x in text.split(",") if x.strip()]

    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=5000, help="measured items per scenario")
    p.add_argument("--warmup", type=int, default=200, help="items before the measurement")
    p.add_argument(
        "--window", type=_list(int), default=[32], help="publishes outstanding, e.g. 32,1 (0: none)"
    )
    p.add_argument("--rate", type=_list(float), default=[], help="open-loop rates, e.g. 500")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--queue-requests", type=int, default=8)
    p.add_argument("--backends", type=_list(str), default=["sqlite", "postgresql"])
    p.add_argument(
        "--batch",
        type=_list(int),
        default=[1],
        help="workers' pubsub#queue_max_batch, e.g. 1,8 (1: plain XEP-0254, one ack per item)",
    )
    p.add_argument(
        "--publish-batch",
        type=_list(int),
        default=[1],
        help="items per publish in the batched scenarios (--batch above 1), e.g. 1,8",
    )
    p.add_argument(
        "--ack-linger-ms",
        type=_list(float),
        default=[0.0],
        help="workers group acks for up to this long (or half their window), e.g. 0,100",
    )
    p.add_argument(
        "--batch-wait-ms",
        type=_list(float),
        default=[0.0],
        help="in the batched scenarios, workers let the service hold a short batch this "
        "long (pubsub#queue_batch_wait), e.g. 0,5",
    )
    p.add_argument(
        "--rabbitmq", action="store_true", help="also run the RabbitMQ reference in this run"
    )
    p.add_argument("--rabbitmq-url", default="amqp://guest:guest@127.0.0.1:5672/")
    p.add_argument(
        "--rabbitmq-ack",
        choices=("each", "multiple", "both"),
        default="each",
        help="RabbitMQ consumers ack each message, or with multiple=true (rabbitmq-multiple)",
    )
    p.add_argument(
        "--raw-commit",
        action="store_true",
        help="also time a raw durable SQLite commit loop at each --rate, same disk, this run",
    )
    p.add_argument("--null-only", action="store_true", help="only the null component")
    p.add_argument("--skip-null", action="store_true", help="skip the null component")
    p.add_argument(
        "--null-durable",
        type=_list(str),
        default=[],
        help="also run the null component committing each read's rows before it answers "
        "(null_durable.py): the least a durable queue pays, e.g. sqlite,postgresql "
        "(sqlite-checkpointer: SQLite's log checkpointed from a thread, not by the commits)",
    )
    p.add_argument("--nagle", action="store_true", help="leave Nagle on in Prosody")
    p.add_argument("--subscribe-jid", choices=("bare", "full"), default="bare")
    p.add_argument(
        "--prosody-gc",
        choices=("incremental", "generational"),
        default="incremental",
        help="Lua GC mode of Prosody (its default is incremental)",
    )
    p.add_argument("--prosody-extra", default="", help="lines added to Prosody's config")
    p.add_argument(
        "--prosody-per-round",
        action="store_true",
        help="start a fresh Prosody for each round instead of one for the whole run",
    )
    p.add_argument("--repeat", type=int, default=1, help="runs per scenario (median shown)")
    p.add_argument(
        "--model",
        type=_list(str),
        default=["plain"],
        help="item headers per run: plain, attrs3 (3 attributes), delay100 (Start +100 ms), "
        "keys10000 / keys1 (ordering keys on an ordered queue)",
    )
    p.add_argument(
        "--compare-src",
        type=Path,
        default=None,
        help="a checkout of another commit: its component runs each plain scenario too, "
        "interleaved (e.g. git worktree add /tmp/prev HEAD~1)",
    )
    p.add_argument(
        "--metrics",
        choices=("off", "on", "both"),
        default="off",
        help="run the component with [http] and scrape /metrics during the measurement",
    )
    p.add_argument("--scrape-interval", type=float, default=1.0, help="seconds between scrapes")
    p.add_argument("--log-level", default="WARNING", help="the component's [logging] level")
    p.add_argument("--profile", type=Path, default=None, help="py-spy the component into DIR")
    p.add_argument("--top", type=int, default=20, help="hot spots listed per profile")
    p.add_argument("--markdown", action="store_true", help="also print a Markdown table")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    p.add_argument(
        "--samples",
        type=Path,
        default=None,
        help="write each item's times, a CSV per run, in DIR (and, with --metrics, the "
        "last /metrics scrape of the run)",
    )
    p.add_argument("--keep-going", action="store_true", help="report a failed scenario, go on")
    p.add_argument("--start-timeout", type=float, default=60.0)
    p.add_argument("--batch-timeout", type=float, default=300.0)
    p.add_argument("--timeout", type=float, default=1800.0, help="bound on the whole run")
    args = p.parse_args(argv)
    # `--window 0` means no closed-loop scenario (a rate-only run).
    args.window = [w for w in args.window if w > 0]
    args.rate = [r for r in args.rate if r > 0]
    if not args.window and not args.rate:
        p.error("nothing to run: give --window N or --rate R")
    return args


async def _main(args: argparse.Namespace) -> list[Figures]:
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    return await asyncio.wait_for(run_all(args), args.timeout)


def main() -> int:
    args = parse_args()
    facts = machine_facts()
    print(" ".join(f"{k}={v!r}" for k, v in facts.items()))
    print(
        f"settings: items={args.items} warmup={args.warmup} workers={args.workers} "
        f"queue_requests={args.queue_requests} subscribe_jid={args.subscribe_jid} "
        f"prosody: nagle={'on' if args.nagle else 'off'} gc={args.prosody_gc}"
    )
    try:
        results = asyncio.run(_main(args))
    except (SetupError, TimeoutError) as exc:
        print(f"benchmark aborted: {str(exc) or 'global timeout'}", file=sys.stderr)
        return 2
    print()
    if args.repeat > 1:
        print(f"median run of {args.repeat} (by items/s) per scenario:")
    print_table(median_runs(results))
    if args.markdown:
        print()
        print(markdown_table(median_runs(results)))
    if args.json is not None:
        payload = {
            "machine": facts,
            "settings": vars(args),
            "results": [asdict(r) for r in results],
        }
        args.json.write_text(json.dumps(payload, indent=2, default=str))
    return 0 if all(r.completed and not r.errors for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
