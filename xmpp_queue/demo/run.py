"""The demo's run, step by step: servers, database, component, queue, publisher,
workers, the work, the summary, then stopping everything it started.

Why a module of its own: this is the story a newcomer reads (see the package's
docstring); the files, processes, ledger and display are in their own modules.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import secrets
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from xmpp_queue.client import ClientError, Publisher, Worker, json_payload
from xmpp_queue.demo.directory import (
    affiliations_body,
    clear_previous_run,
    component_toml,
    lock_demo_dir,
    pipeline_toml,
    route_client_logs,
    write_connection_file,
)
from xmpp_queue.demo.display import LiveDisplay, PlainDisplay, print_summary
from xmpp_queue.demo.ledger import DemoLedger
from xmpp_queue.demo.plan import (
    CRASH_AT,
    DEAD_LETTER_NODE,
    LOCK_TIMEOUT,
    MAX_DELIVERIES,
    NODE,
    PLANS,
    SERVICE,
    Accounts,
    DemoBusy,
    DemoFailure,
    is_poison,
)
from xmpp_queue.demo.processes import (
    component_log_tail,
    ensure_prosody,
    start_component,
    stop_component,
)

DISCO_INFO = "<query xmlns='http://jabber.org/protocol/disco#info'/>"

log = logging.getLogger("xmpp_queue.demo")


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
        self.ledger = DemoLedger(self.db_url)

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
        route_client_logs(self.dir)
        await self._start_prosody()
        await self._migrate()
        self._start_component()
        await self._connect_publisher()
        await self._create_nodes()
        write_connection_file(self.dir, self.prosody.c2s_port, self.accounts)
        await self._start_workers()
        summary = await self._work()
        await self._stop_workers()
        summary.update(await self.ledger.summary())
        summary.update(self._worker_summary())
        done = summary["acked"] + summary["dead_lettered"]
        summary["seconds"] = round(self.elapsed, 2)
        summary["items_per_second"] = round(done / max(self.elapsed, 1e-9), 1)
        summary["adds_up"] = summary["published"] == summary["acked"] + summary["dead_lettered"]
        print_summary(self, summary)
        (self.dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        if self.args.serve:
            await self._serve()
        return 0 if summary["complete"] and summary["adds_up"] else 1

    # --- setting up -------------------------------------------------------------------

    def _prepare_dir(self) -> None:
        self._lock_fd = lock_demo_dir(self.dir)  # before anything of another demo is touched
        clear_previous_run(self.dir)
        self.say(f"Demo directory: {self.dir}")

    async def _start_prosody(self) -> None:
        from xmpp_queue.servers._process import ServerNotInstalled
        from xmpp_queue.servers.prosody import PrivateProsody

        if not await asyncio.to_thread(ensure_prosody, self.say):
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

    def _start_component(self) -> None:
        config = self.dir / "component.toml"
        toml = component_toml(self.secret, self.prosody.component_port, self.db_url, self.accounts)
        config.write_text(toml + pipeline_toml(self.prosody.c2s_port, self.accounts))
        self.component = start_component(self.dir, config, self.say)

    async def _connect_publisher(self) -> None:
        publisher = Publisher(self.accounts.account("publisher", self.prosody.c2s_port), window=32)
        await publisher.connect()
        self.publisher = publisher
        deadline = time.monotonic() + 30
        while True:  # the component is up when it answers disco#info itself
            if self.component is not None and self.component.poll() is not None:
                raise DemoFailure(f"the component exited:\n{component_log_tail(self.dir)}")
            try:
                await publisher.link.call(DISCO_INFO, "get")
                return
            except (ClientError, TimeoutError):
                if time.monotonic() > deadline:
                    raise DemoFailure(
                        f"the component did not come up in 30 s:\n{component_log_tail(self.dir)}"
                    ) from None
                await asyncio.sleep(0.1)

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
        await self.publisher.link.call(affiliations_body(self.accounts))
        self.say(
            f"Queue node '{NODE}': lock timeout {LOCK_TIMEOUT} s, {MAX_DELIVERIES} deliveries, "
            f"then '{DEAD_LETTER_NODE}'"
        )

    # --- the work ---------------------------------------------------------------------

    async def _start_workers(self) -> None:
        assert self.prosody is not None
        for plan in PLANS:
            name = f"worker-{plan.name}"
            worker = Worker(
                self.accounts.account(name, self.prosody.c2s_port),
                NODE,
                plan.handler(),
                queue_requests=plan.queue_requests,
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
            payload = json_payload({"n": n, "poison": is_poison(n)})
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
                    counts = await self.ledger.counts()
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

    def _worker_summary(self) -> dict[str, Any]:
        return {
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
            await asyncio.to_thread(stop_component, self.component)
        if self.prosody is not None:
            await asyncio.to_thread(self.prosody.stop)
        await self.ledger.close()
