"""Lock requests (ack, nack, extend...) that are sent again until the service answers.

Why: a worker's ack is what frees its slot at the service. An ack that gets no
answer (the component was restarted or killed, an HA standby took over, its
database connection dropped) leaves the item locked until the lock timeout,
300 s by default, and a worker whose window is full of such locks gets no work
meanwhile. So every lock request of a worker is sent again until the *service*
answers it, with its own answer:

- a result: done;
- a refusal because the lock moved (``unexpected-request``, ``item-not-found``,
  ``conflict``, ``forbidden``): final, the job is simply not ours any more (if
  our first ack did commit before its answer was lost, this is what the second
  one hears). ``forbidden`` is also what ejabberd answers for a component that
  is not connected: it is believed only once the service answers a ping and
  says it again;
- a redirect (the node moved to another shard, docs/scaling.md): the worker
  points its link at the new shard and the request is sent there;
- a transient error (the XMPP server answering for a missing component with
  ``remote-server-timeout`` / ``service-unavailable`` / ``recipient-unavailable``,
  the component's ``internal-server-error`` while its database is away) or no
  answer: the service is away. :class:`ServiceWatch` then probes it (a
  disco#info ping: the first at once, then the session's jittered back-off)
  and, the moment it answers, every request still waiting is sent again.

These requests are idempotent for the holder: a second ack of an item already
acked is refused (``item-not-found``), it never acks someone else's lock (the
service checks the holder). Nothing else is re-sent this way: a publish is not
idempotent (:mod:`.window` retries it by its own rules).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from xmpp_queue.client.errors import ClientError, ConnectionLost, StanzaError

if TYPE_CHECKING:
    from xmpp_queue.client.link import PubSubLink
    from xmpp_queue.client.session import ReconnectPolicy, Session

log = logging.getLogger("xmpp_queue.client")

# Answers that say "the service is not there right now", not "no".
TRANSIENT = frozenset(
    {
        "remote-server-timeout",
        "remote-server-not-found",
        "service-unavailable",
        "recipient-unavailable",
        "internal-server-error",
        "resource-constraint",
    }
)
# Refusals an XMPP server also sends for a service that is not connected (ejabberd:
# forbidden, "Access denied by service policy"): checked with a ping before believed.
AMBIGUOUS = frozenset({"forbidden"})
FIRST_RESEND_AFTER = 2.0  # no answer for this long: ask whether the service is there
MAX_RESEND_AFTER = 30.0
PROBE_TIMEOUT = 5.0

Op = Callable[["PubSubLink"], Awaitable[None]]


def transient(exc: BaseException) -> bool:
    """True for an error after which the same request may well succeed."""
    return isinstance(exc, StanzaError) and exc.condition in TRANSIENT


class ServiceWatch:
    """Whether the service answers, as this session's requests and probes see it.

    ``epoch`` grows each time the service comes back from an outage; a request
    sent in an older epoch is in doubt and is sent again."""

    def __init__(self, session: Session, policy: ReconnectPolicy) -> None:
        self.session = session
        self.policy = policy
        self.epoch = 0
        self.outages = 0
        self._back: asyncio.Future[None] | None = None  # set while the service is away
        self._changed = asyncio.Event()
        self._probe: asyncio.Task[None] | None = None
        self._check: asyncio.Task[bool] | None = None
        self._since = 0.0
        self.on_back: Callable[[PubSubLink], None] | None = None
        # A redirect (the node moved to another shard): re-points the session's link
        # and says whether the request should be sent again (the Worker sets it).
        self.on_moved: Callable[[StanzaError], bool] | None = None

    def moved(self, error: StanzaError) -> bool:
        """True when *error* is a redirect the session now follows: send again."""
        return error.condition == "redirect" and self.on_moved is not None and self.on_moved(error)

    @property
    def away(self) -> bool:
        return self._back is not None

    def changed(self) -> asyncio.Event:
        """An event set when the current epoch ends (the service came back)."""
        return self._changed

    def lost(self, reason: str) -> None:
        """A request says the service is away: probe it until it answers (logged once)."""
        if self._back is not None or self.session.failure is not None:
            return
        loop = asyncio.get_running_loop()
        self._back = loop.create_future()
        self._since = loop.time()
        self.outages += 1
        log.warning(
            "event=service_unavailable client=%s reason=%r action=resend_when_back",
            self.session.name,
            reason,
        )
        self._probe = asyncio.ensure_future(self._probe_until_back())

    def answered(self, link: PubSubLink | None = None) -> None:
        """The service answered: end the outage, if there was one; waiting requests resend."""
        back, self._back = self._back, None
        if back is None:
            return
        self.epoch += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        if not back.done():
            back.set_result(None)
        log.info(
            "event=service_back client=%s after=%.1fs",
            self.session.name,
            asyncio.get_running_loop().time() - self._since,
        )
        if link is not None and self.on_back is not None:
            self.on_back(link)

    async def ready(self) -> None:
        """Until the service is not known to be away (raises once the session gave up)."""
        while self._back is not None:
            await asyncio.shield(self._back)
        if self.session.failure is not None:
            raise self.session.failure

    async def check(self) -> bool:
        """Ping the service now (one ping shared by every caller); True if it answered."""
        if self._check is None or self._check.done():
            self._check = asyncio.ensure_future(self._ping())
        return await asyncio.shield(self._check)

    async def _ping(self) -> bool:
        try:
            link = await self.session.link_up()
            await asyncio.wait_for(link.ping_service(), PROBE_TIMEOUT)
        except StanzaError as exc:
            self.lost(str(exc))
            return False
        except TimeoutError:
            self.lost("no answer")
            return False
        except ClientError:
            return False  # the stream went: the session reconnects, requests follow
        self.answered(link)
        return True

    async def _probe_until_back(self) -> None:
        attempt = 0
        try:
            while self._back is not None:
                await asyncio.sleep(self.policy.delay(attempt))
                attempt += 1
                try:
                    link = await self.session.link_up()
                except ClientError:
                    break  # the session gave up or closes: waiters learn it from it
                try:
                    await asyncio.wait_for(link.ping_service(), PROBE_TIMEOUT)
                except (ClientError, TimeoutError):
                    continue
                self.answered(link)
                return
        finally:
            back, self._back = self._back, None
            if back is not None and not back.done():
                back.set_result(None)

    def close(self) -> None:
        for task in (self._probe, self._check):
            if task is not None:
                task.cancel()


async def send_until_answered(session: Session, op: Op) -> None:
    """Run ``op(link)`` until the service answers it (see the module docstring).

    Raises the service's final refusal (a :class:`StanzaError`), or the
    session's failure once it gives up. A transient error, a lost stream or
    silence never reach the caller."""
    watch = session.watch
    attempts: set[asyncio.Task[None]] = set()
    patience = FIRST_RESEND_AFTER
    doubted = False  # an ambiguous refusal was already sent again once
    try:
        while True:
            await watch.ready()
            link = await session.link_up()
            changed = watch.changed()
            attempts.add(asyncio.ensure_future(op(link)))
            while True:  # until this attempt is in doubt
                bump = asyncio.ensure_future(changed.wait())
                done, _ = await asyncio.wait(
                    attempts | {bump}, timeout=patience, return_when=asyncio.FIRST_COMPLETED
                )
                bump.cancel()
                try:
                    if _settled(done, attempts, watch) or changed.is_set():
                        break
                except _Ambiguous as ambiguous:
                    # ejabberd refuses a stanza for a missing component with the
                    # same "forbidden" as the service's own. If the service does not
                    # answer a ping, it was the server: wait for the service. If it
                    # does, ask once more and take that answer.
                    if await watch.check():
                        if doubted:
                            raise ambiguous.error from None
                        doubted = True
                    else:  # a new absence: once back, the service is asked once more
                        doubted = False
                    break
                if not done:  # silence: is the service there at all?
                    patience = min(patience * 2, MAX_RESEND_AFTER)
                    await watch.check()
                    break
    except _Answered:
        return
    finally:
        for task in attempts:
            task.cancel()


class _Answered(Exception):
    """The request got its result (internal: ends the loop above)."""


class _Ambiguous(Exception):
    """A refusal that the XMPP server also gives for a missing service (internal)."""

    def __init__(self, error: StanzaError) -> None:
        super().__init__(str(error))
        self.error = error


def _settled(
    done: Collection[object],
    attempts: set[asyncio.Task[None]],
    watch: ServiceWatch,
) -> bool:
    """Look at the attempts that finished; True if one must be sent again.

    Stanzas of one stream are handled in order, so a refusal arriving while an
    earlier attempt is still unanswered means that earlier one was lost: the
    refusal is the answer."""
    resend = False
    for task in [t for t in attempts if t in done]:
        attempts.discard(task)
        exc = task.exception()
        if exc is None:
            raise _Answered
        if transient(exc):
            watch.lost(str(exc))
            resend = True
        elif isinstance(exc, StanzaError) and watch.moved(exc):
            resend = True  # the node moved: the link points at its new shard now
        elif isinstance(exc, StanzaError) and exc.condition in AMBIGUOUS:
            raise _Ambiguous(exc)
        elif isinstance(exc, StanzaError):
            raise exc
        elif isinstance(exc, ConnectionLost | TimeoutError):
            resend = True
        else:
            raise exc
    return resend


class SessionOps:
    """A worker's queue requests over a :class:`Session`, each sent until answered."""

    def __init__(self, session: Session) -> None:
        self.session = session

    async def retract(self, node: str, item_id: str) -> None:
        await send_until_answered(self.session, lambda link: link.retract(node, item_id))

    async def unlock(self, node: str, item_id: str, reason: str = "") -> None:
        await send_until_answered(self.session, lambda link: link.unlock(node, item_id, reason))

    async def retract_items(self, node: str, item_ids: Sequence[str]) -> None:
        await send_until_answered(self.session, lambda link: link.retract_items(node, item_ids))

    async def unlock_items(
        self, node: str, item_ids: Sequence[str], reasons: Mapping[str, str] | None = None
    ) -> None:
        await send_until_answered(
            self.session, lambda link: link.unlock_items(node, item_ids, reasons)
        )

    async def extend(self, node: str, item_id: str, seconds: int) -> None:
        await send_until_answered(self.session, lambda link: link.extend(node, item_id, seconds))

    async def unlock_later(self, node: str, item_id: str, delay: int) -> None:
        await send_until_answered(
            self.session, lambda link: link.unlock_later(node, item_id, delay)
        )

    async def dead_letter(self, node: str, item_id: str, reason: str) -> None:
        await send_until_answered(
            self.session, lambda link: link.dead_letter(node, item_id, reason)
        )
