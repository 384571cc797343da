"""A topic's publisher through Prosody and SQLite: unbound against filtered bound queues.

Issue 21's second target, as users see it: "with filters that drop 90 %, the
publisher's rate stays within 10 % of an unbound topic's". The component of this
checkout on SQLite behind a private Prosody (`queue_throughput.py`'s set-up and
light clients), one publisher keeping a window of publishes outstanding to an
ordinary node `topic`, each item with one attribute `region` = `r0`..`r9` in turn
(a SHIM header; so a filter naming one region keeps 10 % of the items). Scenarios:

- **unbound**: no queue is bound to the topic;
- **1x10**: one bound queue whose filter keeps `r0` (the topic's items 90 % dropped);
- **5x10**: five bound queues, queue k keeping `rk` (each filter drops 90 %; half the
  topic's items are copied somewhere, each copy a full queue publish);
- **5x0**: five bound queues whose filters keep nothing (what filtering alone costs);

each bound queue with `--workers` XMPP workers (`pubsub#queue_requests`
`--queue-requests`) acking every copy as its notification arrives, in the same
run, so their deliveries and acks share the component with the publisher.

Printed per scenario: the **publisher's rate** (measured publishes answered per
second, first publish sent to last answer), the copies acked and the seconds until
the last ack, publish round-trip latency, CPU µs per publish of the component,
Prosody and this process, and the other load on the machine (cores busy outside
the benchmark's processes). Then each bound scenario's publisher rate as a share
of the unbound one's in the same round, median and range over the rounds (target >=
90 %). Scenarios alternate (unbound, 1x10, 5x10, 5x0, unbound ...) and the median
run of each is shown. `--compare-src DIR` also runs
every scenario with the component of checkout DIR, interleaved.

`--shapes unbound,5x0` runs only the scenarios named (`unbound` always among them);
`1x100` (one bound queue keeping every item: a copy per publish) is run only when
named, to tell a copy's own cost from what a trickle of copies costs. The fan-out
target ("a publish to a topic with 5 bound queues (4 workers each) delivers at least
60 % of the items/s that one queue reaches with one publish per item") has two shapes
of its own, run only when named: `5x100` (five bound queues keeping every item) and
`queue` (no topic: the publisher publishes straight to one plain queue with the same
workers); `5x100`'s copies acked per second (first publish sent to last copy acked)
are read against `queue`'s items acked per second in the same round. Any shape named
with `+linger` (`1x10+linger`) has its workers ack with `--ack-linger-ms` (default
100: the client library's ``ack_linger``, Pulsar's acknowledgment group time), several
copies per retract, instead of each copy at once; with `+batch` (`1x10+batch`, or
`1x10+batch+linger`) they ask for up to `--queue-requests` items per notification and
ack each notification's items in one retract; `+batch+wait` (`1x10+batch+wait`) also
lets the service hold a short batch for up to `--batch-wait-ms` (default 50) to fill it
(``pubsub#queue_batch_wait``), so a trickle of copies travels several per stanza.
`--pin` puts the component on CPU 0 and Prosody on CPU 1 for each measured run (every
thread, with `taskset`): the scheduler's placement of the two on the 2 cores moved the
unbound rate by a third from round to round, and pinned runs spread much less.
`--profile DIR` samples the component with py-spy during each measured run (the last run
of each scenario is kept) and prints its hot spots. `--null` also runs every shape
against the null component's `topic` mode in each round (`null_topic.py`: the same
stanzas, batched and acked alike, no storage, no logic), so each shape's share of the
unbound rate can be read against the share that the XMPP server and the machine leave
to any component. `--count-commits` serves the component's `/metrics` and prints the
commits per publish and operations per commit of each measured run (whether the
workers' acks join the publishes' batches; not with `--null`); the metrics
cost CPU of their own, so compare CPU figures only between runs without it.

Run from the repository root:
    python bench/topics_wire.py                           # 5,000 items, window 32, 3 runs
    python bench/topics_wire.py --repeat 5 --compare-src /tmp/prev
    python bench/topics_wire.py --shapes unbound,1x10,1x100 --repeat 3
    python bench/topics_wire.py --shapes unbound,queue,5x100 --repeat 3 --pin
    python bench/topics_wire.py --shapes unbound,1x10,1x10+batch+wait,5x10,5x10+batch+wait
    python bench/topics_wire.py --shapes unbound,5x10+batch+wait --null --pin --prosody-per-round
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from load import (
    PUBSUB,
    SHIM,
    Latency,
    Publisher,
    Tracker,
    Worker,
    is_result,
    queue_members,
    subscribe_queue,
)
from processes import REPO, Child, run_prosody, start_null_component
from queue_throughput import (
    PASSWORD,
    QUEUE_DOMAIN,
    SECRET,
    Bench,
    CpuMeter,
    Scenario,
    SetupError,
    parse_args,
    wait_done,
    wait_ready,
)
from wire import LightClient

TOPIC = "topic"
REGIONS = 10
SHAPES: dict[str, tuple[int, bool | None]] = {
    "unbound": (0, True),
    "1x10": (1, True),
    "5x10": (5, True),
    "5x0": (5, False),
}
"""Scenario -> (bound queues, whether queue k keeps region `rk`; else it keeps nothing;
None: it keeps every item). The scenarios run by default."""
EXTRA_SHAPES: dict[str, tuple[int, bool | None]] = {
    "1x100": (1, None),
    "5x100": (5, None),
    "queue": (1, None),
}
"""Run only when named in ``--shapes``. ``1x100``: one bound queue keeping every item,
so copies come at the publisher's rate (a copy's own cost, apart from what a trickle
of copies costs: compare the per-copy figures of ``1x10`` and ``1x100``). ``5x100``:
five bound queues keeping every item (fan-out: five copies per publish). ``queue``: no
topic, the publisher publishes straight to one plain queue with the same workers (the
fan-out target's reference: copies acked per second of ``5x100`` against items acked
per second here)."""
PLAIN_QUEUE = "queue"
BASELINES = ("unbound", PLAIN_QUEUE)
"""The shapes the others are read against in each round; they run first in it."""
ALL_SHAPES = SHAPES | EXTRA_SHAPES
LINGER = "+linger"
"""A shape named with this suffix (``1x10+linger``) runs with workers that ack with
``--ack-linger-ms`` (the client library's ``ack_linger``); without it they ack each
copy at once."""
BATCH = "+batch"
"""A shape named with this suffix (``1x10+batch``) runs with workers that ask for up to
``--queue-requests`` items per notification (``pubsub#queue_max_batch``) and ack each
notification's items in one retract (every batch on, as ``queue_throughput.py``'s
batched scenarios); both suffixes may be given (``1x10+batch+linger``)."""
WAIT = "+wait"
"""With ``+batch`` (``1x10+batch+wait``): the workers also let the service hold a short
batch for up to ``--batch-wait-ms`` to fill it (``pubsub#queue_batch_wait``), so a
trickle of copies comes several per notification and is acked several per retract."""
MODIFIERS = (LINGER, BATCH, WAIT)


def shape_of(name: str) -> tuple[int, bool | None]:
    return ALL_SHAPES[name.split("+", 1)[0]]


def has(name: str, modifier: str) -> bool:
    """Whether shape *name* was given *modifier* (``+linger``, ``+batch``)."""
    return modifier[1:] in name.split("+")[1:]


REGION_HEADERS = [
    f"<headers xmlns='{SHIM}'><header name='region'>r{k}</header></headers>".encode()
    for k in range(REGIONS)
]


def create_node(to: str, node: str, fields: dict[str, str], iq_id: str) -> str:
    """XEP-0060 §8.1.3: create with a configuration form (the component's defaults else)."""
    rows = "".join(
        f"<field var='{var}'><value>{escape(value)}</value></field>"
        for var, value in fields.items()
    )
    return (
        f"<iq type='set' to='{to}' id='{iq_id}'><pubsub xmlns='{PUBSUB}'>"
        f"<create node='{node}'/><configure><x xmlns='jabber:x:data' type='submit'>"
        f"<field var='FORM_TYPE' type='hidden'><value>{PUBSUB}#node_config</value></field>"
        f"{rows}</x></configure></pubsub></iq>"
    )


class RegionPublisher(Publisher):
    """The window publisher of `load.py`; item i carries `region` = `r{i % 10}`."""

    def _make(self, idx: int, now: float) -> bytes:
        self.tracker.sent[idx] = now
        return self._template % (idx, idx, now, REGION_HEADERS[idx % REGIONS])


class TopicTracker(Tracker):
    """Done when every publish of the span is answered AND every copy in it acked.

    An item may have several copies (one per bound queue keeping it): ``copy_acks``
    counts the acked ones per item, at most *copies_of(i)* (a redelivered copy's
    second ack is not counted twice), and ``acked`` holds the time of its last ack."""

    def __init__(self, n: int, copies_of: Callable[[int], int]) -> None:
        super().__init__(n)
        self.copies_of = copies_of
        self.copy_acks = [0] * n

    def expect_topic(self, start: int, end: int) -> None:
        self.expect(start, end, publish_results_only=True)
        self._need += sum(self.copies_of(i) for i in range(start, end))
        if self._need:
            self.done.clear()

    def on_ack(self, idx: int, ok: bool, now: float, stanza: bytes) -> None:
        if not ok:
            self.error(stanza)
        elif self.copy_acks[idx] < self.copies_of(idx):
            self.copy_acks[idx] += 1
            self.acked[idx] = now
            self._complete_one(idx)


async def commit_counts(address: str) -> tuple[float, float]:
    """(commits, operations) of the component so far: its /metrics histogram of
    operations per committed batch (``--count-commits`` serves it)."""
    import aiohttp

    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://{address}/metrics") as r:
            text = await r.text()
    found: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name.startswith("xmpp_queue_commit_batch_operations_"):
            found[name.rsplit("_", 1)[1]] = float(value)
    return found.get("count", 0.0), found.get("sum", 0.0)


def region_filter(k: int, keeping: bool | None) -> str:
    """The filter of bound queue *k*: its region, a region no item has, or any region."""
    if keeping is None:
        return "attributes:region"
    return f'attributes.region = "{"r" if keeping else "none"}{k}"'


def copies_of_item(queues: int, keeping: bool | None) -> Callable[[int], int]:
    """How many bound queues keep item i: each of them when they keep every item,
    else the one whose region is i's (queue k keeps region k), or none."""
    if keeping is None:
        return lambda i: queues
    if not keeping:
        return lambda i: 0
    return lambda i: 1 if i % REGIONS < queues else 0


@dataclass
class Run:
    scenario: str
    publishes: int
    publisher_per_s: float
    copies: int
    until_last_ack_s: float
    copies_per_s: float
    publish_rtt: Latency | None
    component_us: float
    prosody_us: float
    loadgen_us: float
    other_cores: float
    errors: int
    completed: bool
    commits_per_publish: float | None = None
    operations_per_commit: float | None = None
    items_per_notice: float | None = None  # the workers' items per notification


@dataclass(frozen=True)
class TopicScenario(Scenario):
    null: bool = False
    """Against the null component's `topic` mode (``--null``): the same stanzas, no work."""

    @property
    def label(self) -> str:
        return super().label + (", null component" if self.null else "")


class TopicBench(Bench):
    worker_batch = 1
    """Items per notification the current scenario's workers ask for (``+batch``)."""
    worker_wait_ms = 0
    """How long the service may hold a short batch for them (``+wait``)."""

    async def run_topic(self, scenario: Scenario) -> Run:
        queues, keeping = shape_of(scenario.target)
        tmp = Path(tempfile.mkdtemp(prefix="topic-", dir=self.workdir))
        metrics = self.args.count_commits
        if isinstance(scenario, TopicScenario) and scenario.null:
            port = self.prosody.component_port
            server = start_null_component(port, QUEUE_DOMAIN, SECRET, "topic", tmp / "null.log")
        else:
            server = self._start_component("sqlite", tmp, metrics, src=Path(scenario.src or REPO))
        try:
            return await self._drive_topic(scenario, queues, keeping, server)
        finally:
            server.stop()

    async def _set_up_topic(
        self,
        server: Child,
        pub: LightClient,
        workers: list[list[LightClient]],
        keeping: bool | None,
        direct: bool = False,
    ) -> None:
        """The topic and its bound queues; with *direct*, one plain queue and no topic."""
        a = self.args
        await wait_ready(pub, QUEUE_DOMAIN, server, a.start_timeout)
        steps = [] if direct else [create_node(QUEUE_DOMAIN, TOPIC, {}, "c-topic")]
        for k, group in enumerate(workers):
            fields = {"pubsub#queue": "1"}
            if not direct:
                fields["pubsub#queue_topic"] = TOPIC
                fields["pubsub#queue_filter"] = region_filter(k, keeping)
            steps.append(create_node(QUEUE_DOMAIN, f"q{k}", fields, f"c-q{k}"))
            steps.append(queue_members(QUEUE_DOMAIN, f"q{k}", [w.bare for w in group]))
        for n, step in enumerate(steps):
            iq_id = step.split("id='", 1)[1].split("'", 1)[0]
            answer = await pub.request(step, iq_id)
            if not is_result(answer):
                raise SetupError(f"set-up step {n} failed: {answer[:600]!r}")
        for k, group in enumerate(workers):
            for w in group:
                w.send(f"<presence/><presence to='{QUEUE_DOMAIN}'/>")
                stanza = subscribe_queue(
                    QUEUE_DOMAIN,
                    f"q{k}",
                    w.bare,
                    a.queue_requests,
                    self.worker_batch,
                    self.worker_wait_ms,
                )
                answer = await w.request(stanza, "sub1")
                if not is_result(answer):
                    raise SetupError(f"subscribe failed: {answer[:600]!r}")

    async def _drive_topic(
        self, scenario: Scenario, queues: int, keeping: bool | None, server: Child
    ) -> Run:
        a = self.args
        pub = self._client("publisher", "load")
        groups = [
            [self._client(f"worker{k * a.workers + j}", "load") for j in range(a.workers)]
            for k in range(queues)
        ]
        workers = [w for group in groups for w in group]
        clients = [pub, *workers]
        try:
            await asyncio.gather(*(c.connect() for c in clients))
            direct = scenario.target.split("+", 1)[0] == PLAIN_QUEUE
            self.worker_batch = a.queue_requests if has(scenario.target, BATCH) else 1
            self.worker_wait_ms = round(a.batch_wait_ms) if has(scenario.target, WAIT) else 0
            await self._set_up_topic(server, pub, groups, keeping, direct)
            warm, n = a.warmup, a.items
            tracker = TopicTracker(warm + n, copies_of_item(queues, keeping))
            publisher = RegionPublisher(pub, QUEUE_DOMAIN, "q0" if direct else TOPIC, tracker)
            pub.hand_over(publisher.handle)
            light: list[Worker] = []
            for k, group in enumerate(groups):
                for w in group:
                    worker = Worker(
                        w,
                        QUEUE_DOMAIN,
                        f"q{k}",
                        tracker,
                        self.worker_batch,
                        linger=a.ack_linger if has(scenario.target, LINGER) else 0.0,
                        flush_at=max(1, a.queue_requests // 2),
                    )
                    w.hand_over(worker.handle)
                    light.append(worker)
            tracker.expect_topic(0, warm)
            publisher.start_window(0, warm, scenario.window)
            if not await wait_done(tracker, clients, server, a.batch_timeout):
                raise SetupError("warm-up did not complete")
            tracker.expect_topic(warm, warm + n)
            assert self.prosody.pid is not None
            counts = await commit_counts(self.metrics_address) if a.count_commits else None
            if a.pin:
                pin(server.pid, 0)
                pin(self.prosody.pid, 1)
            seen = (sum(w.received for w in light), sum(w.notifications for w in light))
            meter = CpuMeter(server.pid, self.prosody.pid)
            profiler = self._start_profiler(scenario, server, server.log.parent)
            try:
                publisher.start_window(warm, warm + n, scenario.window)
                completed = await wait_done(tracker, clients, server, a.batch_timeout)
                meter.stop()
                items = sum(w.received for w in light) - seen[0]
                notices = sum(w.notifications for w in light) - seen[1]
                if counts is not None:
                    after = await commit_counts(self.metrics_address)
                    counts = (after[0] - counts[0], after[1] - counts[1])
            finally:
                if profiler is not None:
                    self._stop_profiler(profiler)
        finally:
            await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
        span = range(warm, warm + n)
        first = min(tracker.sent[i] for i in span)
        answered = [tracker.published[i] for i in span if tracker.published[i]]
        acked = [tracker.acked[i] for i in span if tracker.acked[i]]
        copies = sum(tracker.copy_acks[i] for i in span)
        until_last_ack = (max(acked) - first) if acked else 0.0
        cpu = [s * 1e6 / max(1, len(answered)) for s in meter.spent]
        return Run(
            scenario=scenario.label,
            publishes=len(answered),
            publisher_per_s=len(answered) / (max(answered) - first) if answered else 0.0,
            copies=copies,
            until_last_ack_s=until_last_ack,
            copies_per_s=copies / until_last_ack if until_last_ack > 0 else 0.0,
            publish_rtt=Latency.of(
                [tracker.published[i] - tracker.sent[i] for i in span if tracker.published[i]]
            ),
            component_us=cpu[0],
            prosody_us=cpu[1],
            loadgen_us=cpu[2],
            other_cores=meter.other_cores,
            errors=tracker.errors,
            completed=completed,
            commits_per_publish=counts[0] / n if counts else None,
            operations_per_commit=counts[1] / max(1.0, counts[0]) if counts else None,
            items_per_notice=items / notices if notices else None,
        )


def print_runs(runs: list[Run]) -> None:
    head = (
        f"{'scenario':<38} {'publishes':>9} {'pub/s':>7} {'copies':>6} {'last ack s':>10} "
        f"{'copies/s':>8} "
        f"{'rtt p50/p99 ms':>15} {'comp µs':>8} {'prosody µs':>10} {'load µs':>8} "
        f"{'others':>6} {'err':>4}"
    )
    print(head)
    for r in runs:
        rtt = f"{r.publish_rtt.p50_ms:.1f}/{r.publish_rtt.p99_ms:.1f}" if r.publish_rtt else "-"
        flag = "" if r.completed else "  INCOMPLETE"
        if r.commits_per_publish is not None and r.operations_per_commit is not None:
            flag += f"  commits/publish {r.commits_per_publish:.3f}"
            flag += f" ops/commit {r.operations_per_commit:.1f}"
        if r.items_per_notice is not None:
            flag += f"  items/notification {r.items_per_notice:.2f}"
        print(
            f"{r.scenario:<38} {r.publishes:>9} {r.publisher_per_s:>7.0f} {r.copies:>6} "
            f"{r.until_last_ack_s:>10.2f} {r.copies_per_s:>8.0f} {rtt:>15} {r.component_us:>8.0f} "
            f"{r.prosody_us:>10.0f} {r.loadgen_us:>8.0f} {r.other_cores:>6.2f} {r.errors:>4}{flag}"
        )


def medians(runs: list[Run]) -> list[Run]:
    """Per scenario, the run with the median publisher rate."""
    groups: dict[str, list[Run]] = {}
    for r in runs:
        groups.setdefault(r.scenario, []).append(r)
    out = []
    for group in groups.values():
        group.sort(key=lambda r: r.publisher_per_s)
        out.append(group[(len(group) - 1) // 2])
    return out


def pin(pid: int, cpu: int) -> None:
    """Every thread of *pid* on CPU *cpu* only (``--pin``)."""
    subprocess.run(["taskset", "-a", "-cp", str(cpu), str(pid)], check=True, capture_output=True)


def round_shares(runs: list[Run]) -> dict[str, list[float]]:
    """Each bound run's publisher rate over the unbound run of its own round (the
    unbound rate itself swings from round to round, so ratios of medians mislead)."""
    shares: dict[str, list[float]] = {}
    base: dict[str, float] = {}  # by the label's rest (window, checkout)
    for r in runs:
        shape, _, rest = r.scenario.partition(",")
        if shape == "unbound":
            base[rest] = r.publisher_per_s
        elif not shape.startswith(PLAIN_QUEUE) and base.get(rest):
            shares.setdefault(r.scenario, []).append(r.publisher_per_s / base[rest])
    return shares


def fan_out_shares(runs: list[Run]) -> dict[str, list[float]]:
    """Each ``5x100`` run's copies acked per second over the items acked per second of
    the plain queue run of its own round (issue 21's fan-out target: at least 60 %)."""
    shares: dict[str, list[float]] = {}
    base: dict[str, float] = {}
    for r in runs:
        shape, _, rest = r.scenario.partition(",")
        name, plus, mods = shape.partition("+")
        key = plus + mods + rest  # the same worker modifiers, window and checkout
        if name == PLAIN_QUEUE:
            base[key] = r.copies_per_s
        elif name == "5x100" and base.get(key):
            shares.setdefault(r.scenario, []).append(r.copies_per_s / base[key])
    return shares


def in_round_order(round_plan: list[Scenario], round_no: int) -> list[Scenario]:
    """Unbound runs first (the round's baseline); the others run in the given order in
    even rounds and reversed in odd ones, as a run gains a few per cent from following
    a similar one. With --compare-src the two checkouts' unbound runs swap places in
    odd rounds too (always running this checkout's first favoured the other's)."""
    base = [s for s in round_plan if s.target.split("+", 1)[0] in BASELINES]
    rest = [s for s in round_plan if s.target.split("+", 1)[0] not in BASELINES]
    if round_no % 2 == 0:
        return base + rest
    return base[::-1] + rest[::-1]


def scenarios(args: argparse.Namespace) -> list[Scenario]:
    srcs = ["", *([str(args.compare_src)] if args.compare_src else [])]
    nulls = [False, True] if args.null else [False]
    return [
        TopicScenario(shape, window=window, src=src, null=null)
        for window in args.window
        for null in nulls
        for src in (srcs if not null else [""])
        for shape in args.shapes
    ]


async def run_all(args: argparse.Namespace) -> list[Run]:
    users = {"publisher": PASSWORD} | {
        f"worker{k}": PASSWORD for k in range(max(q for q, _ in ALL_SHAPES.values()) * args.workers)
    }
    runs: list[Run] = []
    rounds = [in_round_order(scenarios(args), r) for r in range(args.repeat)]
    if not args.prosody_per_round:  # one Prosody for the run (queue_throughput.py's option)
        rounds = [[s for r in rounds for s in r]]
    bench: TopicBench | None = None
    with tempfile.TemporaryDirectory(prefix="xq-topics-wire-") as workdir:
        for plan in rounds:
            with run_prosody({QUEUE_DOMAIN: SECRET}, users, args) as prosody:
                if bench is None:
                    bench = TopicBench(args, prosody, Path(workdir))
                bench.prosody = prosody
                for scenario in plan:
                    print(f"... {scenario.label}", file=sys.stderr, flush=True)
                    run = await bench.run_topic(scenario)
                    runs.append(run)
                    print_runs([run])
    for path in dict.fromkeys(bench.profiles if bench is not None else []):  # one per scenario
        from profile_summary import report

        print(report(path, top=args.top))
    return runs


def main() -> int:
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument(
        "--shapes",
        type=lambda text: [s for s in text.split(",") if s],
        default=list(SHAPES),
    )
    own.add_argument("--count-commits", action="store_true")
    own.add_argument("--ack-linger-ms", type=float, default=100.0)
    own.add_argument("--batch-wait-ms", type=float, default=50.0)
    own.add_argument("--pin", action="store_true")
    own.add_argument("--null", action="store_true")
    mine, rest = own.parse_known_args(sys.argv[1:])
    known = [*ALL_SHAPES, *(name + m for name in ALL_SHAPES for m in MODIFIERS)]

    def valid(shape: str) -> bool:
        base, *mods = shape.split("+")
        return base in ALL_SHAPES and all(f"+{m}" in MODIFIERS for m in mods)

    waits_alone = [s for s in mine.shapes if has(s, WAIT) and not has(s, BATCH)]
    if waits_alone:
        print(f"--shapes: +wait needs +batch ({', '.join(waits_alone)})", file=sys.stderr)
        return 2
    if mine.null and mine.count_commits:
        print("--null: the null component serves no /metrics (no --count-commits)", file=sys.stderr)
        return 2
    if "unbound" not in mine.shapes or not all(valid(s) for s in mine.shapes):
        print(f"--shapes: unbound and any of {', '.join(known)}", file=sys.stderr)
        return 2
    args = parse_args(["--backends", "sqlite", "--skip-null", "--repeat", "3", *rest])
    args.shapes = mine.shapes
    args.count_commits = mine.count_commits
    args.ack_linger = mine.ack_linger_ms / 1000
    args.batch_wait_ms = mine.batch_wait_ms
    args.pin = mine.pin
    args.null = mine.null
    print(
        f"settings: items={args.items} warmup={args.warmup} window={args.window} "
        f"workers per bound queue={args.workers} queue_requests={args.queue_requests} "
        f"ack linger (+linger shapes)={mine.ack_linger_ms:g} ms "
        f"batch wait (+wait shapes)={mine.batch_wait_ms:g} ms"
    )
    try:
        runs = asyncio.run(asyncio.wait_for(run_all(args), args.timeout))
    except (SetupError, TimeoutError) as exc:
        print(f"benchmark aborted: {str(exc) or 'global timeout'}", file=sys.stderr)
        return 2
    rows = medians(runs)
    print()
    print(f"median run of {args.repeat} (by publisher rate) per scenario:")
    print_runs(rows)
    for label, shares in round_shares(runs).items():
        print(
            f"  {label}: publisher at {statistics.median(shares):.0%} of the same round's "
            f"unbound (median of {len(shares)} rounds; {min(shares):.0%}-{max(shares):.0%})"
        )
    for label, shares in fan_out_shares(runs).items():
        print(
            f"  {label}: copies acked per second at {statistics.median(shares):.0%} of the same "
            f"round's plain queue items (median of {len(shares)} rounds; "
            f"{min(shares):.0%}-{max(shares):.0%}; target >= 60 %)"
        )
    spread = [r.other_cores for r in runs]
    print(f"other load during the runs: median {statistics.median(spread):.2f} cores")
    return 0 if all(r.completed and not r.errors for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
