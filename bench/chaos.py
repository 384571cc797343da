"""The high-availability chaos run, longer: many takeovers under load, on both servers.

The suite's chaos test (tests/integration/test_high_availability.py) kills or pauses
the active process five times while publishers and workers run, then checks that
every confirmed publish was acked, nothing acked came back, no worker was given more
than its window and nothing is in two places. This runs the same test with more
takeovers and prints its counts (takeovers, duplicate deliveries, publishes sent
again):

    python bench/chaos.py                 # 30 takeovers behind Prosody and ejabberd
    python bench/chaos.py --takeovers 100 --servers prosody

With ``--shards`` it runs the chaos test across shards instead
(tests/integration/test_shard_chaos.py: three shards and two standbys, shard
processes killed or paused one shard after the other, ``--takeovers`` of them);
``--seed`` replays a schedule a run printed:

    python bench/chaos.py --shards --takeovers 40
    python bench/chaos.py --shards --seed 518872 --servers ejabberd

It needs what the suite needs: Prosody, ejabberd and PostgreSQL
(XMPP_QUEUE_TEST_PG_URL, default postgresql://postgres@127.0.0.1:5432/test).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--takeovers", type=int, default=30)
    p.add_argument("--servers", default="prosody,ejabberd")
    p.add_argument("--shards", action="store_true", help="the chaos test across shards")
    p.add_argument("--seed", type=int, help="the shard chaos schedule's seed (replay)")
    args = p.parse_args()
    env = dict(os.environ)
    env["XMPP_QUEUE_CHAOS_TAKEOVERS"] = str(args.takeovers)
    env["XMPP_QUEUE_SHARD_CHAOS_EVENTS"] = str(args.takeovers)
    if args.seed is not None:
        env["XMPP_QUEUE_CHAOS_SEED"] = str(args.seed)
    test = "test_shard_chaos.py" if args.shards else "test_high_availability.py"
    env.setdefault("XMPP_QUEUE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
    servers = " or ".join(args.servers.split(","))
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-s",
        "-p",
        "no:cacheprovider",
        str(REPO / "tests/integration" / test),
        "-k",
        f"chaos and ({servers})",
    ]
    return subprocess.run(command, cwd=REPO, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
