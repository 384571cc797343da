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
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from wire import LightClient, attr, start_tag

PUBSUB = "http://jabber.org/protocol/pubsub"
_ITEM_ID = re.compile(rb"<item\b[^>]*?\bid=(?:'i(\d+)'|\"i(\d+)\")")
_PUBLISH = (
    "<iq type='set' to='{to}' id='p%d'><pubsub xmlns='" + PUBSUB + "'><publish node='{node}'>"
    "<item id='i%d'><job xmlns='urn:example:bench'>%.6f</job>%s</item></publish></pubsub></iq>"
)

SHIM = "http://jabber.org/protocol/shim"


def item_headers(model: str) -> Callable[[float, int], bytes]:
    """The SHIM headers each published item carries, by message model:
    ``plain`` none, ``attrs3`` three attributes, ``delayN`` a ``Start`` N ms after
    the item is sent (so every item waits that long in the queue), ``keysN`` an
    ``ordering-key`` out of N (item k gets key k mod N; ``keys1``: one key), for a
    queue created ordered (:func:`ordered_model`). Called with (send time, item index)."""
    if model == "plain":
        return lambda now, idx: b""
    if model.startswith("attrs"):
        count = int(model.removeprefix("attrs") or "3")
        inner = "".join(f"<header name='a{k}'>value-{k}</header>" for k in range(count))
        fixed = f"<headers xmlns='{SHIM}'>{inner}</headers>".encode()
        return lambda now, idx: fixed
    if model.startswith("delay"):
        delay = float(model.removeprefix("delay")) / 1000
        head = f"<headers xmlns='{SHIM}'><header name='Start'>".encode()

        def start(now: float, idx: int) -> bytes:
            # *now* is the tracker's perf_counter; a Start is wall-clock time.
            at = datetime.fromtimestamp(time.time() + delay, UTC).isoformat()
            at = at.replace("+00:00", "Z")
            return head + at.encode() + b"</header></headers>"

        return start
    if ordered_model(model):
        keys = int(model.removeprefix("keys"))
        keyed = f"<headers xmlns='{SHIM}'><header name='ordering-key'>k%d</header></headers>"
        template = keyed.encode()
        return lambda now, idx: template % (idx % keys)
    raise ValueError(f"unknown message model {model!r} (plain, attrs3, delay100, keys10000)")


def ordered_model(model: str) -> bool:
    """Whether *model* publishes ordering keys (its queue is created ordered)."""
    return model.startswith("keys") and model.removeprefix("keys").isdigit()


_RETRACT = (
    "<iq type='set' to='{to}' id='ri%s'><pubsub xmlns='" + PUBSUB + "'><retract node='{node}'>"
    "<item id='i%s'/></retract></pubsub></iq>"
)


def create_queue_node(to: str, node: str, ordered: bool = False) -> str:
    """A queue node; *ordered*: ``pubsub#queue_ordered`` (one item per ordering key in flight)."""
    extra = "<field var='pubsub#queue_ordered'><value>1</value></field>" if ordered else ""
    return (
        f"<iq type='set' to='{to}' id='create1'><pubsub xmlns='{PUBSUB}'>"
        f"<create node='{node}'/><configure><x xmlns='jabber:x:data' type='submit'>"
        "<field var='FORM_TYPE' type='hidden'>"
        f"<value>{PUBSUB}#node_config</value></field>"
        f"<field var='pubsub#queue'><value>1</value></field>{extra}</x></configure></pubsub></iq>"
    )


def queue_members(to: str, node: str, jids: list[str]) -> str:
    """XEP-0060 §8.9.2: the owner makes the workers members (new queues are whitelisted)."""
    rows = "".join(f"<affiliation jid='{jid}' affiliation='member'/>" for jid in jids)
    return (
        f"<iq type='set' to='{to}' id='aff1'><pubsub xmlns='{PUBSUB}#owner'>"
        f"<affiliations node='{node}'>{rows}</affiliations></pubsub></iq>"
    )


