"""Where a node lives: the client's side of a sharded service (docs/scaling.md).

Why: a sharded deployment publishes one name (``queue.example.org``, a
directory) and serves each node on a shard (``p1.queue.example.org``). User
code names only the public service; the client asks it once per node, follows
the redirect (RFC 6120 ``<redirect/>`` whose text is the node's xmpp: URI,
``xmpp:p1.queue.example.org?;node=jobs``), and remembers the answer, so only
the first contact with a node costs one extra round trip. A later redirect (the
node moved) replaces the remembered shard. An unsharded service answers the
question itself and is remembered as its own nodes' home.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar
from xml.etree import ElementTree as ET

from xmpp_queue.client.errors import StanzaError
from xmpp_queue.client.wire_locks import node_info_query
from xmpp_queue.core.placement import parse_node_uri

log = logging.getLogger("xmpp_queue.client")

T = TypeVar("T")
REDIRECTS = frozenset({"redirect", "gone"})


class Caller(Protocol):
    """What resolving needs of a stream: one IQ to any JID (``QueueStream.call``)."""

    async def call(
        self, to: str, body: str, iq_type: str = "set", reply_timeout: float | None = 30.0
    ) -> ET.Element: ...


def redirect_target(exc: BaseException) -> tuple[str, str | None] | None:
    """(service, node) a redirect (or gone) error points to; None for other errors."""
    if not isinstance(exc, StanzaError) or exc.condition not in REDIRECTS:
        return None
    try:
        return parse_node_uri(exc.text)
    except ValueError:
        return None


class Placements:
    """One client's map of node -> service JID, learnt from the public *service*."""

    def __init__(self, service: str, timeout: float = 30.0) -> None:
        self.public = service
        self.timeout = timeout
        self._where: dict[str, str] = {}
        self._asking: dict[str, asyncio.Future[str]] = {}
        self.lookups = 0  # round trips spent on resolving (first contacts, redirects)

    def known(self, node: str) -> str | None:
        return self._where.get(node)

    def service_for(self, node: str) -> str:
        """The service to send *node*'s requests to (the public one until known)."""
        return self._where.get(node, self.public)

    def learn(self, node: str, service: str) -> None:
        if self._where.get(node) != service:
            log.info("event=node_placed node=%s service=%s", node, service)
        self._where[node] = service

    def follow(self, exc: BaseException, node: str) -> str | None:
        """After a request for *node* failed with *exc*: the service to try instead
        when *exc* is a redirect (remembered), else None."""
        target = redirect_target(exc)
        if target is None:
            return None
        service, _ = target
        self.learn(node, service)
        return service

    async def resolve(self, stream: Caller, node: str) -> str:
        """The service of *node*, asking the public service once (concurrent callers
        share the question)."""
        known = self._where.get(node)
        if known is not None:
            return known
        asking = self._asking.get(node)
        if asking is None:
            asking = asyncio.ensure_future(self._ask(stream, node))
            self._asking[node] = asking
            asking.add_done_callback(lambda _: self._asking.pop(node, None))
        return await asyncio.shield(asking)

    async def _ask(self, stream: Caller, node: str) -> str:
        self.lookups += 1
        try:
            await stream.call(self.public, node_info_query(node), "get", self.timeout)
        except StanzaError as exc:
            target = redirect_target(exc)
            if target is not None:
                self.learn(node, target[0])
                return target[0]
            if exc.retryable:  # the service is away: ask again next time
                raise
            # No such node (yet): the request goes to the public name, which answers
            # it; nothing is remembered, so a node created later is asked for again.
            return self.public
        self.learn(node, self.public)  # it answered for the node itself: not sharded
        return self.public


