"""A raw SQLite commit loop: the disk's own floor for one durable commit.

Why: the component answers a publish and sends its notification only after the
commit that holds it (one fsync). Reading its publish → delivery p99 needs the
cost of such a commit on the same disk at the same moment: this loop opens a
database with the component's pragmas (WAL, ``synchronous=FULL``), and commits
one small row per transaction, paced at a rate (or back to back), timing each
``BEGIN IMMEDIATE`` … ``COMMIT`` (the fdatasync of the WAL) on one thread, as the
component's writer thread does. ``queue_throughput.py --raw-commit`` runs it as a
scenario of the same run, in the same scratch directory as the bench databases.

Run alone from the repository root:
    python bench/raw_commit.py --rate 500 --commits 5000
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path


def commit_loop(directory: Path, commits: int, rate: float, warmup: int = 100) -> list[float]:
    """Seconds per commit of *commits* paced commits (rate 0: back to back)."""
    path = directory / "raw-commit.db"
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT)")
        body = "<job xmlns='urn:example:bench'>x</job>"
        samples: list[float] = []
        began = time.perf_counter()
        for n in range(warmup + commits):
            if rate > 0:
                delay = began + n / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            start = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (body) VALUES (?)", (body,))
            conn.execute("COMMIT")
            if n >= warmup:
                samples.append(time.perf_counter() - start)
        return samples
    finally:
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    """p50, p99 and max in milliseconds."""
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49] * 1e3, cuts[98] * 1e3, max(samples) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=5000)
    parser.add_argument("--rate", type=float, default=500.0, help="commits/s (0: back to back)")
    parser.add_argument("--dir", type=Path, default=None, help="where (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        p50, p99, worst = percentiles(commit_loop(Path(tmp), args.commits, args.rate))
    print(
        f"raw commit, rate {args.rate:g}/s: p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {worst:.1f} ms"
    )


if __name__ == "__main__":
    main()
