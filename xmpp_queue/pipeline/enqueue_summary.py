"""What ``pipeline enqueue`` reports: the per-row tallies gathered from the
partitions, the rejects file and the summary table (kept apart from the
publishing code in ``enqueue.py``)."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from xmpp_queue.pipeline.payloads import NOT_SENT, REJECT_CATEGORIES

PUBLISHED, REJECTED, FAILED = "published", "rejected", "failed"


@dataclass(slots=True)
class EnqueueSummary:
    rows_read: int = 0
    published: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    failed: int = 0
    seconds: float = 0.0  # the publishing Spark job alone
    total_seconds: float = 0.0  # the whole command: Spark start-up, reading, publishing
    throttled: int = 0  # publishes the service asked to retry later (its publish rate)
    reasons: Counter[str] = field(default_factory=Counter)
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.published / self.seconds if self.seconds > 0 else 0.0

    @property
    def ok(self) -> bool:
        return self.published == self.rows_read


def summarize(records: Iterable[tuple[Any, ...]]) -> EnqueueSummary:
    summary = EnqueueSummary()
    for record in records:
        if record[0] == "throttled":
            summary.throttled += record[1]
        elif record[0] == "count":
            _, status, category, n = record
            summary.rows_read += n
            if status == PUBLISHED:
                summary.published += n
            elif status == REJECTED:
                summary.rejected[category] += n
            else:
                summary.failed += n
        else:
            _, status, reason, item_id, source, raw = record
            summary.reasons[reason] += 1
            summary.examples.append(
                {
                    "status": status,
                    "reason": reason,
                    "item_id": item_id,
                    "source": source,
                    "record": raw,
                }
            )
    return summary


def write_rejects(path: str, examples: Sequence[dict[str, Any]]) -> None:
    """Rejected and unsent rows as JSON lines (written whole, then renamed)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        for example in examples:
            handle.write(json.dumps(example, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def throttle_hint(summary: EnqueueSummary, publisher_jid: str) -> str | None:
    """One line naming the setting when the service's per-JID publish rate slowed the run."""
    if not summary.throttled:
        return None
    return (
        f"throttled: the service asked {summary.throttled:,} publishes to wait (its [limits] "
        f"publish_rate per JID); list {publisher_jid} in the service's [limits] rate_exempt "
        "for full speed (docs/pipeline.md)"
    )


def print_enqueue_summary(
    summary: EnqueueSummary, node: str, out: TextIO, publisher_jid: str = ""
) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"enqueue into {node}")
    table.add_column("")
    table.add_column("rows", justify="right")
    table.add_row("read", f"{summary.rows_read:,}")
    table.add_row("published", f"{summary.published:,}")
    for category in REJECT_CATEGORIES:
        table.add_row(f"rejected: {category}", f"{summary.rejected.get(category, 0):,}")
    table.add_row(f"failed: {NOT_SENT}", f"{summary.failed:,}")
    if summary.total_seconds:
        table.add_row("wall time, all", f"{summary.total_seconds:.1f} s")
    table.add_row("wall time, reading + publishing", f"{summary.seconds:.1f} s")
    table.add_row("rate while publishing", f"{summary.rate:,.0f} items/s")
    console = Console(file=out, width=120)
    console.print(table)
    for reason, n in summary.reasons.most_common(5):
        console.print(f"  {n:>7,} x {reason}")
    hint = throttle_hint(summary, publisher_jid or "the publisher's JID")
    if hint:
        print(hint, file=out)
