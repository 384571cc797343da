"""A worker follows its node to a new shard (client/worker_moves.py), without a server.

The worker's link and stream are small fakes; the placement cache is the real
``Placements``; the public name's answers are what a directory says (a redirect).
"""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from xmpp_queue.client.errors import StanzaError
from xmpp_queue.client.placement import Placements
from xmpp_queue.client.worker_moves import NodeMoves
from xmpp_queue.core.placement import node_uri

PUBLIC, OLD, NEW = "queue.example.org", "p0.queue.example.org", "p1.queue.example.org"


@dataclass
class Directory:
    """The public name: redirects every node question to *where*."""

    where: str = NEW
    asked: int = 0

    async def call(
        self, to: str, body: str, iq_type: str = "set", reply_timeout: float | None = 30.0
    ) -> ET.Element:
        self.asked += 1
        raise StanzaError("redirect", node_uri(self.where, "jobs"), "modify")


@dataclass
class FakeLink:
    stream: Directory
    service: str = OLD
    presences: list[str] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)

    def send_presence(self, available: bool = True) -> None:
        self.presences.append(self.service)

    def on_events(self, events: list[Any]) -> None:
        self.events.extend(events)


@dataclass
class FakeWorker:
    link: FakeLink
    node: str = "jobs"
    name: str = "w1"
    service_jid: str = OLD
    placements: Placements = field(default_factory=lambda: Placements(PUBLIC))


def event(sender: str, node: str = "jobs", item: str = "i1") -> ET.Element:
    return ET.fromstring(
        f"<message xmlns='jabber:client' from='{sender}' to='w1@example.org/w'>"
        f"<event xmlns='http://jabber.org/protocol/pubsub#event'><items node='{node}'>"
        f"<item id='{item}'><x xmlns='urn:t'/></item></items></event></message>"
    )


async def test_a_redirected_lock_request_points_the_link_at_the_new_shard() -> None:
    worker = FakeWorker(FakeLink(Directory()))
    moves = NodeMoves(worker)
    assert moves.on_redirect(StanzaError("redirect", node_uri(NEW, "jobs"), "modify")) is True
    assert (worker.link.service, worker.service_jid) == (NEW, NEW)
    assert worker.link.presences == [NEW], "our presence goes to the new shard"
    assert worker.placements.known("jobs") == NEW
    # A redirect naming another node, or another error: not ours to follow.
    other = StanzaError("redirect", node_uri(OLD, "mail"), "modify")
    assert moves.on_redirect(other) is False
    assert moves.on_redirect(StanzaError("item-not-found")) is False


async def test_events_from_the_new_shard_are_taken_once_the_directory_confirms() -> None:
    worker = FakeWorker(FakeLink(Directory(where=NEW)))
    moves = NodeMoves(worker)
    assert moves.on_stranger(event(NEW, item="i1")) is True
    assert moves.on_stranger(event(NEW, item="i2")) is True
    assert moves.on_stranger(event(NEW, node="mail")) is False  # not our node
    assert moves._asking is not None
    await moves._asking
    assert worker.link.service == NEW
    assert [e.item_id for e in worker.link.events] == ["i1", "i2"]


async def test_events_from_a_jid_the_directory_does_not_name_are_dropped(
    monkeypatch: Any,
) -> None:
    import xmpp_queue.client.worker_moves as wm

    monkeypatch.setattr(wm, "ASK_EVERY", 0.0)
    directory = Directory(where=OLD)  # the node did not move
    worker = FakeWorker(FakeLink(directory))
    moves = NodeMoves(worker)
    assert moves.on_stranger(event("intruder.example.org")) is True
    assert moves._asking is not None
    await asyncio.wait_for(moves._asking, 5)
    assert worker.link.service == OLD and worker.link.events == []
    assert directory.asked == wm.ASK_TIMES, "asked again while the answer could be cached"
