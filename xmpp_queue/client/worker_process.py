"""What a worker needs around its protocol: a default name, SIGINT/SIGTERM, its
options checked, the node's lock timeout read.

Kept apart from :mod:`.worker` (the protocol's order of things): none of it is
about the order in which a worker does things.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import socket
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from xmpp_queue.client.errors import ClientError

if TYPE_CHECKING:
    from xmpp_queue.client.link import PubSubLink

log = logging.getLogger("xmpp_queue.client")


@contextlib.contextmanager
def stop_signals(on_signal: Callable[[signal.Signals], None], enabled: bool) -> Iterator[None]:
    """SIGINT and SIGTERM call *on_signal* while inside (when *enabled* and the
    platform and thread allow it); the handlers are removed on the way out."""
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    if enabled:
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(signum, on_signal, signum)
                installed.append(signum)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread, or no signals on this platform
    try:
        yield
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


MAX_BATCH = 1000  # the service's bound on items per notification and per request
MAX_ACK_LINGER = 10.0  # seconds: Pulsar's group time is 0.1 s; more only holds locks
MAX_BATCH_WAIT = 10.0  # seconds: the service's bound on pubsub#queue_batch_wait


def check_options(
    queue_requests: int,
    max_batch: int,
    ack_linger: float,
    lock_extend: int | None,
    batch_wait: float = 0.0,
) -> None:
    """A Worker's numeric options, refused when it is built rather than at run time."""
    if queue_requests < 1:
        raise ValueError("queue_requests must be a positive integer")
    if not 1 <= max_batch <= MAX_BATCH:
        raise ValueError(f"max_batch must be between 1 and {MAX_BATCH}")
    if not 0 <= ack_linger <= MAX_ACK_LINGER:
        raise ValueError(f"ack_linger must be between 0 and {MAX_ACK_LINGER} seconds")
    if not 0 <= batch_wait <= MAX_BATCH_WAIT:
        raise ValueError(f"batch_wait must be between 0 and {MAX_BATCH_WAIT} seconds")
    if batch_wait > 0 and max_batch == 1:
        raise ValueError("batch_wait needs max_batch above 1: it fills batches")
    if lock_extend is not None and lock_extend < 0:
        raise ValueError("lock_extend must be 0 (off) or a number of seconds")


async def read_lock_timeout(link: PubSubLink, node: str, name: str) -> int | None:
    """The node's lock timeout, which the lock keep-alive must beat (None: a
    service that does not say; the keep-alive then assumes 30 s)."""
    try:
        return await link.lock_timeout(node)
    except (ClientError, TimeoutError) as exc:
        log.info("event=lock_timeout_unknown worker=%s error=%s", name, exc)
        return None


def default_resource() -> str:
    """A worker name when none is given: host, process, and a few random bits
    (two unnamed workers in one process must not share a resource)."""
    host = socket.gethostname().split(".")[0] or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(2)}"
