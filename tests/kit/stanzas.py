"""The protocol suite's in-memory stream: stanza in, stanza out, no network.

slixmpp's ``SlixTest`` is a synchronous ``unittest`` harness that builds a plain
``ComponentXMPP`` and drives its own event loop, which fits neither our
``QueueComponent`` nor pytest-asyncio; this is the small equivalent. The real
component runs over a fake transport: the test feeds the server's side of the
stream with ``data_received`` (what the socket would do), and reads back what
the component wrote, parsed into stanzas. The fixtures are in
tests/protocol/conftest.py.
"""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from typing import Any

from tests.kit import FakeClock
from xmpp_queue.runtime.scheduler import DeadlineScheduler
from xmpp_queue.xmpp.component import QueueComponent

SERVICE = "pubsub.example.org"


OWNER = "owner@example.org/desk"


PUB = "pub@example.org/engine"


ALICE = "alice@example.org/a"


BOB = "bob@example.org/b"


EVE = "eve@example.org/x"


ADMIN = "admin@example.org/console"


NS = {
    "c": "jabber:component:accept",
    "jc": "jabber:client",
    "ps": "http://jabber.org/protocol/pubsub",
    "o": "http://jabber.org/protocol/pubsub#owner",
    "ev": "http://jabber.org/protocol/pubsub#event",
    "pe": "http://jabber.org/protocol/pubsub#errors",
    "st": "urn:ietf:params:xml:ns:xmpp-stanzas",
    "x": "jabber:x:data",
    "q": "urn:xmpp:pubsub:queueing:0",
    "ext": "urn:xmpp-queue:0",
    "rsm": "http://jabber.org/protocol/rsm",
    "shim": "http://jabber.org/protocol/shim",
    "di": "http://jabber.org/protocol/disco#info",
    "dit": "http://jabber.org/protocol/disco#items",
}


PS = NS["ps"]


OWNER_NS = NS["o"]


class FakeTransport:
    """What asyncio would hand the protocol; records every write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


class Stream:
    """The component under test with the server's end of its stream."""

    def __init__(self, comp: QueueComponent, transport: FakeTransport, clock: FakeClock) -> None:
        self.comp = comp
        # The timer is wired as app/term.py wires it: the component's outbox, started
        # by the first session.
        self.deadlines = DeadlineScheduler(comp.service, comp.outbox, clock)
        comp.add_event_handler("session_start", self.deadlines.connected)
        self.transport = transport
        self.clock = clock
        self.service = comp.service
        self._parser = ET.XMLPullParser(("start", "end"))
        self._depth = 0
        self._read = 0
        self.unread: list[ET.Element] = []

    async def start(self) -> None:
        comp = self.comp
        comp.init_plugins()
        comp._run_out_filters = asyncio.ensure_future(comp.run_filters())
        comp.connection_made(self.transport)
        comp.data_received(
            "<stream:stream xmlns='jabber:component:accept' "
            "xmlns:stream='http://etherx.jabber.org/streams' "
            f"from='{SERVICE}' id='stream-1'>"
        )
        comp.data_received("<handshake/>")
        await self.settle()
        self.take()  # stream header and handshake

    async def close(self) -> None:
        await self.deadlines.stop()
        self.comp._run_out_filters.cancel()
        await self.service.stop()

    async def settle(self) -> None:
        """Let handlers, the commit batcher and the write flush run until quiet."""
        quiet, seen = 0, -1
        for _ in range(500):
            for _ in range(5):
                await asyncio.sleep(0)
            if len(self.transport.writes) == seen:
                quiet += 1
                if quiet >= 4:
                    return
            else:
                quiet, seen = 0, len(self.transport.writes)
        raise AssertionError("the component never went quiet")

    def take(self) -> list[ET.Element]:
        """Stanzas written since the last take, in order."""
        for data in self.transport.writes[self._read :]:
            self._parser.feed(data)
        self._read = len(self.transport.writes)
        for event, el in self._parser.read_events():
            if event == "start":
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth == 1:
                    self.unread.append(el)
        out, self.unread = self.unread, []
        return out

    async def send(self, xml: str) -> list[ET.Element]:
        """Feed one or more stanzas; return everything the component wrote back."""
        self.comp.data_received(xml)
        await self.settle()
        return self.take()

    async def iq(
        self, itype: str, sender: str, payload: str, iq_id: str = "q1"
    ) -> tuple[ET.Element, list[ET.Element]]:
        """One IQ; returns (its reply, the other stanzas sent, in order)."""
        out = await self.send(
            f"<iq type='{itype}' id='{iq_id}' from='{sender}' to='{SERVICE}'>{payload}</iq>"
        )
        replies = [s for s in out if local(s) == "iq" and s.get("id") == iq_id]
        assert len(replies) == 1, [ET.tostring(s) for s in out]
        return replies[0], [s for s in out if s is not replies[0]]


