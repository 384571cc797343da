"""Admin-command tests: a real slixmpp component on an in-memory transport (the
transcript), form readers, and service set-ups. Fixtures: tests/admin/conftest.py.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

from slixmpp import ComponentXMPP, Iq
from slixmpp.plugins.xep_0004 import Form
from slixmpp.xmlstream import StanzaBase

from tests.kit import FakeClock, build_service
from xmpp_queue.admin.errors import COMMANDS_NS
from xmpp_queue.core.effects import Effect
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import Actor, Affiliation, NodeConfig
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.storage.store import StateStore

SERVICE = "queue.example.org"


ADMIN = "admin@example.org/console"


OTHER_ADMIN = "root@example.org/shell"


STRANGER = "eve@example.org/x"


OWNER = Actor("owner@example.org/desk")


PUB = Actor("pub@example.org/engine")


ALICE = Actor("alice@example.org/a")


BOB = Actor("bob@example.org/b")


DB_URL = "postgresql+asyncpg://queue:hunter2@db.example.org:5432/queue"


_SERVER_HEADER = (
    "<stream:stream xmlns='jabber:component:accept' "
    "xmlns:stream='http://etherx.jabber.org/streams' id='s1' from='queue.example.org'>"
)


_WRAP = (
    "<wrap xmlns='jabber:component:accept' xmlns:stream='http://etherx.jabber.org/streams'>"
    "{}</wrap>"
)


class _Transport:
    """The few asyncio.Transport methods slixmpp calls."""

    def __init__(self, on_write: object) -> None:
        self.on_write = on_write

    def write(self, data: bytes) -> None:
        self.on_write(data)  # type: ignore[operator]

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


@dataclass
class Sent:
    """What the admin commands handed to send_effects, and how many stanzas the
    component had queued by then (to check the reply went first)."""

    effects: list[Effect] = field(default_factory=list)
    queued_before: list[int] = field(default_factory=list)


class Transcript:
    """A component on an in-memory stream: feed XML in, await stanzas out."""

    def __init__(self, component: ComponentXMPP) -> None:
        self.component = component
        self.out: asyncio.Queue[StanzaBase] = asyncio.Queue()
        self.queued = 0
        self.sent = Sent()
        send = component.send

        def counting_send(data: object, use_filters: bool = True) -> None:
            self.queued += 1
            send(data, use_filters)  # type: ignore[arg-type]

        component.send = counting_send  # type: ignore[method-assign]
        self._filters = asyncio.ensure_future(component.run_filters())
        component.connection_made(_Transport(self._written), send_event=False)  # type: ignore[arg-type]
        component.data_received(_SERVER_HEADER)

    def handshake_accepted(self) -> None:
        """The server accepts the component (plugins run their session_bind)."""
        self.component.data_received("<handshake/>")

    def record_effects(self, effects: Sequence[Effect]) -> None:
        self.sent.effects.extend(effects)
        self.sent.queued_before.append(self.queued)

    def _written(self, data: bytes) -> None:
        text = data.decode()
        if text.startswith(("<stream:stream", "<?xml")):
            return
        for child in ET.fromstring(_WRAP.format(text)):
            if child.tag.endswith("}handshake"):
                continue
            self.out.put_nowait(self.component._build_stanza(child))

    def feed(self, xml: str) -> None:
        self.component.data_received(xml)

    async def next(self) -> StanzaBase:
        """The next stanza the component writes (a stuck command fails in 2 s)."""
        async with asyncio.timeout(2):
            return await self.out.get()

    async def request(self, xml: str) -> Iq:
        self.feed(xml)
        reply = await self.next()
        assert isinstance(reply, Iq), reply
        return reply

    async def settled(self) -> None:
        """Everything the component queued has been written."""
        await self.component.waiting_queue.join()

    def close(self) -> None:
        self._filters.cancel()

    # --- XEP-0050 requests ------------------------------------------------------------
    async def execute(
        self,
        node: str,
        frm: str = ADMIN,
        *,
        action: str | None = "execute",
        sessionid: str | None = None,
        fields: Mapping[str, str | Sequence[str]] | None = None,
        iq_id: str | None = None,
    ) -> Iq:
        attrs = {"xmlns": COMMANDS_NS, "node": node}
        if action is not None:
            attrs["action"] = action
        if sessionid is not None:
            attrs["sessionid"] = sessionid
        body = submit_form(fields) if fields is not None else ""
        command = "<command {}>{}</command>".format(
            " ".join(f"{k}={quoteattr(v)}" for k, v in attrs.items()), body
        )
        return await self.request(
            f"<iq type='set' id={quoteattr(iq_id or self._id())} from={quoteattr(frm)} "
            f"to='{SERVICE}'>{command}</iq>"
        )

    async def step(
        self,
        previous: Iq,
        frm: str = ADMIN,
        *,
        action: str | None = None,
        fields: Mapping[str, str | Sequence[str]] | None = None,
    ) -> Iq:
        """Continue the session *previous* answered (default action: none = execute)."""
        return await self.execute(
            previous["command"]["node"],
            frm,
            action=action,
            sessionid=previous["command"]["sessionid"],
            fields=fields,
        )

    async def disco(self, kind: str, node: str, frm: str = ADMIN) -> Iq:
        return await self.request(
            f"<iq type='get' id={quoteattr(self._id())} from={quoteattr(frm)} to='{SERVICE}'>"
            f"<query xmlns='http://jabber.org/protocol/disco#{kind}' node={quoteattr(node)}/>"
            "</iq>"
        )

    _ids = itertools.count(1)

    def _id(self) -> str:
        return f"q{next(self._ids)}"


def submit_form(fields: Mapping[str, str | Sequence[str]]) -> str:
    parts = []
    for var, value in fields.items():
        values = [value] if isinstance(value, str) else list(value)
        inner = "".join(f"<value>{escape(v)}</value>" for v in values)
        parts.append(f"<field var={quoteattr(var)}>{inner}</field>")
    return "<x xmlns='jabber:x:data' type='submit'>" + "".join(parts) + "</x>"


def forms(reply: Iq) -> list[Form]:
    return [s for s in reply["command"]["substanzas"] if isinstance(s, Form)]


def form_of(reply: Iq) -> Form:
    found = forms(reply)
    assert found, f"no form in {reply}"
    return found[0]


def field_vars(form: Form) -> list[str]:
    return [f["var"] for f in form.get_fields().values() if f["var"]]


def values(form: Form) -> dict[str, list[str]]:
    """Field var -> raw values (as sent)."""
    out = {}
    for f in form.xml.findall("{jabber:x:data}field"):
        if f.get("var"):
            out[f.get("var")] = [v.text or "" for v in f.findall("{jabber:x:data}value")]
    return out


def options(form: Form, var: str) -> list[str]:
    return [o["value"] for o in form.get_fields()[var]["options"]]


def notes(reply: Iq) -> list[tuple[str, str]]:
    return list(reply["command"]["notes"])


def note(reply: Iq) -> str:
    (only,) = notes(reply)
    return only[1]


def error_of(reply: Iq) -> tuple[str, str, str | None, str]:
    """(type, condition, XEP-0050 specific condition or None, text) of an error reply."""
    assert reply["type"] == "error", f"expected an error, got {reply}"
    specific = None
    # slixmpp writes <error/> in jabber:client inside component stanzas; match by name.
    error = next(c for c in reply.xml if c.tag.endswith("}error"))
    for child in error:
        if child.tag.startswith(f"{{{COMMANDS_NS}}}"):
            specific = child.tag.split("}", 1)[1]
    return reply["error"]["type"], reply["error"]["condition"], specific, reply["error"]["text"]


def assert_bad_payload(reply: Iq, *words: str) -> None:
    etype, condition, specific, text = error_of(reply)
    assert (etype, condition, specific) == ("modify", "bad-request", "bad-payload"), reply
    for word in words:
        assert word in text, f"{word!r} not in {text!r}"


def new_service(clock: FakeClock) -> PubSubService:
    """The real service over the memory store; ids id1, id2 ... so twins match."""
    return build_service(
        StateStore.in_memory(),
        clock,
        settings=ServiceSettings(
            default_config=NodeConfig(),
            admins=frozenset(),
            access=ServiceAccess.for_domain("example.org"),
        ),
    )


class Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _UnusedTlsContext:
    """Stands in for the TLS context slixmpp builds for every stream."""

    check_hostname = True
    verify_mode = ssl.CERT_REQUIRED

    def set_default_verify_paths(self) -> None:
        pass


async def make_queue(service: PubSubService, node: str = "jobs", **config: str) -> str:
    values = {"pubsub#queue": ["1"]} | {f"pubsub#queue_{k}": [v] for k, v in config.items()}
    await service.create_node(OWNER, node, values)
    # A new queue is whitelisted: the owner names the publisher and the workers.
    await service.set_node_affiliations(
        OWNER,
        node,
        [
            (PUB.bare, Affiliation.PUBLISHER),
            (ALICE.bare, Affiliation.MEMBER),
            (BOB.bare, Affiliation.MEMBER),
        ],
    )
    return node


async def make_worker(service: PubSubService, actor: Actor, n: int, node: str = "jobs") -> str:
    out = await service.subscribe(actor, node, actor.jid, {"pubsub#queue_requests": [str(n)]})
    return out.value.subid


async def publish(service: PubSubService, node: str, *item_ids: str) -> None:
    for item_id in item_ids:
        await service.publish(PUB, node, item_id, f"<job id='{item_id}'/>", 16)


async def ledger(service: PubSubService, node: str) -> list[tuple[EventKind, str, str | None]]:
    async with service.store.transaction() as tx:
        return [(e.kind, e.item_id, e.subscriber) for e in await tx.ledger.events(node)]


async def seeded(service: PubSubService) -> None:
    """jobs with two one-slot workers: ALICE holds i1, BOB holds i2, i3 waits.
    Retry delay 0 (XEP-0254's immediate hand-over): a released item is offered anew at once."""
    await make_queue(service, retry_delay="0")
    await make_worker(service, ALICE, 1)
    await make_worker(service, BOB, 1)
    await publish(service, "jobs", "i1", "i2", "i3")