def subscribe_queue(
    to: str, node: str, jid: str, queue_requests: int, batch: int = 1, wait_ms: int = 0
) -> str:
    """XEP-0254 §2.1 subscribe-and-configure; *batch* above 1 also asks for up to that
    many items per notification (``pubsub#queue_max_batch``), *wait_ms* lets the service
    hold a short batch that long to fill it (``pubsub#queue_batch_wait``)."""
    extra = (
        f"<field var='pubsub#queue_max_batch'><value>{batch}</value></field>" if batch > 1 else ""
    )
    if wait_ms > 0:
        extra += f"<field var='pubsub#queue_batch_wait'><value>{wait_ms}</value></field>"
    return (
        f"<iq type='set' to='{to}' id='sub1'><pubsub xmlns='{PUBSUB}'>"
        f"<subscribe node='{node}' jid='{jid}'/><options>"
        "<x xmlns='jabber:x:data' type='submit'><field var='FORM_TYPE' type='hidden'>"
        f"<value>{PUBSUB}#subscribe_options</value></field>"
        f"<field var='pubsub#queue_requests'><value>{queue_requests}</value></field>"
        f"{extra}</x></options></pubsub></iq>"
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
    """Keeps `window` items outstanding, or sends on a fixed schedule (`rate`).

    With *batch* above 1, items that leave together go in one publish of up to
    *batch* items (XEP-0060 §13.11; id ``p<first>-<count>``), answered after the
    one commit that holds them all. Nothing waits to fill a batch."""

    def __init__(
        self,
        client: LightClient,
        to: str,
        node: str,
        tracker: Tracker,
        batch: int = 1,
        model: str = "plain",
    ) -> None:
        self.client, self.tracker = client, tracker
        self._headers = item_headers(model)
        self._template = _PUBLISH.format(to=to, node=node).encode()
        self._head = (
            f"<iq type='set' to='{to}' id='p%d-%d'><pubsub xmlns='{PUBSUB}'><publish node='{node}'>"
        ).encode()
        self._item = b"<item id='i%d'><job xmlns='urn:example:bench'>%.6f</job>%s</item>"
        self._tail = b"</publish></pubsub></iq>"
        self.batch = batch
        self.window = 0
        self._next = 0
        self._end = 0
        self._outstanding = 0

    def _make(self, idx: int, now: float) -> bytes:
        self.tracker.sent[idx] = now
        return self._template % (idx, idx, now, self._headers(now, idx))

    def _stanzas(self, start: int, end: int, now: float) -> bytes:
        """Items [start, end) as publishes: one each, or batches of `batch`."""
        if self.batch <= 1:
            return b"".join(self._make(i, now) for i in range(start, end))
        out = []
        for first in range(start, end, self.batch):
            last = min(end, first + self.batch)
            items = []
            for i in range(first, last):
                self.tracker.sent[i] = now
                items.append(self._item % (i, now, self._headers(now, i)))
            out.append(self._head % (first, last - first) + b"".join(items) + self._tail)
        return b"".join(out)

    def start_window(self, start: int, end: int, window: int) -> None:
        self.window, self._next, self._end = window, start, end
        first = self._refill()
        if first:
            self.client.send(first)

    def _refill(self) -> bytes | None:
        count = min(self.window - self._outstanding, self._end - self._next)
        if count <= 0:
            return None
        start = self._next
        self._next += count
        self._outstanding += count
        return self._stanzas(start, start + count, time.perf_counter())

    async def send_at_rate(self, start: int, end: int, rate: float) -> None:
        """Open loop: item k leaves at t0 + k/rate, whatever the answers (late ones in bulk)."""
        self.window = 0
        t0 = time.perf_counter()
        idx = start
        while idx < end:
            now = time.perf_counter()
            due = min(end, start + int((now - t0) * rate) + 1)
            if due > idx:
                self.client.send(self._stanzas(idx, due, now))
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
                first, _, count = iq_id[1:].partition(b"-")
                ok = attr(head, b"type") == b"result"
                n = int(count) if count else 1
                self._outstanding -= n
                for idx in range(int(first), int(first) + n):
                    tracker.on_publish_result(idx, ok, now, stanza)
        if self.window:
            return self._refill()
        return None


class Worker:
    """Acks (retracts) every delivered item at once; replies of one read go in one write.

    With *batch* above 1 (the worker subscribed with ``pubsub#queue_max_batch``), the
    items of one read are acked in ONE retract naming them all (XEP-0060 §13.11), as
    the client library's coalescing does; otherwise one retract per item.

    `max_in_flight` is the most items this worker held at once as it saw them (delivered,
    ack not yet answered): it must never exceed its `queue_requests`.
    """

    def __init__(
        self,
        client: LightClient,
        to: str,
        node: str,
        tracker: Tracker,
        batch: int = 1,
        model: str = "plain",
        linger: float = 0.0,
        flush_at: int = 4,
    ) -> None:
        self.client, self.tracker = client, tracker
        # With *linger* (seconds), delivered items wait up to that long, or until
        # *flush_at* of them wait, and are then acked in one retract: the client
        # library's ``ack_linger`` (Pulsar's acknowledgment group time).
        self.linger, self.flush_at = linger, flush_at
        self._lingering: list[bytes] = []
        self._timer: asyncio.TimerHandle | None = None
        self._headers = item_headers(model)
        self._retract = _RETRACT.format(to=to, node=node).encode()
        self._head = (
            f"<iq type='set' to='{to}' id='rb%d'><pubsub xmlns='{PUBSUB}'><retract node='{node}'>"
        ).encode()
        self._tail = b"</retract></pubsub></iq>"
        self.batch = batch
        self._acks: dict[int, list[bytes]] = {}
        self._next_ack = 0
        self.received = 0
        self.notifications = 0  # item notifications (received / this: items per one)
        self.in_flight = 0
        self.max_in_flight = 0

    def handle(self, batch: list[bytes]) -> bytes | None:
        tracker = self.tracker
        template = self._retract
        now = time.perf_counter()
        out: list[bytes] = []
        delivered: list[bytes] = []
        for stanza in batch:
            if stanza.startswith(b"<message"):
                before = self.received
                for m in _ITEM_ID.finditer(stanza):
                    num = m.group(1) or m.group(2)
                    tracker.on_delivery(int(num), now)
                    self.received += 1
                    self.in_flight += 1
                    if self.linger > 0:
                        self._lingering.append(num)
                    elif self.batch > 1:
                        delivered.append(num)
                    else:
                        out.append(template % (num, num))
                self.notifications += self.received > before  # not a retract notice
            elif stanza.startswith(b"<iq"):
                head = start_tag(stanza)
                iq_id = attr(head, b"id") or b""
                if iq_id.startswith(b"ri"):
                    ok = attr(head, b"type") == b"result"
                    tracker.on_ack(int(iq_id[2:]), ok, now, stanza)
                    self.in_flight -= 1
                elif iq_id.startswith(b"rb"):
                    ok = attr(head, b"type") == b"result"
                    for num in self._acks.pop(int(iq_id[2:]), []):
                        tracker.on_ack(int(num), ok, now, stanza)
                        self.in_flight -= 1
        for start in range(0, len(delivered), 1000):  # the service's bound per request
            out.append(self._retract_many(delivered[start : start + 1000]))
        if self._lingering:
            if len(self._lingering) >= self.flush_at:
                out.append(self._take_lingering())
            elif self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(self.linger, self._flush)
        if self.in_flight > self.max_in_flight:
            self.max_in_flight = self.in_flight
        return b"".join(out) if out else None

    def _retract_many(self, nums: list[bytes]) -> bytes:
        self._next_ack += 1
        self._acks[self._next_ack] = nums
        items = b"".join(b"<item id='i%s'/>" % n for n in nums)
        return self._head % self._next_ack + items + self._tail

    def _take_lingering(self) -> bytes:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        nums, self._lingering = self._lingering, []
        return self._retract_many(nums)

    def _flush(self) -> None:
        self._timer = None
        if self._lingering:
            self.client.send(self._take_lingering())


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
