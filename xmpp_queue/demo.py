"""``xmpp-queue demo``: a queue at work on this machine, in one command.

What it shows, in order: a private Prosody (Debian's package, free loopback
ports, its own config and data), a SQLite database migrated with alembic, the
component started as a user starts it (``python -m xmpp_queue run -c FILE``),
a queue node (lock timeout 5 s, 3 deliveries, then dead letters), a publisher,
and three workers of different speeds: *fast*, *flaky* (gives some items back
with an exception: unlock) and *crashy* (its connection is dropped a third of
the way through, without unsubscribing: the XMPP server's unavailable presence
makes the service hand its items to the others). A few *poison* items fail on
every worker and end on the dead-letter node after three deliveries.

The summary comes from the component's event ledger (the ``queue_events``
table), so it is the service's account, not the clients': every published item
must end acked or dead-lettered.

Everything it starts is a child process stopped in order on exit or Ctrl-C
(workers drain, then the component, then Prosody). With ``--serve`` the
servers stay up after the run for the examples; the connection details are in
``<dir>/connection.json`` (``python examples/worker.py --connection
xmpp-queue-demo/connection.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import logging
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from xmpp_queue import ledger_names as L
from xmpp_queue.client import ClientError, Job, Publisher, Worker, json_payload

SERVICE = "queue.localhost"
NODE = "demo"
DEAD_LETTER_NODE = "demo/dead-letter"
LOCK_TIMEOUT = 5
MAX_DELIVERIES = 3
POISON_EVERY, POISON_AT = 40, 17  # item n with n % 40 == 17 fails on every worker
CRASH_AT = 0.3  # crashy's connection drops when this share of the items is done
DEMO_FILES = ("demo.sqlite", "demo.sqlite-wal", "demo.sqlite-shm", "component.toml")
DISCO_INFO = "<query xmlns='http://jabber.org/protocol/disco#info'/>"

log = logging.getLogger("xmpp_queue.demo")


@dataclass
class WorkerPlan:
    """One demo worker's character."""

    name: str
    queue_requests: int
    seconds_per_item: float
    fail_first_of_every: int = 0  # gives back item n on first sight when n % this == 0
    crashes: bool = False


PLANS = (
    WorkerPlan("fast", queue_requests=4, seconds_per_item=0.005),
    WorkerPlan("flaky", queue_requests=3, seconds_per_item=0.015, fail_first_of_every=5),
    WorkerPlan("crashy", queue_requests=2, seconds_per_item=0.04, crashes=True),
)


class DemoFailure(Exception):
    """The demo cannot go on; the message says what to do."""


class DemoBusy(DemoFailure):
    """Another demo runs in the same directory: starting would delete its database."""


def lock_demo_dir(directory: Path) -> int:
    """Hold ``demo.lock`` in *directory* for this process's life (the kernel drops it
    when the process ends, however it ends); DemoBusy if another demo holds it."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / "demo.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise DemoBusy(
            f"another demo (pid {holder}) is running in {directory}: stop it first, "
            "or give this one its own --dir"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


# --- command line ---------------------------------------------------------------------


def add_demo_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="run a private Prosody, the component, a publisher and three workers",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("--items", type=_positive, default=200, help="items to publish (200)")
    parser.add_argument(
        "--no-live", action="store_true", help="plain progress lines instead of a live display"
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path("xmpp-queue-demo"),
        help="where the database, config, logs and connection.json go (./xmpp-queue-demo)",
    )
    parser.add_argument(
        "--serve",
        action="store_true",
        help="keep Prosody and the component running after the run (for the examples)",
    )
    parser.add_argument(
        "--timeout", type=float, default=0.0, help="give up after this many seconds (auto)"
    )
    return parser


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo; 0 when every item ended acked or dead-lettered, 130 on Ctrl-C."""
    console = Console(highlight=False)
    live = not args.no_live and console.is_terminal
    demo = Demo(args, console, live)
    try:
        return asyncio.run(demo.main())
    except KeyboardInterrupt:
        return 130


# --- the run --------------------------------------------------------------------------


