"""BatchingOps: a worker's acks and nacks, several per request when it opted in.

RabbitMQ has ``basic.ack multiple``, SQS ``DeleteMessageBatch``; here an ack is a
XEP-0060 retract, and §13.11 lets one retract name several items (all or none).
This wraps a worker's :class:`~xmpp_queue.client.jobs.QueueOps` and coalesces the
way group commit does: the first ack of a node goes out at once (on the next
turn of the event loop, so acks finished in the same turn share it); acks that
finish while it is in flight wait for its answer and then leave together, up to
*limit* per request. Nothing waits for a timer, so a lone ack costs no latency.

A worker whose items arrive one at a time (a trickle: every ack goes out alone)
may opt in to *linger*, Pulsar's acknowledgment group time: a node's first ack
then waits up to that many seconds, or until *flush_at* acks wait, and they leave
together. Each request saved is three stanzas through the XMPP server (the
retract, its answer, the retract notice). The price: the items stay locked, and
count against the worker's window, that much longer, and a worker killed in
that time has them handed out again. :meth:`Coalescer.flush` sends at once (a
worker that is stopping).

All or none means a refused batch changed nothing, and its error names only the
first item that failed. The others may be fine, so each item of a refused batch
is then sent on its own and every caller gets its own answer: a lost lock never
costs the acks of its neighbours.

Nacks (unlock) are coalesced the same way into this project's ``<unlock/>``,
each item with its own reason (why its handler failed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from xmpp_queue.client.errors import StanzaError
from xmpp_queue.client.jobs import QueueOps

log = logging.getLogger("xmpp_queue.client")

Entry = tuple[str, str]  # (item id, reason: empty for acks and plain nacks)
SendMany = Callable[[str, Sequence[Entry]], Awaitable[None]]
SendOne = Callable[[str, Entry], Awaitable[None]]


class BatchQueueOps(QueueOps, Protocol):
    """QueueOps plus the several-item requests (``SessionOps``, ``PubSubLink``)."""

    async def retract_items(self, node: str, item_ids: Sequence[str]) -> None: ...

    async def unlock_items(
        self, node: str, item_ids: Sequence[str], reasons: Mapping[str, str] | None = None
    ) -> None: ...


@dataclass(slots=True)
class _Lane:
    """The waiting requests of one kind (ack or nack) for one node."""

    waiting: list[tuple[Entry, asyncio.Future[None]]] = field(default_factory=list)
    sender: asyncio.Task[None] | None = None
    full: asyncio.Event = field(default_factory=asyncio.Event)  # ends a linger early


class Coalescer:
    """One request in flight per node; what arrives meanwhile goes in the next one."""

    def __init__(
        self,
        send_many: SendMany,
        send_one: SendOne,
        limit: int,
        linger: float = 0.0,
        flush_at: int | None = None,
    ) -> None:
        self._send_many = send_many
        self._send_one = send_one
        self.limit = max(1, limit)
        self.flush_at = max(1, flush_at or self.limit)  # this many waiting end a linger
        self.linger = max(0.0, linger)
        self._lanes: dict[str, _Lane] = {}
        self._flushing = False
        self.requests = 0  # requests sent (for stats and tests)

    def flush(self) -> None:
        """Send what lingers now, and from now on linger no more (a stopping worker)."""
        self._flushing = True
        for lane in self._lanes.values():
            lane.full.set()

    async def submit(self, node: str, item_id: str, reason: str = "") -> None:
        """Returns once *item_id*'s request was answered; raises its own error."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        lane = self._lanes.setdefault(node, _Lane())
        lane.waiting.append(((item_id, reason), future))
        if len(lane.waiting) >= self.flush_at:
            lane.full.set()
        if lane.sender is None:
            lane.sender = asyncio.ensure_future(self._drain(node, lane))
        await future

    async def _drain(self, node: str, lane: _Lane) -> None:
        try:
            while lane.waiting:
                if self.linger and not self._flushing and len(lane.waiting) < self.flush_at:
                    lane.full.clear()
                    try:
                        await asyncio.wait_for(lane.full.wait(), self.linger)
                    except TimeoutError:
                        pass
                batch, lane.waiting = lane.waiting[: self.limit], lane.waiting[self.limit :]
                await self._send(node, batch)
        finally:
            lane.sender = None
            if lane.waiting:  # cancelled with work left: hand it to a new sender
                lane.sender = asyncio.ensure_future(self._drain(node, lane))

    async def _send(self, node: str, batch: list[tuple[Entry, asyncio.Future[None]]]) -> None:
        ids = [entry for entry, _ in batch]
        self.requests += 1
        try:
            if len(ids) == 1:
                await self._send_one(node, ids[0])
            else:
                await self._send_many(node, ids)
        except StanzaError as exc:
            if len(ids) == 1:
                _settle(batch[0][1], exc)
                return
            log.info("event=batch_refused node=%s items=%d error=%s", node, len(ids), exc)
            await asyncio.gather(*(self._send_alone(node, i, f) for i, f in batch))
            return
        except BaseException as exc:  # the stream, a timeout, cancellation: all share it
            for _, future in batch:
                _settle(future, exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        for _, future in batch:
            _settle(future, None)

    async def _send_alone(self, node: str, entry: Entry, future: asyncio.Future[None]) -> None:
        self.requests += 1
        try:
            await self._send_one(node, entry)
        except BaseException as exc:
            _settle(future, exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        _settle(future, None)


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():
        return
    if isinstance(error, asyncio.CancelledError):
        future.cancel()
    elif error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


class BatchingOps:
    """:class:`QueueOps` whose acks and nacks share requests (see the module doc);
    extend, delayed unlock and dead-letter pass straight through."""

    def __init__(
        self,
        ops: BatchQueueOps,
        limit: int,
        ack_linger: float = 0.0,
        ack_flush_at: int | None = None,
    ) -> None:
        self.ops = ops
        # Only acks linger: a nack hands its item to another worker, the sooner the
        # better. *ack_flush_at* waiting acks end a linger (batching_for).
        self.acks = Coalescer(
            self._retract_many, self._retract_one, limit, ack_linger, ack_flush_at
        )
        self.nacks = Coalescer(self._unlock_many, self._unlock_one, limit)

    def flush(self) -> None:
        """Acks that linger leave now (the worker is stopping)."""
        self.acks.flush()

    async def _retract_many(self, node: str, entries: Sequence[Entry]) -> None:
        await self.ops.retract_items(node, [item_id for item_id, _ in entries])

    async def _retract_one(self, node: str, entry: Entry) -> None:
        await self.ops.retract(node, entry[0])

    async def _unlock_many(self, node: str, entries: Sequence[Entry]) -> None:
        reasons = {item_id: reason for item_id, reason in entries if reason}
        await self.ops.unlock_items(node, [item_id for item_id, _ in entries], reasons)

    async def _unlock_one(self, node: str, entry: Entry) -> None:
        await self.ops.unlock(node, entry[0], entry[1])

    async def retract(self, node: str, item_id: str) -> None:
        await self.acks.submit(node, item_id)

    async def unlock(self, node: str, item_id: str, reason: str = "") -> None:
        await self.nacks.submit(node, item_id, reason)

    async def extend(self, node: str, item_id: str, seconds: int) -> None:
        await self.ops.extend(node, item_id, seconds)

    async def unlock_later(self, node: str, item_id: str, delay: int) -> None:
        await self.ops.unlock_later(node, item_id, delay)

    async def dead_letter(self, node: str, item_id: str, reason: str) -> None:
        await self.ops.dead_letter(node, item_id, reason)


def batching_for(
    ops: BatchQueueOps, max_batch: int, queue_requests: int, ack_linger: float
) -> BatchingOps | None:
    """A worker's coalescing ops, or None for plain one-request-per-ack XEP-0254.

    Lingering acks leave early once half the window waits: the service sends a
    worker nothing new while its window is full of items whose acks linger."""
    if max_batch <= 1 and ack_linger <= 0:
        return None
    if ack_linger <= 0:
        return BatchingOps(ops, max_batch)
    flush_at = max(1, queue_requests // 2)
    # A request may still carry up to max_batch acks (those of one notification).
    return BatchingOps(ops, max(max_batch, flush_at), ack_linger, flush_at)
