"""The reference point: the same work-queue job on RabbitMQ, driven from Python, on this machine.

Why: issue 3 reads xmpp-queue's figures against RabbitMQ with Python clients (about
1,260 msg/s, measured on an earlier machine of this kind). Measuring it again here,
beside `queue_throughput.py`, keeps the comparison on one machine and one day.

The job mirrors `queue_throughput.py`: one publisher keeping a window of W
unconfirmed publishes (publisher confirms; persistent messages to a durable classic
queue, so each is on disk before it is confirmed, like a publish answered by
xmpp-queue) or publishing at a fixed rate; 4 consumers, each on its own connection
with prefetch 8 (xmpp-queue's `queue_requests` 8), acking each message as it arrives
(or, with `--ack-multiple`, each burst with one `multiple=true` ack: RabbitMQ's best).
Printed: items/s end to end (first measured publish → last ack sent), publish → delivery
and publish → confirm latency p50/p99, and CPU µs per item of the broker (every process
named beam.smp: the machine's RabbitMQ) and of this client process.

Needs the machine's RabbitMQ (amqp://guest:guest@127.0.0.1:5672/) and aio-pika
(`pip install -e '.[bench]'`). Run from the repository root:

    python bench/rabbitmq_reference.py --window 32 --repeat 3
    python bench/rabbitmq_reference.py --window 0 --rate 500 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aio_pika

sys.path.insert(0, str(Path(__file__).resolve().parent))
from processes import cpu_seconds, machine_busy_seconds

_STAMP = struct.Struct("!Id")  # item index, monotonic send time


@dataclass
class Run:
    total: int
    sent: dict[int, float] = field(default_factory=dict)
    confirmed: dict[int, float] = field(default_factory=dict)
    delivered: dict[int, float] = field(default_factory=dict)
    acked: dict[int, float] = field(default_factory=dict)
    duplicates: int = 0
    goal: int = 0
    reached: asyncio.Event = field(default_factory=asyncio.Event)

    async def acked_at_least(self, count: int) -> None:
        self.goal, self.reached = count, asyncio.Event()
        if len(self.acked) < count:
            await self.reached.wait()

    def on_delivery(self, idx: int, now: float) -> None:
        if idx in self.delivered:
            self.duplicates += 1
        self.delivered[idx] = now

    def on_ack(self, idx: int, now: float) -> None:
        self.acked[idx] = now
        if len(self.acked) >= self.goal:
            self.reached.set()


def _pct(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1] * 1000


def _beams_cpu(pids: list[int]) -> dict[int, float]:
    """CPU seconds of each of *pids* still running: a ``rabbitmqctl`` started by
    something else on the machine is a beam.smp of its own, gone seconds later."""
    found = {}
    for pid in pids:
        try:
            found[pid] = cpu_seconds(pid)
        except FileNotFoundError:
            continue
    return found


def _beam_pids() -> list[int]:
    """RabbitMQ's Erlang VMs only: another beam.smp on the machine (an ejabberd of a
    test run) is not the broker, and may come and go during the measurement."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as f:
                    if f.read().strip() != "beam.smp":
                        continue
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if b"rabbit" in f.read():
                        pids.append(int(entry))
            except OSError:
                continue
    return pids


async def _publish(
    channel: aio_pika.abc.AbstractChannel,
    queue: str,
    run: Run,
    span: range,
    args: argparse.Namespace,
) -> None:
    exchange = channel.default_exchange
    loop = asyncio.get_running_loop()

    async def one(idx: int) -> None:
        now = loop.time()
        run.sent[idx] = now
        body = _STAMP.pack(idx, now) + b"<job xmlns='urn:example:bench'>x</job>"
        message = aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
        await exchange.publish(message, routing_key=queue)
        run.confirmed[idx] = loop.time()

    if args.window > 0:
        window = asyncio.Semaphore(args.window)

        async def windowed(idx: int) -> None:
            try:
                await one(idx)
            finally:
                window.release()

        tasks = []
        for idx in span:
            await window.acquire()
            tasks.append(asyncio.ensure_future(windowed(idx)))
        await asyncio.gather(*tasks)
    else:
        began = loop.time()
        tasks = []
        for n, idx in enumerate(span):
            delay = began + n / args.rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(one(idx)))
        await asyncio.gather(*tasks)


