"""The benchmark's load: one windowed (or fixed-rate) publisher and acking workers.

Every stanza is a pre-formatted byte string and every incoming stanza is read with `find`
and one regex, so a full cycle (publish, result, notification, retract, result,
notification) costs the generator a few microseconds of CPU per item. Timings are kept in
flat lists indexed by item number (item ids are `i<number>`), not in per-item objects.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import time
from dataclasses import dataclass

from wire import LightClient, attr, start_tag

PUBSUB = "http://jabber.org/protocol/pubsub"
_ITEM_ID = re.compile(rb"<item\b[^>]*?\bid=(?:'i(\d+)'|\"i(\d+)\")")
_PUBLISH = (
    "<iq type='set' to='{to}' id='p%d'><pubsub xmlns='" + PUBSUB + "'><publish node='{node}'>"
    "<item id='i%d'><job xmlns='urn:example:bench'>%.6f</job></item></publish></pubsub></iq>"
)
_RETRACT = (
    "<iq type='set' to='{to}' id='ri%s'><pubsub xmlns='" + PUBSUB + "'><retract node='{node}'>"
    "<item id='i%s'/></retract></pubsub></iq>"
)


def create_queue_node(to: str, node: str) -> str:
    return (
        f"<iq type='set' to='{to}' id='create1'><pubsub xmlns='{PUBSUB}'>"
        f"<create node='{node}'/><configure><x xmlns='jabber:x:data' type='submit'>"
        "<field var='FORM_TYPE' type='hidden'>"
        f"<value>{PUBSUB}#node_config</value></field>"
        "<field var='pubsub#queue'><value>1</value></field></x></configure></pubsub></iq>"
    )


def queue_members(to: str, node: str, jids: list[str]) -> str:
    """XEP-0060 §8.9.2: the owner makes the workers members (new queues are whitelisted)."""
    rows = "".join(f"<affiliation jid='{jid}' affiliation='member'/>" for jid in jids)
    return (
        f"<iq type='set' to='{to}' id='aff1'><pubsub xmlns='{PUBSUB}#owner'>"
        f"<affiliations node='{node}'>{rows}</affiliations></pubsub></iq>"
    )


def subscribe_queue(to: str, node: str, jid: str, queue_requests: int) -> str:
    return (
        f"<iq type='set' to='{to}' id='sub1'><pubsub xmlns='{PUBSUB}'>"
        f"<subscribe node='{node}' jid='{jid}'/><options>"
        "<x xmlns='jabber:x:data' type='submit'><field var='FORM_TYPE' type='hidden'>"
        f"<value>{PUBSUB}#subscribe_options</value></field>"
        f"<field var='pubsub#queue_requests'><value>{queue_requests}</value></field>"
        "</x></options></pubsub></iq>"
    )


def disco_probe(to: str, n: int) -> str:
    return (
        f"<iq type='get' to='{to}' id='probe{n}'>"
        "<query xmlns='http://jabber.org/protocol/disco#info'/></iq>"
    )


def is_result(stanza: bytes) -> bool:
    return attr(start_tag(stanza), b"type") == b"result"


class Tracker:
    """Per-item timestamps of one scenario (warm-up and measured items share the index)."""

    def __init__(self, total: int) -> None:
        self.sent = [0.0] * total
        self.published = [0.0] * total
        self.delivered = [0.0] * total
        self.acked = [0.0] * total
        self.duplicates = 0
        self.errors = 0
        self.error_samples: list[bytes] = []
        self._span = (0, 0)
        self._need = 0
        self._count_publish = False
        self.done = asyncio.Event()

    def expect(self, start: int, end: int, *, publish_results_only: bool) -> None:
        """Wait for items [start, end): acked by a worker, or published (no workers)."""
        self._span = (start, end)
        self._need = end - start
        self._count_publish = publish_results_only
        self.done = asyncio.Event()
        if self._need == 0:
            self.done.set()

    def _complete_one(self, idx: int) -> None:
        if self._span[0] <= idx < self._span[1]:
            self._need -= 1
            if self._need == 0:
                self.done.set()

    def error(self, stanza: bytes) -> None:
        self.errors += 1
        if len(self.error_samples) < 3:
            self.error_samples.append(stanza[:600])

    def on_publish_result(self, idx: int, ok: bool, now: float, stanza: bytes) -> None:
        if not ok:
            self.error(stanza)
            return
        self.published[idx] = now
        if self._count_publish:
            self._complete_one(idx)

    def on_delivery(self, idx: int, now: float) -> None:
        if self.delivered[idx]:
            self.duplicates += 1
        else:
            self.delivered[idx] = now

    def on_ack(self, idx: int, ok: bool, now: float, stanza: bytes) -> None:
        if not ok:
            self.error(stanza)
            return
        if not self.acked[idx]:
            self.acked[idx] = now
            if not self._count_publish:
                self._complete_one(idx)


class Publisher:
    """Keeps `window` publishes outstanding, or sends on a fixed schedule (`rate`)."""

    def __init__(self, client: LightClient, to: str, node: str, tracker: Tracker) -> None:
        self.client, self.tracker = client, tracker
        self._template = _PUBLISH.format(to=to, node=node).encode()
        self.window = 0
        self._next = 0
        self._end = 0
        self._outstanding = 0

    def _make(self, idx: int, now: float) -> bytes:
        self.tracker.sent[idx] = now
        return self._template % (idx, idx, now)

    def start_window(self, start: int, end: int, window: int) -> None:
        self.window, self._next, self._end = window, start, end
        first = self._refill()
        if first:
            self.client.send(first)

    def _refill(self) -> bytes | None:
        out: list[bytes] = []
        now = time.perf_counter()
        while self._outstanding < self.window and self._next < self._end:
            out.append(self._make(self._next, now))
            self._next += 1
            self._outstanding += 1
        return b"".join(out) if out else None

    async def send_at_rate(self, start: int, end: int, rate: float) -> None:
        """Open loop: item k leaves at t0 + k/rate, whatever the answers (late ones in bulk)."""
        self.window = 0
        t0 = time.perf_counter()
        idx = start
        while idx < end:
            now = time.perf_counter()
            due = min(end, start + int((now - t0) * rate) + 1)
            if due > idx:
                self.client.send(b"".join(self._make(i, now) for i in range(idx, due)))
                self._outstanding += due - idx
                idx = due
            await asyncio.sleep(max(0.0, t0 + (idx - start) / rate - time.perf_counter()))

    def handle(self, batch: list[bytes]) -> bytes | None:
        """Publish results in, the next publishes of the window out."""
        tracker = self.tracker
        now = time.perf_counter()
        for stanza in batch:
            if not stanza.startswith(b"<iq"):
                continue
            head = start_tag(stanza)
            iq_id = attr(head, b"id") or b""
            if iq_id.startswith(b"p"):
                self._outstanding -= 1
                ok = attr(head, b"type") == b"result"
                tracker.on_publish_result(int(iq_id[1:]), ok, now, stanza)
        if self.window:
            return self._refill()
        return None


class Worker:
    """Acks (retracts) every delivered item at once; replies of one read go in one write.

    `max_in_flight` is the most items this worker held at once as it saw them (delivered,
    ack not yet answered): it must never exceed its `queue_requests`.
    """

    def __init__(self, client: LightClient, to: str, node: str, tracker: Tracker) -> None:
        self.client, self.tracker = client, tracker
        self._retract = _RETRACT.format(to=to, node=node).encode()
        self.received = 0
        self.in_flight = 0
        self.max_in_flight = 0

    def handle(self, batch: list[bytes]) -> bytes | None:
        tracker = self.tracker
        template = self._retract
        now = time.perf_counter()
        out: list[bytes] = []
        for stanza in batch:
            if stanza.startswith(b"<message"):
                for m in _ITEM_ID.finditer(stanza):
                    num = m.group(1) or m.group(2)
                    tracker.on_delivery(int(num), now)
                    self.received += 1
                    self.in_flight += 1
                    out.append(template % (num, num))
            elif stanza.startswith(b"<iq"):
                head = start_tag(stanza)
                iq_id = attr(head, b"id") or b""
                if iq_id.startswith(b"ri"):
                    ok = attr(head, b"type") == b"result"
                    tracker.on_ack(int(iq_id[2:]), ok, now, stanza)
                    self.in_flight -= 1
        if self.in_flight > self.max_in_flight:
            self.max_in_flight = self.in_flight
        return b"".join(out) if out else None


@dataclass(frozen=True)
class Latency:
    p50_ms: float
    p99_ms: float
    max_ms: float

    @staticmethod
    def of(samples: list[float]) -> Latency | None:
        if len(samples) < 2:
            return None
        cuts = statistics.quantiles(samples, n=100, method="inclusive")
        return Latency(cuts[49] * 1e3, cuts[98] * 1e3, max(samples) * 1e3)

    def __str__(self) -> str:
        return f"{self.p50_ms:.1f}/{self.p99_ms:.1f}/{self.max_ms:.0f}"