@dataclass
class Accounts:
    passwords: dict[str, str] = field(default_factory=dict)

    @classmethod
    def generate(cls) -> Accounts:
        names = [f"worker-{p.name}" for p in PLANS]
        names += ["publisher", "example-worker", "example-publisher", "admin"]
        return cls({n: secrets.token_urlsafe(9) for n in names})

    def jid(self, name: str) -> str:
        return f"{name}@localhost"


class Demo:
    def __init__(self, args: argparse.Namespace, console: Console, live: bool) -> None:
        self.args = args
        self.items: int = args.items
        self.console = console
        self.live = live
        self.dir: Path = args.dir.resolve()
        self.accounts = Accounts.generate()
        self.secret = secrets.token_urlsafe(12)
        self.prosody: Any = None
        self._lock_fd: int | None = None
        self.component: subprocess.Popen[bytes] | None = None
        self.publisher: Publisher | None = None
        self.workers: dict[str, Worker] = {}
        self.states: dict[str, str] = {}
        self.published, self.started_at, self.elapsed = 0, 0.0, 0.0

    @property
    def db_path(self) -> Path:
        return self.dir / "demo.sqlite"

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.db_path}"

    def say(self, text: str) -> None:
        self.console.print(text, soft_wrap=True)

    async def main(self) -> int:
        task = asyncio.current_task()
        assert task is not None
        interrupted: list[int] = []

        def on_signal() -> None:
            if not interrupted:
                interrupted.append(1)
                self.say("\n[bold]Interrupted:[/] stopping workers, component and Prosody ...")
                task.cancel()

        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, on_signal)
        try:
            return await self._run()
        except asyncio.CancelledError:
            if interrupted:
                return 130
            raise
        except DemoBusy as exc:
            self.say(f"[bold red]demo refused:[/] {exc}")
            return 2
        except DemoFailure as exc:
            self.say(f"[bold red]demo failed:[/] {exc}")
            return 1
        except Exception as exc:  # one line here, the trace in demo.log
            log.exception("event=demo_failed")
            self.say(f"[bold red]demo failed:[/] {exc!r} (trace in {self.dir / 'demo.log'})")
            return 1
        finally:
            await self._shutdown()
            for signum in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(signum)

    async def _run(self) -> int:
        self._prepare_dir()
        self._route_client_logs()
        await self._start_prosody()
        await self._migrate()
        self._start_component()
        await self._connect_publisher()
        await self._create_nodes()
        self._write_connection_file()
        await self._start_workers()
        summary = await self._work()
        await self._stop_workers()
        summary.update(self._ledger_summary())
        done = summary["acked"] + summary["dead_lettered"]
        summary["seconds"] = round(self.elapsed, 2)
        summary["items_per_second"] = round(done / max(self.elapsed, 1e-9), 1)
        summary["adds_up"] = summary["published"] == summary["acked"] + summary["dead_lettered"]
        self._print_summary(summary)
        (self.dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        if self.args.serve:
            await self._serve()
        return 0 if summary["complete"] and summary["adds_up"] else 1

    # --- setting up -------------------------------------------------------------------

    def _prepare_dir(self) -> None:
        self._lock_fd = lock_demo_dir(self.dir)  # before anything of another demo is touched
        for name in (*DEMO_FILES, "summary.json", "connection.json"):
            (self.dir / name).unlink(missing_ok=True)
        self.say(f"Demo directory: {self.dir}")

    def _route_client_logs(self) -> None:
        """Clients' warnings (a worker's exception, a lost lock) go to demo.log, not
        across the live display."""
        handler = logging.FileHandler(self.dir / "demo.log", mode="w", encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        for name in ("xmpp_queue.client", "xmpp_queue.demo", "slixmpp"):
            logger = logging.getLogger(name)
            logger.handlers[:] = [handler]
            logger.propagate = False
            logger.setLevel(logging.INFO)

    async def _start_prosody(self) -> None:
        from xmpp_queue.servers._process import ServerNotInstalled
        from xmpp_queue.servers.prosody import PrivateProsody

        if not await asyncio.to_thread(_ensure_prosody, self.say):
            raise DemoFailure("Prosody is needed (see above)")
        self.say("Starting a private Prosody on free loopback ports ...")
        self.prosody = PrivateProsody({SERVICE: self.secret}, self.accounts.passwords)
        try:
            await asyncio.to_thread(self.prosody.start)
        except ServerNotInstalled as exc:
            raise DemoFailure(str(exc)) from None
        self.say(
            f"  Prosody pid {self.prosody.pid}: c2s port {self.prosody.c2s_port}, "
            f"component port {self.prosody.component_port}"
        )

    async def _migrate(self) -> None:
        from xmpp_queue.storage.migrations import upgrade

        self.say(f"Migrating the SQLite database {self.db_path.name} (alembic upgrade head) ...")
        await asyncio.to_thread(upgrade, self.db_url)

    def _component_toml(self) -> str:
        return (
            "# generated by xmpp-queue demo\n"
            "[component]\n"
            f'jid = "{SERVICE}"\n'
            f'secret = "{self.secret}"\n'
            'server_host = "127.0.0.1"\n'
            f"server_port = {self.prosody.component_port}\n\n"
            "[database]\n"
            f'url = "{self.db_url}"\n\n'
            "[admins]\n"
            f'jids = ["{self.accounts.jid("admin")}"]\n\n'
            "[logging]\n"
            'level = "INFO"\n'
        )

    def _pipeline_toml(self) -> str:
        """The ``[pipeline]`` table for this demo: the Spark jobs run against it with
        ``xmpp-queue pipeline ... -c <dir>/component.toml``."""
        name = "example-publisher"
        return (
            "\n[pipeline]\n"
            'master = "local[*]"\n'
            f'publisher_jid = "{self.accounts.jid(name)}"\n'
            f'publisher_password = "{self.accounts.passwords[name]}"\n'
            f'service_jid = "{SERVICE}"\n'
            'xmpp_host = "127.0.0.1"\n'
            f"xmpp_port = {self.prosody.c2s_port}\n"
            "allow_plain = true\n"
        )

    def _start_component(self) -> None:
        config = self.dir / "component.toml"
        config.write_text(self._component_toml() + self._pipeline_toml())
        command = [sys.executable, "-m", "xmpp_queue", "run", "-c", str(config)]
        self.say(f"Starting the component: python {' '.join(command[1:])}")
        # The component imports this very package, installed or not.
        source_root = str(Path(__file__).resolve().parents[1])
        path = os.environ.get("PYTHONPATH")
        env = {
            **os.environ,
            "PYTHONPATH": f"{source_root}{os.pathsep}{path}" if path else source_root,
        }
        with open(self.dir / "component.log", "wb") as out:
            # A session of its own: Ctrl-C reaches the demo only, which then stops
            # the workers before the component.
            self.component = subprocess.Popen(
                command,
                cwd=self.dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )
        self.say(f"  component pid {self.component.pid}, log in {self.dir / 'component.log'}")

    async def _connect_publisher(self) -> None:
        publisher = Publisher(
            self.accounts.jid("publisher"),
            self.accounts.passwords["publisher"],
            SERVICE,
            host="127.0.0.1",
            port=self.prosody.c2s_port,
            allow_plain=True,
            window=32,
        )
        await publisher.connect()
        self.publisher = publisher
        deadline = time.monotonic() + 30
        while True:  # the component is up when it answers disco#info itself
            if self.component is not None and self.component.poll() is not None:
                raise DemoFailure(f"the component exited:\n{self._component_log_tail()}")
            try:
                await publisher.link.call(DISCO_INFO, "get")
                return
            except (ClientError, TimeoutError):
                if time.monotonic() > deadline:
                    raise DemoFailure(
                        f"the component did not come up in 30 s:\n{self._component_log_tail()}"
                    ) from None
                await asyncio.sleep(0.1)

    def _component_log_tail(self, lines: int = 15) -> str:
        try:
            text = (self.dir / "component.log").read_text(errors="replace")
        except OSError:
            return "(no component.log)"
        return "\n".join(text.splitlines()[-lines:])

    async def _create_nodes(self) -> None:
        assert self.publisher is not None
        await self.publisher.create_node(DEAD_LETTER_NODE, {"pubsub#max_items": "max"})
        await self.publisher.create_queue(
            NODE,
            lock_timeout=LOCK_TIMEOUT,
            max_deliveries=MAX_DELIVERIES,
            dead_letter=DEAD_LETTER_NODE,
        )
        # A new queue is whitelisted (owner, publishers, members only): as its owner,
        # the demo's publisher lets the workers in and the example publisher publish.
        await self.publisher.link.call(self._affiliations_body())
        self.say(
            f"Queue node '{NODE}': lock timeout {LOCK_TIMEOUT} s, {MAX_DELIVERIES} deliveries, "
            f"then '{DEAD_LETTER_NODE}'"
        )

    def _affiliations_body(self) -> str:
        """XEP-0060 §8.9.2: the workers as members, the example publisher as publisher."""
        members = [f"worker-{p.name}" for p in PLANS] + ["example-worker"]
        rows = [(self.accounts.jid(n), "member") for n in members]
        rows.append((self.accounts.jid("example-publisher"), "publisher"))
        inner = "".join(f"<affiliation jid='{jid}' affiliation='{aff}'/>" for jid, aff in rows)
        return (
            "<pubsub xmlns='http://jabber.org/protocol/pubsub#owner'>"
            f"<affiliations node='{NODE}'>{inner}</affiliations></pubsub>"
        )

    def _write_connection_file(self) -> None:
        role = {"worker": "example-worker", "publisher": "example-publisher", "admin": "admin"}
        details = {
            "host": "127.0.0.1",
            "port": self.prosody.c2s_port,
            "service": SERVICE,
            "node": NODE,
            "dead_letter_node": DEAD_LETTER_NODE,
            "accounts": {
                key: {"jid": self.accounts.jid(name), "password": self.accounts.passwords[name]}
                for key, name in role.items()
            },
        }
        (self.dir / "connection.json").write_text(json.dumps(details, indent=2) + "\n")

    # --- the work ---------------------------------------------------------------------

    def _handler(self, plan: WorkerPlan) -> Any:
        async def handle(job: Job) -> None:
            data = job.json()
            await asyncio.sleep(plan.seconds_per_item)
            if data.get("poison"):
                raise ValueError(f"poison item {data['n']}")
            if plan.fail_first_of_every and data["n"] % plan.fail_first_of_every == 0:
                if job.delivery == 1:
                    raise RuntimeError(f"{plan.name} gives item {data['n']} back")

        return handle

    async def _start_workers(self) -> None:
        assert self.prosody is not None
        for plan in PLANS:
            name = f"worker-{plan.name}"
            worker = Worker(
                self.accounts.jid(name),
                self.accounts.passwords[name],
                SERVICE,
                NODE,
                self._handler(plan),
                queue_requests=plan.queue_requests,
                port=self.prosody.c2s_port,
                allow_plain=True,
                drain_grace=5.0,
                name=plan.name,
            )
            await worker.start()
            self.workers[plan.name] = worker
            self.states[plan.name] = "working"
        self.say(
            "Workers: "
            + ", ".join(
                f"{p.name} ({p.queue_requests} at a time, {p.seconds_per_item * 1000:.0f} ms/item)"
                for p in PLANS
            )
        )

    async def _publish(self) -> None:
        assert self.publisher is not None
        futures = []
        for n in range(self.items):
            poison = n % POISON_EVERY == POISON_AT
            payload = json_payload({"n": n, "poison": poison})
            futures.append(await self.publisher.submit(NODE, payload))
        for future in futures:
            await future
            self.published += 1

    async def _work(self) -> dict[str, Any]:
        """Publish and let the workers run until the ledger shows every item done."""
        self.started_at = time.monotonic()
        limit = self.args.timeout or max(60.0, self.items * 0.5)
        publishing = asyncio.ensure_future(self._publish())
        display = LiveDisplay(self) if self.live else PlainDisplay(self)
        done = 0
        crashed = False
        try:
            with display:
                while True:
                    counts = await asyncio.to_thread(self._ledger_counts)
                    done = counts.get("acked", 0) + counts.get("dead_lettered", 0)
                    display.update(done, counts)
                    if publishing.done() and publishing.exception() is not None:
                        raise DemoFailure(f"publishing failed: {publishing.exception()}")
                    if not crashed and done >= self.items * CRASH_AT:
                        crashed = True
                        self._crash()
                    if done >= self.items and publishing.done():
                        break
                    if time.monotonic() - self.started_at > limit:
                        display.note(f"timed out after {limit:.0f} s with {done} items done")
                        break
                    await asyncio.sleep(0.25)
            self.elapsed = time.monotonic() - self.started_at
        finally:
            if not publishing.done():
                publishing.cancel()
                with contextlib.suppress(BaseException):
                    await publishing
        return {"complete": done >= self.items}

    def _crash(self) -> None:
        for plan in PLANS:
            if plan.crashes:
                worker = self.workers[plan.name]
                log.info("event=demo_crash worker=%s in_flight=%d", plan.name, worker.in_flight)
                worker.abort()
                self.states[plan.name] = "crashed"

    async def _stop_workers(self) -> None:
        for name, worker in self.workers.items():
            if not worker.stopping:
                await worker.stop(grace=5)
                self.states[name] = "stopped"

    # --- the numbers ------------------------------------------------------------------

    def _query(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        uri = f"file:{self.db_path}?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=5)) as db:
            return db.execute(sql, params).fetchall()

    def _ledger_counts(self) -> dict[str, int]:
        rows = self._query(
            f"SELECT {L.KIND}, COUNT(*) FROM {L.TABLE} WHERE {L.NODE} = ? GROUP BY {L.KIND}", NODE
        )
        return {str(kind): int(count) for kind, count in rows}

    def _ledger_summary(self) -> dict[str, Any]:
        counts = self._ledger_counts()
        ((deliveries, distinct),) = self._query(
            f"SELECT COUNT(*), COUNT(DISTINCT {L.ITEM_ID}) FROM {L.TABLE} "
            f"WHERE {L.NODE} = ? AND {L.KIND} = 'delivered'",
            NODE,
        )
        return {
            "published": counts.get("published", 0),
            "acked": counts.get("acked", 0),
            "delivered": int(deliveries),
            "redelivered": int(deliveries) - int(distinct),
            "unlocked": counts.get("unlocked", 0),
            "expired": counts.get("expired", 0),
            "dead_lettered": counts.get("dead_lettered", 0),
            "publisher_answers": self.published,
            "workers": {
                name: {
                    "state": self.states.get(name, "?"),
                    "received": w.stats.received,
                    "acked": w.stats.acked,
                    "failed": w.stats.failed,
                    "lost": w.stats.lost,
                    "returned": w.stats.returned,
                }
                for name, w in self.workers.items()
            },
        }

    def _print_summary(self, s: dict[str, Any]) -> None:
        table = Table(title="xmpp-queue demo: the service's ledger", show_header=False)
        table.add_column("what")
        table.add_column("value", justify="right")
        rows = [
            ("items published", s["published"]),
            ("acked (retracted by a worker)", s["acked"]),
            ("redelivered (handed out again)", s["redelivered"]),
            ("unlocked (a worker's nack or departure)", s["unlocked"]),
            ("lock timeouts", s["expired"]),
            ("dead-lettered", s["dead_lettered"]),
            ("time", f"{s['seconds']:.1f} s"),
            ("items/s (acked or dead-lettered)", f"{s['items_per_second']:.1f}"),
        ]
        for what, value in rows:
            table.add_row(what, str(value))
        self.console.print(table)
        if not self.live:  # the live display leaves its own worker table on screen
            self.console.print(_workers_table(self))
        verdict = "adds up" if s["adds_up"] else "DOES NOT add up"
        self.say(
            f"published {s['published']} = acked {s['acked']} + dead-lettered "
            f"{s['dead_lettered']}: {verdict}"
        )
        self.say(f"Details: {self.dir / 'summary.json'}, logs in {self.dir}")

    # --- ending -----------------------------------------------------------------------

    async def _serve(self) -> None:
        connection = self.dir / "connection.json"
        self.say(
            "\nProsody and the component keep running. In another terminal:\n"
            f"  python examples/worker.py --connection {connection}\n"
            f"  python examples/publisher.py --connection {connection} --count 20\n"
            f"  xmpp-queue pipeline report -c {self.dir / 'component.toml'} --out report\n"
            "Ctrl-C here stops everything."
        )
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            # Ctrl-C is how serving ends: not a failure of the run.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()

    async def _shutdown(self) -> None:
        """Stop what was started, newest first; every step bounded in time."""
        for worker in self.workers.values():
            if not worker.stopping:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(worker.stop(grace=2), 5)
                if not worker.stopping:
                    worker.abort()
        if self.publisher is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.publisher.close(), 5)
            self.publisher.abort()
        if self.component is not None:
            await asyncio.to_thread(_stop_process, self.component)
        if self.prosody is not None:
            await asyncio.to_thread(self.prosody.stop)


def _stop_process(process: subprocess.Popen[bytes], wait: float = 10.0) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(wait)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _ensure_prosody(say: Any) -> bool:
    """Prosody is there, or installed now (as root), or we say how to install it."""
    if shutil.which("prosody") and shutil.which("prosodyctl"):
        return True
    apt = shutil.which("apt-get")
    if os.geteuid() == 0 and apt:
        say("Prosody is not installed: installing Debian's package (apt-get install -y prosody)")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = [apt, "install", "-y", "--no-install-recommends", "prosody"]
        if subprocess.run(install, env=env).returncode != 0:
            subprocess.run([apt, "update"], env=env)
            subprocess.run(install, env=env)
        if shutil.which("prosody") and shutil.which("prosodyctl"):
            return True
    say(
        "Prosody is not installed. The demo runs a private instance of Debian's package:\n"
        "    sudo apt-get install -y prosody\n"
        "(the system service it enables is not used; the demo starts its own on free ports)\n"
        "then run `xmpp-queue demo` again."
    )
    return False


# --- displays -------------------------------------------------------------------------


def _workers_table(demo: Demo) -> Table:
    table = Table(title="workers")
    for column in ("worker", "ms/item", "at a time", "received", "acked", "unlocked", "lost"):
        table.add_column(column, justify="left" if column == "worker" else "right")
    table.add_column("state")
    for plan in (p for p in PLANS if p.name in demo.workers):
        st = demo.workers[plan.name].stats
        table.add_row(
            plan.name,
            f"{plan.seconds_per_item * 1000:.0f}",
            str(plan.queue_requests),
            str(st.received),
            str(st.acked),
            str(st.failed),
            str(st.lost),
            demo.states.get(plan.name, ""),
        )
    return table


class LiveDisplay:
    """A rich progress bar and the per-worker table, redrawn four times a second."""

    def __init__(self, demo: Demo) -> None:
        self.demo = demo
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[detail]}"),
        )
        self.task = self.progress.add_task("done", total=demo.items, detail="")
        self.live = Live(self._render(), console=demo.console, refresh_per_second=4)

    def _render(self) -> Group:
        return Group(self.progress, _workers_table(self.demo))

    def __enter__(self) -> LiveDisplay:
        self.live.__enter__()
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        if kind is not None:  # Ctrl-C: the last counts read are not a result ("published 0")
            self.progress.update(self.task, detail="interrupted")
        self.live.update(self._render())
        self.live.__exit__(None, None, None)

    def update(self, done: int, counts: dict[str, int]) -> None:
        detail = (
            f"published {counts.get('published', 0)}  acked {counts.get('acked', 0)}  "
            f"dead {counts.get('dead_lettered', 0)}"
        )
        self.progress.update(self.task, completed=done, detail=detail)
        self.live.update(self._render())

    def note(self, text: str) -> None:
        self.live.console.print(text)


class PlainDisplay:
    """One line per second (and one per change of a worker's state): for logs and tests."""

    def __init__(self, demo: Demo) -> None:
        self.demo = demo
        self.last = 0.0
        self.states: dict[str, str] = {}

    def __enter__(self) -> PlainDisplay:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def update(self, done: int, counts: dict[str, int]) -> None:
        for name, state in self.demo.states.items():
            if self.states.get(name) not in (None, state):
                self.demo.say(f"worker {name}: {state}")
        self.states = dict(self.demo.states)
        now = time.monotonic()
        if now - self.last >= 1.0 or done >= self.demo.items:
            self.last = now
            workers = " ".join(f"{n}={w.stats.acked}" for n, w in self.demo.workers.items())
            self.demo.say(
                f"progress: done {done}/{self.demo.items} published {counts.get('published', 0)} "
                f"acked {counts.get('acked', 0)} dead-lettered {counts.get('dead_lettered', 0)} "
                f"| acked by {workers}"
            )

    def note(self, text: str) -> None:
        self.demo.say(text)
