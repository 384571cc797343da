"""The null component's `topic` mode: a topic's fan-out with no storage and no logic beyond routing.

Why: `topics_wire.py` reads the publisher's rate on a topic whose bound queues keep some
of its items against an unbound topic's. Behind one Prosody on a 2-core machine, the
copies' stanzas (notifications, retracts, their answers and retract notices) cost
Prosody and the workers CPU whatever the component does. This mode sends exactly those
stanzas, shaped like the real component's, and spends next to nothing of its own, so
the same shapes run against it give the ceiling that the XMPP server and the machine
allow: a share of the unbound rate that no component can beat.

What it keeps, in memory only: each queue's filter (the region it keeps, from the
`pubsub#queue_filter` of its creation form: `attributes.region = "rK"`, a region no item
has, or `attributes:region` for every item), its workers in subscription order with
their window (`pubsub#queue_requests`), batch size (`pubsub#queue_max_batch`) and batch
wait (`pubsub#queue_batch_wait`), the copies waiting and each worker's items in flight.
A publish to the topic (or straight to a queue) is answered at once; each kept copy
waits in its queue until a worker has room, goes out with up to the worker's batch per
notification (a short batch waits up to the batch wait, as the real service holds it),
and a worker's retract is answered and told back to it (XEP-0254 §2.3), freeing its
room. No ledger, no locks that time out, no checks: a floor, not a queue.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

SHIM = b"http://jabber.org/protocol/shim"
EVENT = b"http://jabber.org/protocol/pubsub#event"
PUBSUB = b"http://jabber.org/protocol/pubsub"

_FIELD = re.compile(rb"<field var='([^']*)'[^>]*>\s*<value>([^<]*)</value>")
_NODE = re.compile(rb"<(create|subscribe|publish|retract)\b[^>]*?\bnode='([^']*)'")
_ITEM = re.compile(rb"<item id='([^']*)'>(.*?)(<headers\b.*?</headers>)?</item>", re.S)
_RETRACT_ID = re.compile(rb"<item id='([^']*)'/>")
_REGION = re.compile(rb"<header name='region'>([^<]*)</header>")
_KEEPS = re.compile(rb'attributes\.region = (?:"|&quot;)([^"&]*)(?:"|&quot;)')


@dataclass
class _Copy:
    since: float
    item_id: bytes
    payload: bytes
    headers: bytes  # the <header/> elements: the item's attributes and its attempt


@dataclass
class _Worker:
    jid: bytes
    subid: bytes
    window: int
    batch: int
    wait_s: float
    in_flight: int = 0


@dataclass
class _Queue:
    node: bytes
    keeps: Callable[[bytes], bool]
    topic: bytes
    workers: list[_Worker] = field(default_factory=list)
    waiting: deque[_Copy] = field(default_factory=deque)
    turn: int = 0
    timer_armed: bool = False


def _keeps(form: dict[bytes, bytes]) -> Callable[[bytes], bool]:
    text = form.get(b"pubsub#queue_filter", b"")
    if not text or text == b"attributes:region":
        return lambda region: True
    m = _KEEPS.search(text)
    wanted = m.group(1) if m else b"\x00"
    return lambda region: region == wanted


class NullTopic:
    """The reply logic of `topic` mode; *later* (seconds, callback) arms a timer."""

    def __init__(
        self, domain: bytes, send: Callable[[bytes], None], later: Callable[..., object]
    ) -> None:
        self.domain = domain
        self._send, self._later = send, later
        self.queues: dict[bytes, _Queue] = {}
        self._by_topic: dict[bytes, list[_Queue]] = {}
        self._by_jid: dict[tuple[bytes, bytes], _Worker] = {}
        self._msg = 0

    def answer(self, stanza: bytes, sender: bytes, iq_id: bytes) -> list[bytes]:
        out = [b"<iq type='result' id='%s' from='%s' to='%s'/>" % (iq_id, self.domain, sender)]
        m = _NODE.search(stanza)
        if m is None:
            return out
        verb, node = m.group(1), m.group(2)
        if verb == b"create":
            form = dict(_FIELD.findall(stanza))
            if form.get(b"pubsub#queue") == b"1":
                queue = _Queue(node, _keeps(form), form.get(b"pubsub#queue_topic", b""))
                self.queues[node] = queue
                self._by_topic.setdefault(queue.topic or node, []).append(queue)
        elif verb == b"subscribe":
            self._subscribe(stanza, node, sender)
        elif verb == b"publish":
            out[0] = self._publish(stanza, node, sender, iq_id, out)
        elif verb == b"retract":
            self._retract(stanza, node, sender, out)
        return out

    def _subscribe(self, stanza: bytes, node: bytes, sender: bytes) -> None:
        queue = self.queues.get(node)
        if queue is None:
            return
        form = dict(_FIELD.findall(stanza))
        worker = _Worker(
            jid=sender,  # notices go to the full JID that asked (the light workers do)
            subid=b"s%d" % len(self._by_jid),
            window=int(form.get(b"pubsub#queue_requests", b"1")),
            batch=int(form.get(b"pubsub#queue_max_batch", b"1")),
            wait_s=int(form.get(b"pubsub#queue_batch_wait", b"0")) / 1000,
        )
        queue.workers.append(worker)
        self._by_jid[(node, sender)] = worker

    def _publish(
        self, stanza: bytes, node: bytes, sender: bytes, iq_id: bytes, out: list[bytes]
    ) -> bytes:
        """Queue the kept copies (their notifications go to *out*); returns the answer
        the real service sends: the ids, as XEP-0060 §7.1.2 shows them."""
        found = list(_ITEM.finditer(stanza))
        ids = b"".join(b"<item id='%s'/>" % m.group(1) for m in found)
        answer = (
            b"<iq type='result' id='%s' from='%s' to='%s'><pubsub xmlns='%s'>"
            b"<publish node='%s'>%s</publish></pubsub></iq>"
            % (iq_id, self.domain, sender, PUBSUB, node, ids)
        )
        queues = self._by_topic.get(node)
        if not queues:
            return answer
        now = time.monotonic()
        for m in found:
            item_id, payload, headers = m.group(1), m.group(2), m.group(3) or b""
            regions = _REGION.findall(headers)
            region = regions[0] if regions else b""
            shim = b"".join(b"<header name='region'>%s</header>" % r for r in regions)
            shim += b"<header name='delivery-attempt'>1</header>"
            for queue in queues:
                if queue.keeps(region):
                    queue.waiting.append(_Copy(now, item_id, payload, shim))
        for queue in queues:
            if queue.waiting:
                out.extend(self._dispatch(queue, now))
        return answer

    def _retract(self, stanza: bytes, node: bytes, sender: bytes, out: list[bytes]) -> None:
        queue = self.queues.get(node)
        worker = self._by_jid.get((node, sender))
        if queue is None or worker is None:
            return
        ids = _RETRACT_ID.findall(stanza)
        worker.in_flight -= len(ids)
        retracts = b"".join(b"<retract id='%s'/>" % i for i in ids)
        out.append(self._notice(worker, node, retracts, b""))
        if queue.waiting:
            out.extend(self._dispatch(queue, time.monotonic()))

    def _dispatch(self, queue: _Queue, now: float) -> list[bytes]:
        """Copies to workers with room, round robin, a batch per notification."""
        out: list[bytes] = []
        workers, idle = queue.workers, 0
        while queue.waiting and idle < len(workers):
            worker = workers[queue.turn % len(workers)]
            room = worker.window - worker.in_flight
            if room <= 0:
                queue.turn += 1
                idle += 1
                continue
            want = min(worker.batch, room)
            if len(queue.waiting) < want and worker.wait_s > 0:
                due = queue.waiting[0].since + worker.wait_s
                if due > now:  # hold the short batch, as pubsub#queue_batch_wait does
                    if not queue.timer_armed:
                        queue.timer_armed = True
                        self._later(due - now, self._wake, queue)
                    break
            take = [queue.waiting.popleft() for _ in range(min(want, len(queue.waiting)))]
            worker.in_flight += len(take)
            queue.turn += 1
            idle = 0
            if len(take) == 1:  # one item: its headers go beside the SubID, as ours do
                copy = take[0]
                item = b"<item id='%s'>%s</item>" % (copy.item_id, copy.payload)
                out.append(self._notice(worker, queue.node, item, copy.headers))
                continue
            items = b"".join(
                b"<item id='%s'>%s<headers xmlns='%s'>%s</headers></item>"
                % (c.item_id, c.payload, SHIM, c.headers)
                for c in take
            )
            out.append(self._notice(worker, queue.node, items, b""))
        return out

    def _notice(self, worker: _Worker, node: bytes, body: bytes, headers: bytes) -> bytes:
        """An event message to *worker*: *body* inside ``<items/>``, then the SHIM
        headers (*headers* and the SubID), shaped like the real service's."""
        self._msg += 1
        return (
            b"<message from='%s' to='%s' id='xq-%032x' type='headline'><event xmlns='%s'>"
            b"<items node='%s'>%s</items></event><headers xmlns='%s'>%s"
            b"<header name='SubID'>%s</header></headers></message>"
            % (self.domain, worker.jid, self._msg, EVENT, node, body, SHIM, headers, worker.subid)
        )

    def _wake(self, queue: _Queue) -> None:
        queue.timer_armed = False
        sent = self._dispatch(queue, time.monotonic())
        if sent:
            self._send(b"".join(sent))