def _multiple_acker(
    run: Run, loop: asyncio.AbstractEventLoop, prefetch: int
) -> Callable[[aio_pika.abc.AbstractIncomingMessage], Awaitable[None]]:
    """A consumer that acks with ``multiple=true``: RabbitMQ's best configuration.

    The messages of one read burst share one ack (of the last, multiple=true),
    sent once the burst is handled (the next loop turn) or when half the prefetch
    is waiting, so the broker refills the window without a round trip per message."""
    waiting: list[int] = []
    last: list[aio_pika.abc.AbstractIncomingMessage] = []

    async def flush() -> None:
        if not last:
            return
        message, done = last[-1], list(waiting)
        last.clear()
        waiting.clear()
        await message.ack(multiple=True)
        now = loop.time()
        for idx in done:
            run.on_ack(idx, now)

    async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
        idx, _ = _STAMP.unpack_from(message.body)
        run.on_delivery(idx, loop.time())
        waiting.append(idx)
        last[:] = [message]
        if len(waiting) >= max(1, prefetch // 2):
            await flush()
        else:
            await asyncio.sleep(0)  # the rest of this burst first
            await flush()

    return on_message


async def one_run(args: argparse.Namespace) -> dict[str, float]:
    url = args.url
    queue_name = f"xq-bench-{uuid.uuid4().hex[:8]}"
    total = args.warmup + args.items
    run = Run(total)
    loop = asyncio.get_running_loop()
    publisher = await aio_pika.connect(url)
    consumers = [await aio_pika.connect(url) for _ in range(args.workers)]
    try:
        pub_channel = await publisher.channel(publisher_confirms=True)
        queue = await pub_channel.declare_queue(queue_name, durable=True)
        for conn in consumers:
            channel = await conn.channel()
            await channel.set_qos(prefetch_count=args.prefetch)
            q = await channel.declare_queue(queue_name, durable=True)

            if getattr(args, "ack_multiple", False):
                await q.consume(_multiple_acker(run, loop, args.prefetch))
                continue

            async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
                idx, _ = _STAMP.unpack_from(message.body)
                run.on_delivery(idx, loop.time())
                await message.ack()
                run.on_ack(idx, loop.time())

            await q.consume(on_message)

        await _publish(pub_channel, queue_name, run, range(args.warmup), args)
        await asyncio.wait_for(run.acked_at_least(args.warmup), args.timeout)
        beams = _beams_cpu(_beam_pids())
        own0 = cpu_seconds(os.getpid())
        busy0, _ = machine_busy_seconds()
        started = loop.time()
        await _publish(pub_channel, queue_name, run, range(args.warmup, total), args)
        await asyncio.wait_for(run.acked_at_least(total), args.timeout)
        elapsed = max(run.acked[i] for i in range(args.warmup, total)) - started
        still = _beams_cpu(list(beams))  # a short-lived CLI VM may have left meanwhile
        cpu0 = sum(beams[p] for p in still), own0
        cpu1 = sum(still.values()), cpu_seconds(os.getpid())
        busy1, _ = machine_busy_seconds()
        for conn in consumers:  # first, so the broker need not cancel their consumers
            await conn.close()
        await queue.delete(if_unused=False, if_empty=False)
    finally:
        for conn in (publisher, *consumers):
            if not conn.is_closed:
                await conn.close()
    measured = range(args.warmup, total)
    deliver = [run.delivered[i] - run.sent[i] for i in measured]
    confirm = [run.confirmed[i] - run.sent[i] for i in measured]
    broker = (cpu1[0] - cpu0[0]) / args.items * 1e6
    client = (cpu1[1] - cpu0[1]) / args.items * 1e6
    others = max(0.0, (busy1 - busy0) - (cpu1[0] - cpu0[0]) - (cpu1[1] - cpu0[1])) / elapsed
    return {
        "items_s": args.items / elapsed,
        "deliver_p50": _pct(deliver, 50),
        "deliver_p99": _pct(deliver, 99),
        "confirm_p50": _pct(confirm, 50),
        "confirm_p99": _pct(confirm, 99),
        "broker_us": broker,
        "client_us": client,
        "others": others,
        "duplicates": run.duplicates,
    }


def _row(label: str, r: dict[str, float]) -> str:
    return (
        f"{label:<28} {r['items_s']:>8.0f} {r['deliver_p50']:>7.1f}/{r['deliver_p99']:<7.1f}"
        f" {r['confirm_p50']:>7.1f}/{r['confirm_p99']:<7.1f} {r['broker_us']:>9.0f}"
        f" {r['client_us']:>9.0f} {r['others']:>6.2f} {r['duplicates']:>4.0f}"
    )


async def main(args: argparse.Namespace) -> int:
    name = "rabbitmq-multiple" if args.ack_multiple else "rabbitmq"
    label = f"{name}, window {args.window}" if args.window else f"{name}, rate {args.rate:g}/s"
    header = (
        f"{'scenario':<28} {'items/s':>8} {'deliver p50/p99 ms':>15} {'confirm p50/p99':>15}"
        f" {'broker µs':>9} {'client µs':>9} {'others':>6} {'dup':>4}"
    )
    print(
        f"nproc={os.cpu_count()} items={args.items} warmup={args.warmup} workers={args.workers}"
        f" prefetch={args.prefetch} persistent=yes confirms=yes queue=classic durable"
    )
    print(header)
    results = []
    for _ in range(args.repeat):
        result = await one_run(args)
        results.append(result)
        print(_row(label, result), flush=True)
    if args.repeat > 1:
        median = sorted(results, key=lambda r: r["items_s"])[len(results) // 2]
        print(f"median run of {args.repeat} (by items/s):")
        print(_row(label, median))
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--window", type=int, default=32, help="unconfirmed publishes (0: --rate)")
    parser.add_argument("--rate", type=float, default=500.0, help="items/s when --window 0")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--prefetch", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--ack-multiple", action="store_true", help="consumers ack bursts with multiple=true"
    )
    parser.add_argument("--timeout", type=float, default=300.0)
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
