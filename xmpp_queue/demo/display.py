"""What the demo shows while it runs and when it ends: a live progress bar and
worker table on a terminal, plain progress lines elsewhere, the summary table.

Why a module of its own: the run decides what happened; this only draws it, from
the run's counts and its workers' stats.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from xmpp_queue.demo.plan import PLANS

if TYPE_CHECKING:
    from xmpp_queue.demo.run import Demo


def workers_table(demo: Demo) -> Table:
    """Each worker's speed, window, counts and state."""
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


def print_summary(demo: Demo, s: dict[str, Any]) -> None:
    """The ledger's account of the run, and whether it adds up."""
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
    demo.console.print(table)
    if not demo.live:  # the live display leaves its own worker table on screen
        demo.console.print(workers_table(demo))
    verdict = "adds up" if s["adds_up"] else "DOES NOT add up"
    demo.say(
        f"published {s['published']} = acked {s['acked']} + dead-lettered "
        f"{s['dead_lettered']}: {verdict}"
    )
    demo.say(f"Details: {demo.dir / 'summary.json'}, logs in {demo.dir}")


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
        return Group(self.progress, workers_table(self.demo))

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
