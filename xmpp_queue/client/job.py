"""Job: one locked item as a handler sees it, and what a worker counts and sends.

Kept apart from :mod:`.jobs` (the runner's rules) so a handler author reads
the job's API in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from xml.etree import ElementTree as ET

from slixmpp.xmlstream.tostring import tostring

from xmpp_queue.client.attributes import AttributeView
from xmpp_queue.client.payload import parse_json_payload

FALLBACK_LOCK = 30.0  # seconds a new lock is assumed to last when the node's is unknown


@dataclass(slots=True, eq=False)
class Job(AttributeView):
    """One locked item handed to a handler.

    ``element`` is the payload element (``None`` for an item without payload);
    ``payload`` serialises it, ``json()`` reads a XEP-0335 JSON payload.
    ``headers`` are the XEP-0131 SHIM headers of the notification (a dead
    letter's ``origin-node``, ``deliveries``...); ``attributes`` the
    publisher's among them, and ``priority``, ``deliver_at``, ``expires_at``,
    ``ttl`` what it was published with (see :class:`AttributeView`). ``delivery`` is the service's
    delivery count (1 = first delivery, to any worker; from the
    ``delivery-attempt`` header, or this worker's own count when a service
    does not send it). ``lost`` turns True if the service takes the lock back
    while the handler runs: the result will be dropped, so a long handler may
    check it and give up early. ``settled`` says how the handler ended the job
    itself (``"unlocked"``, ``"dead-lettered"``) or is None.
    """

    node: str
    item_id: str
    element: ET.Element | None
    headers: Mapping[str, str] = field(default_factory=dict)
    delivery: int = 1
    lost: bool = False
    locked_at: float = 0.0
    lock_for: float = FALLBACK_LOCK  # seconds the current lock lasts from locked_at
    started_at: float = 0.0  # when the handler started (the runner's clock)
    settled: str | None = None
    control: JobControl | None = field(default=None, repr=False)

    async def extend(self, seconds: int) -> None:
        """Keep the lock for *seconds* from now (a long step ahead); raises
        :class:`LockLost` if the lock is no longer ours."""
        await self._control_().extend(self, int(seconds))

    async def unlock(self, delay: int = 0) -> None:
        """Give the item back now; with *delay* (seconds) nobody gets it before then.
        The handler's return value no longer matters."""
        await self._control_().unlock(self, int(delay))

    async def dead_letter(self, reason: str) -> None:
        """Move the item to the node's dead-letter node now, with *reason* in its
        ``reason`` header (a poison item: retrying cannot help)."""
        await self._control_().dead_letter(self, reason)

    def _control_(self) -> JobControl:
        if self.control is None:
            raise RuntimeError("this job was not handed out by a worker")
        return self.control

    @property
    def payload(self) -> str:
        return "" if self.element is None else str(tostring(self.element))

    def json(self) -> Any:
        if self.element is None:
            raise ValueError(f"item {self.item_id} has no payload")
        return parse_json_payload(self.element)


class JobControl(Protocol):
    """What a job's own methods ask of the worker that holds it (``JobRunner``)."""

    async def extend(self, job: Job, seconds: int) -> None: ...

    async def unlock(self, job: Job, delay: int) -> None: ...

    async def dead_letter(self, job: Job, reason: str) -> None: ...


RESENT = "delivery-resent"
"""Header the service puts on an item notice it sends again after a restart (the same
delivery as before, not a new attempt)."""


def service_delivery(headers: Mapping[str, str], seen_here: int) -> int:
    """The service's delivery count from the ``delivery-attempt`` header, as an int;
    this worker's own count when the header is absent or not a number."""
    try:
        return max(1, int(headers["delivery-attempt"]))
    except (KeyError, ValueError):
        return seen_here


@dataclass(slots=True)
class WorkerStats:
    """What a worker did, for logs, progress displays and tests."""

    received: int = 0
    notifications: int = 0  # messages that carried items (fewer than received: batches)
    acked: int = 0
    failed: int = 0  # the handler raised: unlocked for someone else
    lost: int = 0  # the service took the lock back: result dropped
    redelivered_seen: int = 0  # items this worker had received before
    returned: int = 0  # given back unprocessed (draining, over capacity, cancelled)
    extended: int = 0  # lock extensions granted
    unlocked: int = 0  # the handler gave its job back itself (job.unlock)
    dead_lettered: int = 0  # the handler dead-lettered its job (job.dead_letter)
    abandoned: int = 0  # left while its handler still ran (abort): the service re-offers it
    resent_ignored: int = 0  # a restarted service re-sent a delivery this worker already took


class QueueOps(Protocol):
    """The requests a runner sends (``PubSubLink`` provides them)."""

    async def retract(self, node: str, item_id: str) -> None: ...

    async def unlock(self, node: str, item_id: str, reason: str = "") -> None:
        """The nack; *reason* (why the handler failed) goes with it when not empty."""

    async def extend(self, node: str, item_id: str, seconds: int) -> None: ...

    async def unlock_later(self, node: str, item_id: str, delay: int) -> None: ...

    async def dead_letter(self, node: str, item_id: str, reason: str) -> None: ...