async def routed(
    placements: Placements,
    node: str,
    stream: Callable[[], Awaitable[Caller]],
    submit: Callable[[str], Awaitable[asyncio.Future[T]]],
) -> asyncio.Future[T]:
    """Send a request for *node* with ``submit(service)`` to the node's service, and
    follow one redirect: the future of its answer (from the service that has it).

    *stream* gives the current stream when the node's service must be asked first.
    """
    service = placements.known(node) or await placements.resolve(await stream(), node)
    first = await submit(service)
    if placements.known(node) == placements.public:
        return first  # the public name serves the node itself: nothing to follow
    outer: asyncio.Future[T] = asyncio.get_running_loop().create_future()

    async def again(moved: str) -> None:
        try:
            result = await (await submit(moved))
        except BaseException as exc:  # the caller gets it from the future
            if not outer.done():
                outer.set_exception(exc)
            return
        if not outer.done():
            outer.set_result(result)

    def finished(done: asyncio.Future[T]) -> None:
        if outer.done():
            return
        if done.cancelled():
            outer.cancel()
            return
        exc = done.exception()
        if exc is None:
            outer.set_result(done.result())
            return
        moved = placements.follow(exc, node)
        if moved is None or moved == service:
            outer.set_exception(exc)
            return
        task = asyncio.ensure_future(again(moved))
        _pending.add(task)
        task.add_done_callback(_pending.discard)

    first.add_done_callback(finished)
    return outer


_pending: set[asyncio.Task[None]] = set()  # redirected sends in flight (kept referenced)


class Link(Protocol):
    """What :func:`on_node` needs of a link: its stream, and a view on another service."""

    @property
    def stream(self) -> Caller: ...

    def via(self, service: str) -> Link: ...


L = TypeVar("L", bound=Link)
R = TypeVar("R")


async def on_node(
    placements: Placements,
    link: L,
    node: str,
    action: Callable[[L], Awaitable[R]],
    *,
    ask_first: bool = True,
) -> R:
    """Run *action* on a view of *link* toward *node*'s service; follow one redirect.

    *ask_first*: resolve an unknown node before the action (False for a create:
    the public service's redirect answers it as cheaply)."""
    if ask_first and placements.known(node) is None:
        service = await placements.resolve(link.stream, node)
    else:
        service = placements.service_for(node)
    try:
        return await _waiting(link.via(service), action)
    except StanzaError as exc:
        moved = placements.follow(exc, node)
        if moved is None or moved == service:
            raise
        return await _waiting(link.via(moved), action)


WAIT_RETRIES = (0.25, 0.5, 1.0, 2.0, 2.0, 2.0)  # about 8 s: a shard's takeover, say
ABSENT = frozenset({"forbidden", "service-unavailable"})  # ejabberd: no such route


async def _waiting(at: Any, action: Callable[[Any], Awaitable[R]]) -> R:
    """``action(at)``, again after a pause while the service is away: a ``wait`` error
    (RFC 6120: the same request may succeed later; Prosody's answer for a component
    that is reconnecting, as a shard is while a standby takes it over), or ejabberd's
    ``forbidden`` for a missing route when the service does not answer a ping."""
    for pause in WAIT_RETRIES:
        try:
            return await action(at)
        except StanzaError as exc:
            if not exc.retryable and not (exc.condition in ABSENT and await _absent(at)):
                raise
            log.info("event=request_retried condition=%s in=%.2fs", exc.condition, pause)
        await asyncio.sleep(pause)
    return await action(at)


async def _absent(at: Any) -> bool:
    """Whether the service of view *at* fails to answer a ping (the server answered)."""
    ping = getattr(at, "ping_service", None)
    if ping is None:
        return False
    try:
        await ping()
    except StanzaError:
        return True
    return False


class Pointable(Protocol):
    """A link whose requests go to ``service`` (``PubSubLink``, or a test's fake)."""

    service: str


async def point_and_follow(
    placements: Placements, node: str, link: Pointable, action: Callable[[], Awaitable[R]]
) -> R:
    """Point *link* at *node*'s service (asked once), run *action*; after a redirect,
    point it at the new service and run *action* once more (the Worker's subscribe:
    its link serves one node, so the link itself is pointed, not a view of it)."""
    stream = getattr(link, "stream", None)  # a test's fake link has none
    if stream is not None and placements.known(node) is None:
        await placements.resolve(stream, node)
    link.service = placements.service_for(node)
    try:
        return await action()
    except StanzaError as exc:
        moved = placements.follow(exc, node)
        if moved is None:
            raise
        link.service = moved
        return await action()
