"""What a topic's `filtered` ledger rows add to a commit on SQLite.

Why: a topic whose bound queues keep nothing writes no copy, yet the commit
batcher writes one `filtered` ledger row per bound queue and committed batch
(the count of items each filter kept out, durable with the topic items of the
same commit). An unbound topic's commits write no ledger row at all, so those
rows are the only thing that makes such a commit touch the ledger table, its
two indexes and its AUTOINCREMENT counter. This measures that, alone: the
real `SqliteBackend.write` (same statements, same PRAGMAs: WAL,
`synchronous=FULL`) of commits of `--items` topic items (a 6-byte payload and
one attribute, as `bench/topics_wire.py` publishes), with 0, 1 or 5 `filtered`
rows besides, the three kinds alternating commit by commit. Printed: CPU µs per
commit of this process (the writer thread included), median of each kind.

Run from the repository root:
    python bench/filtered_rows.py                 # 16 items per commit, 600 commits each
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from processes import machine_busy_seconds

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from xmpp_queue.core.ledger import EventKind, LedgerEvent  # noqa: E402
from xmpp_queue.core.model import Node, NodeConfig, new_item  # noqa: E402
from xmpp_queue.storage import migrations  # noqa: E402
from xmpp_queue.storage.backend_sqlite import SqliteBackend  # noqa: E402
from xmpp_queue.storage.flush import Flush  # noqa: E402
from xmpp_queue.storage.item_values import stored_item  # noqa: E402

TOPIC = "topic"
QUEUES = [f"q{k}" for k in range(5)]


def commit_rows(seq: int, items: int, rows: int, at: datetime) -> Flush:
    """*items* new topic items from *seq* on, and *rows* `filtered` rows."""
    flush = Flush(max_seq=seq + items)
    for i in range(items):
        item = new_item(TOPIC, f"i{seq + i}", "pub@localhost/x", "<job/>", 6, {"region": "r3"}, at)
        flush.item_upserts.append(stored_item(item, seq + i))
    for queue in QUEUES[:rows]:
        flush.events.append(LedgerEvent(at, EventKind.FILTERED, queue, "", None, 3, 0, None, TOPIC))
    return flush


async def measure(args: argparse.Namespace) -> dict[int, list[float]]:
    spent: dict[int, list[float]] = {0: [], 1: [], 5: []}
    with tempfile.TemporaryDirectory(prefix="xq-filtered-rows-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'queue.db'}"
        await migrations.upgrade_async(url)
        backend = SqliteBackend(url)
        try:
            now = datetime.now(UTC)
            nodes = [Node(TOPIC, NodeConfig(), now, "owner@localhost")]
            nodes += [Node(q, NodeConfig(queue=True), now, "owner@localhost") for q in QUEUES]
            await backend.write(Flush(node_upserts=nodes))
            seq = 1
            for n in range(args.commits * 3 + 30):
                rows = (0, 1, 5)[n % 3]
                flush = commit_rows(seq, args.items, rows, datetime.now(UTC))
                seq += args.items
                start = time.process_time()
                await backend.write(flush)
                if n >= 30:  # the first ones warm the statement cache and the file
                    spent[rows].append((time.process_time() - start) * 1e6)
        finally:
            await backend.close()
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=16, help="topic items per commit")
    parser.add_argument("--commits", type=int, default=600, help="commits of each kind")
    args = parser.parse_args()
    busy0, _ = machine_busy_seconds()
    wall0, own0 = time.perf_counter(), own_cpu()
    spent = asyncio.run(measure(args))
    busy1, _ = machine_busy_seconds()
    others = max(0.0, (busy1 - busy0) - (own_cpu() - own0)) / (time.perf_counter() - wall0)
    base = statistics.median(spent[0])
    print(f"{args.items} topic items per commit, {args.commits} commits of each kind")
    for rows, values in spent.items():
        median = statistics.median(values)
        print(
            f"  {rows} filtered rows: {median:7.0f} µs CPU per commit (median), "
            f"{median - base:+6.0f} µs against none"
        )
    print(f"other load on the machine during the run: {others:.2f} cores (of {os.cpu_count()})")


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
