"""Worker: take items from a XEP-0254 queue node and run a handler on each.

Usage::

    async def handle(job: Job) -> None:
        print(job.item_id, job.json())      # raise to give the item back

    account = Account(jid="bee@localhost", password="secret",
                      service="queue.localhost", allow_plain=True)
    worker = Worker(account, "jobs", handle, queue_requests=4)
    asyncio.run(worker.run())               # Ctrl-C drains and returns

The life of a worker, in protocol terms:

1. log in, send directed presence to the service (XEP-0254 §4: when this
   connection goes away, the XMPP server tells the service, which unlocks our
   items and unsubscribes us);
2. subscribe with ``pubsub#queue_requests`` in the same request (§2.1): the
   service then hands over up to that many items at a time;
3. per item: the handler runs, its lock extended for as long as it runs;
   success → retract (ack), exception → unlock saying why (the nack reason);
4. on SIGINT/SIGTERM or :meth:`stop`: unsubscribe first (no new items), let
   running handlers finish for ``drain_grace`` seconds, cancel the rest and
   unlock their items once ended (a handler in a thread cannot be stopped: the
   drain waits for it; a second signal abandons it), send unavailable presence,
   close the stream (§4's order for a subscriber that stops).

When the stream is lost (server restart, network, stream error) the worker logs
in again with backoff (:class:`ReconnectPolicy`) under the same full JID: its
name is the XMPP resource, so the locks it held are still its own (the service
ties a lock to the holder's JID). Running handlers go on; their acks wait for
the new stream. Then it drops its old subscription, lets the jobs it still
holds finish (so it never holds more than ``queue_requests``), and subscribes
again (at-least-once: an item whose ack was lost comes back when its lock ends).

If the service goes away with the stream up (a restart, an HA take-over), lock
requests are sent again once it answers (:mod:`.resend`). On a sharded service the
node's shard is asked once (:mod:`.placement`); a moved node is followed
(:mod:`.worker_moves`), a partitioned queue is worked per partition
(:mod:`.worker_partitions`).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from xmpp_queue.client.account import Account, login_and_rest
from xmpp_queue.client.acks import BatchingOps, batching_for
from xmpp_queue.client.errors import ClientError, StanzaError
from xmpp_queue.client.handlers import InThread, bind_handler
from xmpp_queue.client.jobs import JobRunner, QueueOps, WorkerStats, check_handler
from xmpp_queue.client.link import PubSubLink
from xmpp_queue.client.placement import Placements, point_and_follow
from xmpp_queue.client.resend import SessionOps
from xmpp_queue.client.session import ReconnectPolicy, Session
from xmpp_queue.client.wire import Event, ItemEvent, SubscriptionResult, UnlockEvent
from xmpp_queue.client.worker_moves import NodeMoves
from xmpp_queue.client.worker_partitions import PartitionWorkers, spread_over_partitions
from xmpp_queue.client.worker_process import (
    check_options,
    default_resource,
    read_lock_timeout,
    stop_signals,
)

log = logging.getLogger("xmpp_queue.client")


class Worker:
    """A queue subscriber that runs ``await handler(job)`` for each item it gets.

    ``Worker(account, node, handler, ...)`` with an :class:`Account`; the older
    ``Worker(jid, password, service, node, handler, host=, port=, allow_plain=)``
    builds the Account from those.

    A job's lock is kept alive while its handler runs: a lock a third gone is
    extended (the client's extend request) to now + *lock_extend* seconds, or
    + the node's lock timeout (read from its meta-data after subscribing) when
    *lock_extend* is None. ``lock_extend=0`` turns that off (the lock timeout
    then ends a hung handler's lock, and another worker may run its item while
    it hangs).

    *name* is the worker's XMPP resource (``jid/name``): it shows in the
    service's ledger and the pipeline's report, and keeps the locks the
    worker's own across a reconnect. It must be unique per account (a second
    login with the same name ends the first, which then stops with a clear
    error). Without a name one is made from the host name and process id.

    *max_batch* above 1 opts in to batches: the service may send up to that many
    items in one notification (``pubsub#queue_max_batch``), and acks and nacks
    that finish together go out in one request each (:mod:`.acks`). Each item is
    still its own job with its own lock; 1 (the default) is plain XEP-0254.

    For a trickle: *ack_linger* (seconds, default 0: off) lets an ack wait that long,
    or until half the window waits, to share its retract (:mod:`.acks`); *batch_wait*
    (seconds, default 0, with *max_batch*) lets the service hold a short batch that long.

    *reconnect* (a :class:`ReconnectPolicy`, the default: forever, the first retry at once,
    then jittered backoff up to 1 s) or None (a lost stream ends :meth:`run`: ConnectionLost).

    *handler* must be ``async def`` (see :func:`~xmpp_queue.client.in_thread`
    for blocking code); anything else is refused here with a ``TypeError``. An
    ``in_thread`` handler runs in a thread pool of ``queue_requests`` threads
    that the worker owns and shuts down when it stops.

    *link_factory* replaces the login (tests pass a fake link; anything with
    :class:`PubSubLink`'s methods will do).
    """

    def __init__(
        self,
        account: Account | str,
        *node_and_handler: Any,
        queue_requests: int = 1,
        max_batch: int = 1,
        ack_linger: float = 0.0,
        batch_wait: float = 0.0,
        host: str | None = None,
        port: int | None = None,
        lock_extend: int | None = None,
        allow_plain: bool | None = None,
        drain_grace: float = 30.0,
        name: str | None = None,
        reconnect: ReconnectPolicy | None = ReconnectPolicy(),  # noqa: B008 - frozen
        link_factory: Callable[[], Awaitable[PubSubLink]] | None = None,
    ) -> None:
        account, (node, handler) = login_and_rest(
            account, node_and_handler, 2, host=host, port=port, allow_plain=allow_plain
        )
        check_options(queue_requests, max_batch, ack_linger, lock_extend, batch_wait)
        check_handler(handler)
        bare_jid, _, resource = account.jid.partition("/")
        if not resource:
            resource = name or default_resource()
        name = name or resource
        self.account = account.replace(jid=f"{bare_jid}/{resource}")
        self.jid = self.account.jid
        self.service_jid = account.service
        self.node = node
        self.placements = Placements(account.service, self.account.reply_timeout)
        self._moves = NodeMoves(self)  # the node moved to another shard (worker_moves.py)
        self._parts: PartitionWorkers | None = None  # a partitioned queue's workers
        self._executor: ThreadPoolExecutor | None = None
        if isinstance(handler, InThread):  # one thread per held item, none shared
            self._executor = ThreadPoolExecutor(
                max_workers=queue_requests, thread_name_prefix=f"xmpp-queue-{name}"
            )
            handler = bind_handler(handler, self._executor)
        self.handler = handler
        self.queue_requests, self.max_batch = queue_requests, max_batch
        self.ack_linger, self.batch_wait = ack_linger, batch_wait
        self.host, self.port = self.account.address
        self.lock_extend, self.drain_grace = lock_extend, drain_grace
        self.allow_plain = self.account.allow_plain
        self.name, self.reconnect = name, reconnect
        self._link_factory = link_factory or self._open_link
        self.stats = WorkerStats()
        self.subid: str | None = None
        self._session: Session | None = None
        self._runner: JobRunner | None = None
        self._batching: BatchingOps | None = None
        self._extender: asyncio.Task[None] | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._finished = asyncio.Event()
        self._failure: BaseException | None = None

    # --- state ---------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Items this worker holds a lock on right now (partitioned: over its partitions)."""
        held = 0 if self._runner is None else self._runner.held
        return held if self._parts is None else self._parts.in_flight

    @property
    def link(self) -> PubSubLink | None:
        """The current stream's link (None while reconnecting)."""
        return None if self._session is None else self._session.link

    @property
    def reconnects(self) -> int:
        """How often the stream was lost and logged in again (partitioned: summed)."""
        own = 0 if self._session is None else self._session.reconnects
        return own if self._parts is None else self._parts.reconnects

    @property
    def stopping(self) -> bool:
        return self._stopping is not None or self._finished.is_set()

    # --- starting ------------------------------------------------------------------

    async def _open_link(self) -> PubSubLink:
        return await PubSubLink.connect(self.account)

    async def start(self) -> None:
        """Log in, send presence, subscribe; items may arrive as soon as this returns.

        A failure here (wrong password, no server, no such node) raises at once:
        only a stream lost *after* a good start is reconnected."""
        session = Session(
            self._link_factory,
            self.reconnect,
            name=self.name,
            on_reconnected=self._resume,
            on_link=self._attach,
            on_failed=self._on_session_failed,
        )
        self._session = session
        # The component may have restarted: tell it again that we are here (presence
        # ties our locks to this stream, and a new process has not heard it).
        session.watch.on_back = lambda link: link.send_presence()
        session.watch.on_moved = self._moves.on_redirect
        self._batching = batching_for(
            SessionOps(session), self.max_batch, self.queue_requests, self.ack_linger
        )
        ops: QueueOps = self._batching or SessionOps(session)
        self._runner = JobRunner(
            ops,
            self.handler,
            self.queue_requests,
            stats=self.stats,
            lock_extend=self.lock_extend,
            name=self.name,
        )
        link = await session.open()
        try:
            if await spread_over_partitions(self, link):
                return  # a partitioned queue: one worker per partition works for us
            await self._subscribe(link)
        except BaseException:
            session.abort()  # not a disconnection to report: start() raises
            raise
        if self.lock_extend != 0:
            self._extender = asyncio.ensure_future(self._runner.extend_forever())

    def _attach(self, link: PubSubLink) -> None:
        link.on_events, link.on_stranger = self._on_events, self._moves.on_stranger
        link.service = self.service_jid = self.placements.service_for(self.node)

    async def _subscribe(self, link: PubSubLink) -> None:
        async def subscribe() -> SubscriptionResult:
            link.send_presence()  # to the node's service: our locks are tied to it
            return await link.subscribe_queue(
                self.node, self.queue_requests, self.max_batch, self.batch_wait
            )

        sub = await point_and_follow(self.placements, self.node, link, subscribe)
        self.subid, self.service_jid = sub.subid, link.service
        timeout = await read_lock_timeout(link, self.node, self.name)
        if self._runner is not None and timeout is not None:
            self._runner.lock_timeout = timeout
        log.info(
            "event=worker_subscribed worker=%s node=%s queue_requests=%d subid=%s lock_timeout=%s",
            *(self.name, self.node, self.queue_requests, sub.subid, timeout),
        )

    async def _resume(self, link: PubSubLink) -> None:
        """After a reconnect: drop the old subscription (the service may still count
        it, if it never heard we left), finish the jobs still held, subscribe again."""
        runner = self._runner
        if self.stopping or runner is None:
            return
        if self.subid is not None:
            try:
                await link.unsubscribe(self.node, self.subid)
            except StanzaError as exc:  # already gone: the service saw us leave
                log.info("event=old_subscription_gone worker=%s condition=%s", self.name, exc)
            self.subid = None
        if runner.held:
            log.info("event=resume_waits worker=%s held=%d", self.name, runner.held)
            await runner.idle()
            await asyncio.sleep(0)  # the acks just released write themselves first
        if self.stopping or not link.connected:
            return
        await self._subscribe(link)

    async def run(self, *, handle_signals: bool = True) -> WorkerStats:
        """Start, process until stopped (signal, :meth:`stop`, :meth:`abort`), return stats.

        With *handle_signals*, SIGINT and SIGTERM start a graceful stop and a
        second signal aborts. Raises :class:`ConnectionLost` if the server closes
        the stream while the worker was not stopping. Cancelling ``run`` aborts
        the worker (see :meth:`abort`); call :meth:`stop` first for a drain.
        """
        await self.start()
        with stop_signals(self._on_signal, handle_signals):
            try:
                await self._finished.wait()
            except asyncio.CancelledError:
                self.abort()
                raise
        if self._failure is not None:
            raise self._failure
        return self.stats

    async def wait(self) -> None:
        """Until the worker has stopped, for whatever reason."""
        await self._finished.wait()

    def _on_signal(self, signum: signal.Signals) -> None:
        if self._stopping is None:
            log.info("event=worker_draining worker=%s signal=%s", self.name, signum.name)
            self._stopping = asyncio.ensure_future(self._stop(self.drain_grace))
        else:
            log.warning("event=worker_abort worker=%s signal=%s", self.name, signum.name)
            self.abort()

    # --- events --------------------------------------------------------------------

    def _on_events(self, events: list[Event]) -> None:
        runner = self._runner
        if runner is None:
            return
        if any(isinstance(e, ItemEvent) for e in events):
            self.stats.notifications += 1
        for event in events:
            if event.node != self.node:
                continue
            if isinstance(event, ItemEvent):
                runner.offer(event)
            elif isinstance(event, UnlockEvent):
                runner.on_unlocked(event.item_id)
            # RetractEvent: the service confirms an ack; nothing left to do.

    def _on_session_failed(self, exc: ClientError) -> None:
        """The session gave up (or reconnecting is off): run() raises *exc*."""
        if self._finished.is_set() or self._stopping is not None:
            return
        log.error("event=worker_disconnected worker=%s error=%s", self.name, exc)
        self._failure = exc
        self._halt()

    def _halt(self) -> None:
        if self._extender is not None:
            self._extender.cancel()
        if self._runner is not None:
            self._runner.abandon()
        if self._executor is not None:  # threads still running end on their own
            self._executor.shutdown(wait=False, cancel_futures=True)
        self._finished.set()

    # --- stopping ------------------------------------------------------------------

    async def stop(self, grace: float | None = None) -> None:
        """Drain gracefully (see the module docstring); safe to call more than once."""
        if self._parts is not None:
            return await self._parts.stop(grace)
        if self._finished.is_set() and self._stopping is None:
            return
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(
                self._stop(self.drain_grace if grace is None else grace)
            )
        await asyncio.shield(self._stopping)

    async def _stop(self, grace: float) -> None:
        session, runner = self._session, self._runner
        link = None if session is None else session.link
        try:
            if runner is not None:
                runner.accepting = False
            if self._batching is not None:
                self._batching.flush()  # a stopping worker's acks linger no more
            if session is not None and (link is None or not link.connected):
                session.abort()  # no stream now: what we hold comes back by lock timeout
                return
            if session is None or link is None:
                return
            await session.close()
            try:
                await link.unsubscribe(self.node, self.subid)
            except (ClientError, TimeoutError) as exc:
                log.warning("event=unsubscribe_failed worker=%s error=%s", self.name, exc)
            if runner is not None:
                await runner.drain(grace)
            await link.close()
            log.info(
                "event=worker_stopped worker=%s acked=%d failed=%d lost=%d returned=%d",
                *(self.name, self.stats.acked, self.stats.failed),
                *(self.stats.lost, self.stats.returned),
            )
        finally:
            self._halt()

    def abort(self) -> None:
        """Drop the connection at once, as a crash would: nothing is unsubscribed or
        unlocked here. The XMPP server sends the service our unavailable presence
        and the service hands our items to others (or their locks time out)."""
        if self._parts is not None:
            self._parts.abort()
        if self._session is not None:
            self._session.abort()
        self._halt()