def local(el: ET.Element) -> str:
    return el.tag.rsplit("}", 1)[-1]


def messages(out: list[ET.Element]) -> list[ET.Element]:
    return [s for s in out if local(s) == "message"]


def find(el: ET.Element, path: str) -> ET.Element:
    found = el.find(path, NS)
    assert found is not None, f"{path} not in {ET.tostring(el).decode()}"
    return found


def error_of(reply: ET.Element) -> tuple[str, str, str | None]:
    """(type, stanza condition, pubsub#errors child) of an error reply."""
    assert reply.get("type") == "error", ET.tostring(reply).decode()
    error = next(c for c in reply if local(c) == "error")
    condition = next(
        local(c) for c in error if c.tag.startswith(f"{{{NS['st']}}}") and local(c) != "text"
    )
    child = next((local(c) for c in error if c.tag.startswith(f"{{{NS['pe']}}}")), None)
    return error.get("type", ""), condition, child


def pubsub(body: str, ns: str = PS) -> str:
    return f"<pubsub xmlns='{ns}'>{body}</pubsub>"


def submit(form_type: str, **fields: str) -> str:
    rows = "".join(
        f"<field var='{var.replace('__', '#')}'><value>{value}</value></field>"
        for var, value in fields.items()
    )
    return (
        "<x xmlns='jabber:x:data' type='submit'><field var='FORM_TYPE' type='hidden'>"
        f"<value>{form_type}</value></field>{rows}</x>"
    )


NODE_CONFIG = "http://jabber.org/protocol/pubsub#node_config"


SUB_OPTIONS = "http://jabber.org/protocol/pubsub#subscribe_options"


async def make_node(s: Stream, node: str = "news", owner: str = OWNER, **config: str) -> None:
    configure = f"<configure>{submit(NODE_CONFIG, **config)}</configure>" if config else ""
    reply, _ = await s.iq("set", owner, pubsub(f"<create node='{node}'/>{configure}"))
    assert reply.get("type") == "result", ET.tostring(reply).decode()


async def make_queue(s: Stream, node: str = "jobs", **config: str) -> None:
    await make_node(s, node, pubsub__queue="1", **config)
    reply, _ = await s.iq(
        "set",
        OWNER,
        pubsub(
            # A new queue is whitelisted: the owner names the publisher and workers.
            f"<affiliations node='{node}'>"
            f"<affiliation jid='pub@example.org' affiliation='publisher'/>"
            f"<affiliation jid='alice@example.org' affiliation='member'/>"
            f"<affiliation jid='bob@example.org' affiliation='member'/>"
            f"<affiliation jid='carol@example.org' affiliation='member'/>"
            f"<affiliation jid='workerbee237@example.org' affiliation='member'/></affiliations>",
            OWNER_NS,
        ),
    )
    assert reply.get("type") == "result", ET.tostring(reply).decode()


async def subscribe_worker(s: Stream, who: str, window: int, node: str = "jobs") -> ET.Element:
    options = f"<options>{submit(SUB_OPTIONS, pubsub__queue_requests=str(window))}</options>"
    reply, _ = await s.iq(
        "set", who, pubsub(f"<subscribe node='{node}' jid='{who}'/>{options}"), iq_id="sub"
    )
    assert reply.get("type") == "result", ET.tostring(reply).decode()
    return reply


async def publish(
    s: Stream,
    node: str,
    item_id: str,
    payload: str = "<job xmlns='urn:example'>x</job>",
    who: str = PUB,
) -> tuple[ET.Element, list[ET.Element]]:
    return await s.iq(
        "set",
        who,
        pubsub(f"<publish node='{node}'><item id='{item_id}'>{payload}</item></publish>"),
        iq_id="pub",
    )


_STANZA_NS = {"jabber:client": "jabber:component:accept"}


def _canon(el: ET.Element) -> tuple[Any, ...]:
    """Order-insensitive, whitespace-insensitive form; jabber:client == component ns."""
    tag = el.tag
    for ns, same in _STANZA_NS.items():
        tag = tag.replace(f"{{{ns}}}", f"{{{same}}}")
    text = (el.text or "").strip()
    children = tuple(sorted((_canon(c) for c in el), key=repr))
    return (tag, tuple(sorted(el.attrib.items())), text, children)


def assert_same_xml(actual: ET.Element, expected: str) -> None:
    wrapped = ET.fromstring(f"<stream xmlns='jabber:component:accept'>{expected}</stream>")[0]
    assert _canon(actual) == _canon(wrapped), (
        f"\nactual:   {ET.tostring(actual).decode()}\nexpected: {ET.tostring(wrapped).decode()}"
    )
