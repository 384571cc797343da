"""What a stream of handler failures writes to the log: lines per failure.

Issue 24: 3,946 failures wrote 27,623 log lines in 100 s (a full traceback each).
This runs the worker's real JobRunner (fake ops: no server, the logging is the
point) over N failing jobs whose errors come in a few distinct kinds, with the
standard logging formatter on a counting stream, and prints the lines written,
lines per failure, and how many carried a traceback. Then it does the same with a
message that differs per item (the worst case for "once per distinct error").

Run from the repository root:
    python bench/failure_logging.py                  # 4,000 failures
    python bench/failure_logging.py --failures 20000 --kinds 5
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from xmpp_queue.client.jobs import Job, JobRunner
from xmpp_queue.client.wire import ItemEvent


class NullOps:
    async def retract(self, node: str, item_id: str) -> None: ...

    async def unlock(self, node: str, item_id: str, reason: str = "") -> None: ...

    async def extend(self, node: str, item_id: str, seconds: int) -> None: ...

    async def unlock_later(self, node: str, item_id: str, delay: int) -> None: ...

    async def dead_letter(self, node: str, item_id: str, reason: str) -> None: ...


async def run(failures: int, kinds: int, distinct_messages: bool) -> tuple[int, int, float]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logger = logging.getLogger("xmpp_queue.client")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False

    async def fail(job: Job) -> None:
        n = int(job.item_id)
        if distinct_messages:
            raise ValueError(f"bad row {n}")
        raise [ValueError, KeyError, RuntimeError, OSError, TypeError][n % kinds](
            f"kind {n % kinds}"
        )

    runner = JobRunner(NullOps(), fail, failures, lock_extend=0)
    started = time.perf_counter()
    for n in range(failures):
        runner.offer(ItemEvent("jobs", str(n), None, {}))
    while runner.busy:  # noqa: ASYNC110 - a bench polls the counter
        await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - started
    text = stream.getvalue()
    return len(text.splitlines()), text.count("Traceback (most recent call last)"), elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--failures", type=int, default=4000)
    parser.add_argument("--kinds", type=int, default=3, choices=range(1, 6))
    args = parser.parse_args()
    for label, distinct in ((f"{args.kinds} distinct errors", False), ("a message per item", True)):
        lines, traces, elapsed = asyncio.run(run(args.failures, args.kinds, distinct))
        print(
            f"{label:>22}: {args.failures:,} failures -> {lines:,} log lines "
            f"({lines / args.failures:.2f} per failure), {traces:,} tracebacks, {elapsed:.2f} s"
        )


if __name__ == "__main__":
    main()
