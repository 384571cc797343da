"""Push to an HTTP endpoint against 4 XMPP workers, same run, same machine (issue 22).

What it measures: the component of this checkout on SQLite, behind a private Prosody
(the same set-up as `queue_throughput.py`, whose machinery this reuses), one publisher
keeping a window of publishes outstanding, and the queue's items taken by either

- **xmpp**: 4 XMPP workers subscribed with `pubsub#queue_requests` 8, each acking
  (retracting) an item as soon as its notification arrives (`queue_throughput.py`'s
  sqlite scenario); or
- **push**: one push subscription (added by the queue's owner with the push-add
  command) to an aiohttp endpoint in this process that answers 204 at once, with
  *max in flight* 32 (the same 32 items in flight as 4 workers x 8), HMAC-signed.

Printed per scenario: items/s end to end (first measured publish sent -> last ack:
for push, the last 204 answered; the component commits the ack right after),
publish -> delivery latency, CPU µs per item of the component, Prosody and this
process (the load generator, and for push also the HTTP endpoint), and the other
load on the machine meanwhile. Target: push reaches at least the XMPP workers' items/s.
The scenarios alternate (xmpp, push, xmpp, push ...) so the machine's load of the
moment hits both; the median run of each is shown.

Run from the repository root:
    python bench/push.py                      # 5,000 items, window 32, 3 runs each
    python bench/push.py --items 10000 --repeat 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from aiohttp import web
from load import Tracker, create_queue_node, is_result
from processes import REPO, Child, component_config, migrate, start_component
from queue_throughput import (
    DOMAIN,
    NODE,
    PASSWORD,
    QUEUE_DOMAIN,
    SECRET,
    Bench,
    CpuMeter,
    Figures,
    Scenario,
    SetupError,
    median_runs,
    parse_args,
    print_table,
    wait_done,
    wait_ready,
)
from queue_throughput import Publisher as WindowPublisher

HMAC_SECRET = "bench-push-secret"
PUSH_CONFIG = (
    "\n[push]\n"
    'allowed_hosts = ["127.0.0.1"]\n'
    'allowed_networks = ["127.0.0.0/8"]\n'
    "allow_http = true\n"
)


class Endpoint:
    """The push endpoint: answers 204 at once; each POST is a delivery and its ack."""

    def __init__(self) -> None:
        self.tracker: Tracker | None = None
        self.port = 0
        self.posts = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/hook", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        self.posts += 1
        tracker = self.tracker
        if tracker is not None:
            idx = int(body["id"][1:])
            now = time.perf_counter()
            tracker.on_delivery(idx, now)
            tracker.on_ack(idx, True, now, b"")
        return web.Response(status=204)


class PushBench(Bench):
    """`queue_throughput.Bench` plus the push scenario."""

    async def run(self, scenario: Scenario) -> Figures:
        if scenario.target != "push":
            return await super().run(scenario)
        tmp = Path(tempfile.mkdtemp(prefix="push-", dir=self.workdir))
        config = component_config(
            tmp / "config.toml",
            jid=QUEUE_DOMAIN,
            secret=SECRET,
            port=self.prosody.component_port,
            database_url=f"sqlite:///{tmp / 'queue.db'}",
            log_level=self.args.log_level,
        )
        with config.open("a") as f:
            f.write(PUSH_CONFIG)
        migrate(config, tmp / "component.log", src=REPO)
        server = start_component(config, tmp / "component.log", REPO)
        endpoint = Endpoint()
        await endpoint.start()
        try:
            return await self._drive_push(scenario, server, endpoint)
        finally:
            server.stop()
            await endpoint.stop()

    async def _add_push(self, endpoint: Endpoint) -> None:
        """The queue's owner adds the push subscription (the client library's command)."""
        from xmpp_queue.client import Publisher as Owner

        async with Owner(
            f"publisher@{DOMAIN}",
            PASSWORD,
            QUEUE_DOMAIN,
            host="127.0.0.1",
            port=self.prosody.c2s_port,
            allow_plain=True,
        ) as owner:
            most = self.args.workers * self.args.queue_requests
            await owner.add_push(NODE, endpoint.url, secret=HMAC_SECRET, max_in_flight=most)

    async def _drive_push(self, scenario: Scenario, server: Child, endpoint: Endpoint) -> Figures:
        args = self.args
        pub = self._client("publisher", "load")
        try:
            await pub.connect()
            await wait_ready(pub, QUEUE_DOMAIN, server, args.start_timeout)
            answer = await pub.request(create_queue_node(QUEUE_DOMAIN, NODE), "create1")
            if not is_result(answer):
                raise SetupError(f"create failed: {answer[:600]!r}")
            await self._add_push(endpoint)
            warm, n = args.warmup, args.items
            tracker = Tracker(warm + n)
            endpoint.tracker = tracker
            publisher = WindowPublisher(pub, QUEUE_DOMAIN, NODE, tracker)
            pub.hand_over(publisher.handle)
            tracker.expect(0, warm, publish_results_only=False)
            publisher.start_window(0, warm, scenario.window or 32)
            if not await wait_done(tracker, [pub], server, args.batch_timeout):
                raise SetupError("warm-up did not complete")
            tracker.expect(warm, warm + n, publish_results_only=False)
            assert self.prosody.pid is not None
            meter = CpuMeter(server.pid, self.prosody.pid)
            publisher.start_window(warm, warm + n, scenario.window)
            completed = await wait_done(tracker, [pub], server, args.batch_timeout)
            meter.stop()
            figures = self._figures(scenario, tracker, warm, n, False, completed, meter)
            figures.max_in_flight = args.workers * args.queue_requests
            return figures
        finally:
            await pub.close()


async def run_all(args: argparse.Namespace) -> list[Figures]:
    from processes import run_prosody

    users = {"publisher": PASSWORD} | {f"worker{k}": PASSWORD for k in range(args.workers)}
    results: list[Figures] = []
    plan = [s for _ in range(args.repeat) for s in scenarios(args)]
    with tempfile.TemporaryDirectory(prefix="xq-push-bench-") as workdir:
        with run_prosody({QUEUE_DOMAIN: SECRET}, users, args) as prosody:
            bench = PushBench(args, prosody, Path(workdir))
            for scenario in plan:
                print(f"... {scenario.label}", file=sys.stderr, flush=True)
                figures = await bench.run(scenario)
                results.append(figures)
                print_table([figures])
    return results


def scenarios(args: argparse.Namespace) -> list[Scenario]:
    return [Scenario(target, window=w) for w in args.window for target in ("sqlite", "push")]


def main() -> int:
    args = parse_args(["--backends", "sqlite", "--skip-null", "--repeat", "3", *sys.argv[1:]])
    print(
        f"settings: items={args.items} warmup={args.warmup} window={args.window} "
        f"xmpp: {args.workers} workers x queue_requests {args.queue_requests}; "
        f"push: max in flight {args.workers * args.queue_requests}, endpoint answers 204"
    )
    try:
        results = asyncio.run(asyncio.wait_for(run_all(args), args.timeout))
    except (SetupError, TimeoutError) as exc:
        print(f"benchmark aborted: {str(exc) or 'global timeout'}", file=sys.stderr)
        return 2
    rows = median_runs(results)
    print()
    print(f"median run of {args.repeat} (by items/s) per scenario ('sqlite' = 4 XMPP workers):")
    print_table(rows)
    by = {r.scenario.split(",")[0]: r.items_per_s for r in rows}
    if by.get("sqlite") and "push" in by:
        ratio = by["push"] / by["sqlite"]
        print(f"push / XMPP workers: {ratio:.0%} (target >= 100 %)")
    return 0 if all(r.completed and not r.errors for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
