"""Protocol-level helpers for the integration suites: stanzas, forms, inboxes, workers.

The suites talk to the component only through XMPP, as any client would, so
these helpers know stanzas (XEP-0060, XEP-0254, the project's ``urn:xmpp-queue:0``
extension) and nothing of the component's code. Notifications are awaited
through an :class:`Inbox` (asyncio events and timeouts, never fixed sleeps);
"nobody else got it" is proved with a round-trip barrier (:meth:`Inbox.assert_none`):
the component writes a notification before it answers a later IQ from the same
client, so after that IQ's reply the notification would already be here.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
import uuid
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from slixmpp import ClientXMPP, Iq
from slixmpp.exceptions import IqError, IqTimeout
from slixmpp.plugins.xep_0004.stanza import Form
from slixmpp.xmlstream.handler import Callback
from slixmpp.xmlstream.matcher import MatchXPath

SERVICE = "queue.localhost"

PUBSUB = "http://jabber.org/protocol/pubsub"
PUBSUB_OWNER = "http://jabber.org/protocol/pubsub#owner"
PUBSUB_EVENT = "http://jabber.org/protocol/pubsub#event"
PUBSUB_ERRORS = "http://jabber.org/protocol/pubsub#errors"
QUEUEING = "urn:xmpp:pubsub:queueing:0"
QUEUE_EXT = "urn:xmpp-queue:0"
RSM = "http://jabber.org/protocol/rsm"
DATA_FORMS = "jabber:x:data"
SHIM = "http://jabber.org/protocol/shim"
STANZAS = "urn:ietf:params:xml:ns:xmpp-stanzas"
DISCO_INFO = "http://jabber.org/protocol/disco#info"
DISCO_ITEMS = "http://jabber.org/protocol/disco#items"
CLIENT = "jabber:client"

NODE_CONFIG = "http://jabber.org/protocol/pubsub#node_config"
SUBSCRIBE_OPTIONS = "http://jabber.org/protocol/pubsub#subscribe_options"
PUBLISH_OPTIONS = "http://jabber.org/protocol/pubsub#publish-options"
META_DATA = "http://jabber.org/protocol/pubsub#meta-data"
EXAMPLE_NS = "urn:xmpp:example"

TIMEOUT = 10.0  # seconds an IQ or an expected notification may take on a busy 2-core box

_counter = itertools.count(1)


def unique(prefix: str = "n") -> str:
    """A node or item id no other test uses (the component may be shared by a module)."""
    return f"{prefix}-{next(_counter)}-{uuid.uuid4().hex[:8]}"


def payload(text: str = "payload", ns: str = EXAMPLE_NS) -> ET.Element:
    """The spec's example payload: ``<example xmlns='urn:xmpp:example'>payload</example>``."""
    el = ET.Element(f"{{{ns}}}example")
    el.text = text
    return el


# --- forms ----------------------------------------------------------------------------


def form_xml(form_type: str, values: Mapping[str, Any], ftype: str = "submit") -> ET.Element:
    """An XEP-0004 form; booleans become 1/0, lists become several values."""
    x = ET.Element(f"{{{DATA_FORMS}}}x", {"type": ftype})
    hidden = ET.SubElement(x, f"{{{DATA_FORMS}}}field", {"var": "FORM_TYPE", "type": "hidden"})
    ET.SubElement(hidden, f"{{{DATA_FORMS}}}value").text = form_type
    for var, value in values.items():
        f = ET.SubElement(x, f"{{{DATA_FORMS}}}field", {"var": var})
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, bool):
                v = "1" if v else "0"
            ET.SubElement(f, f"{{{DATA_FORMS}}}value").text = str(v)
    return x


def form(form_type: str, values: Mapping[str, Any], ftype: str = "submit") -> Form:
    """:func:`form_xml` as slixmpp's Form, for the ``xep_0060`` plugin's parameters."""
    return Form(xml=form_xml(form_type, values, ftype))


def config_form(**values: Any) -> Form:
    """A node_config submit form; keyword names drop the ``pubsub#`` prefix."""
    return form(NODE_CONFIG, {f"pubsub#{k}": v for k, v in values.items()})


def form_values(x: ET.Element | None) -> dict[str, list[str]]:
    """field var -> values of an XEP-0004 form element."""
    if x is None:
        return {}
    out: dict[str, list[str]] = {}
    for f in x.findall(f"{{{DATA_FORMS}}}field"):
        out[f.get("var", "")] = [v.text or "" for v in f.findall(f"{{{DATA_FORMS}}}value")]
    return out


def form_value(x: ET.Element | None, var: str) -> str | None:
    values = form_values(x).get(var)
    return values[0] if values else None


def find_form(parent: ET.Element, form_type: str | None = None) -> ET.Element | None:
    """The first data form under *parent* (any depth) whose FORM_TYPE is *form_type*."""
    for x in parent.iter(f"{{{DATA_FORMS}}}x"):
        if form_type is None or form_value(x, "FORM_TYPE") == form_type:
            return x
    return None


# --- IQs and errors -------------------------------------------------------------------


def iq(
    client: ClientXMPP, body: str | ET.Element | None, itype: str = "set", to: str = SERVICE
) -> Iq:
    """A hand-built IQ (for what the ``xep_0060`` plugin cannot say)."""
    stanza = client.make_iq(ito=to, itype=itype)
    if body is not None:
        stanza.append(ET.fromstring(body) if isinstance(body, str) else body)
    return stanza


async def send(stanza: Iq, within: float = TIMEOUT) -> Iq:
    return await stanza.send(timeout=within)


@dataclass(frozen=True)
class ErrorInfo:
    type: str
    condition: str
    pubsub: str | None  # local name of the pubsub#errors child, if any
    feature: str | None
    xml: str

    def triple(self) -> tuple[str, str, str | None]:
        return (self.condition, self.type, self.pubsub)


def error_info(reply: Iq | ET.Element) -> ErrorInfo:
    root = reply.xml if isinstance(reply, Iq) else reply
    err = root.find(f"{{{CLIENT}}}error")
    if err is None:
        err = root.find("error")
    assert err is not None, f"no <error/> in {ET.tostring(root, encoding='unicode')}"
    condition = ""
    pubsub = None
    feature = None
    for child in err:
        ns, _, name = child.tag[1:].partition("}")
        if ns == STANZAS and name != "text":
            condition = name
        elif ns == PUBSUB_ERRORS:
            pubsub = name
            feature = child.get("feature")
    return ErrorInfo(
        err.get("type", ""), condition, pubsub, feature, ET.tostring(root, encoding="unicode")
    )


async def expect_error(
    request: Awaitable[Any],
    condition: str,
    etype: str,
    pubsub: str | None = None,
    *,
    feature: str | None = None,
) -> ErrorInfo:
    """Await *request* and assert it fails with (condition, type, pubsub#errors child)."""
    try:
        result = await request
    except IqError as exc:
        info = error_info(exc.iq)
    else:
        shown = ET.tostring(result.xml, encoding="unicode") if isinstance(result, Iq) else result
        raise AssertionError(f"expected {condition}/{etype}/{pubsub}, got a result: {shown}")
    assert info.triple() == (condition, etype, pubsub), (
        f"expected (condition, type, pubsub#errors) = {(condition, etype, pubsub)}, "
        f"got {info.triple()}: {info.xml}"
    )
    if feature is not None:
        assert info.feature == feature, info.xml
    return info


def xml_of(stanza: Iq | ET.Element) -> str:
    return ET.tostring(stanza.xml if isinstance(stanza, Iq) else stanza, encoding="unicode")


def item_ids(reply: Iq) -> list[str]:
    """Item ids of an items result (§6.5), in document order."""
    items = reply.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}items")
    assert items is not None, xml_of(reply)
    return [i.get("id", "") for i in items.findall(f"{{{PUBSUB}}}item")]


def items_of(reply: Iq) -> dict[str, ET.Element]:
    items = reply.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}items")
    assert items is not None, xml_of(reply)
    return {i.get("id", ""): i for i in items.findall(f"{{{PUBSUB}}}item")}


def headers_of(el: ET.Element) -> dict[str, str]:
    """XEP-0131 headers anywhere under *el* (message level or inside an item)."""
    return {h.get("name", ""): h.text or "" for h in el.iter(f"{{{SHIM}}}header")}


# --- notifications ----------------------------------------------------------------------


@dataclass
class Event:
    """One pubsub event out of a ``<message/>``: a message with several items gives several."""

    kind: str  # item, retract, unlock, purge, delete, configuration, subscription, error, other
    node: str
    item_id: str | None = None
    payload: ET.Element | None = None
    headers: dict[str, str] = field(default_factory=dict)
    attrs: dict[str, str] = field(default_factory=dict)
    message: ET.Element | None = None
    received_at: float = 0.0

    def __repr__(self) -> str:
        return f"Event({self.kind} node={self.node} item={self.item_id})"


def parse_events(msg: ET.Element) -> list[Event]:
    now = time.monotonic()
    headers = {}
    hdrs = msg.find(f"{{{SHIM}}}headers")
    if hdrs is not None:
        headers = headers_of(hdrs)
    if msg.get("type") == "error":
        return [Event("error", "", message=msg, received_at=now)]
    event = msg.find(f"{{{PUBSUB_EVENT}}}event")
    if event is None:
        return [Event("other", "", message=msg, headers=headers, received_at=now)]
    out: list[Event] = []
    for child in event:
        node = child.get("node", "")
        name = child.tag.rpartition("}")[2]
        if name == "items":
            for entry in child:
                ns, _, kind = entry.tag[1:].partition("}")
                if ns == QUEUEING and kind == "unlock":
                    kind = "unlock"
                elif ns == PUBSUB_EVENT and kind in ("item", "retract"):
                    pass
                else:
                    kind = f"other:{entry.tag}"
                body = next((c for c in entry if not c.tag.startswith(f"{{{SHIM}}}")), None)
                out.append(
                    Event(
                        kind,
                        node,
                        entry.get("id"),
                        body if kind == "item" else None,
                        {**headers, **headers_of(entry)},
                        dict(entry.attrib),
                        msg,
                        now,
                    )
                )
        else:
            out.append(Event(name, node, None, None, headers, dict(child.attrib), msg, now))
    return out


Predicate = Callable[[Event], bool]


def match(kind: str | None = None, node: str | None = None, item: str | None = None) -> Predicate:
    def pred(e: Event) -> bool:
        return (
            (kind is None or e.kind == kind)
            and (node is None or e.node == node)
            and (item is None or e.item_id == item)
        )

    return pred


class Inbox:
    """Every ``<message/>`` a client receives, parsed into :class:`Event` s and kept until taken."""

    def __init__(self, client: ClientXMPP) -> None:
        self.client = client
        self.pending: list[Event] = []
        self.history: list[Event] = []
        self._arrived = asyncio.Event()
        self._listeners: list[Callable[[Event], None]] = []
        client.register_handler(
            Callback(f"inbox-{id(self)}", MatchXPath(f"{{{CLIENT}}}message"), self._on_message)
        )

    def listen(self, callback: Callable[[Event], None]) -> None:
        """Call *callback* for every event as it arrives (workers); events still queue."""
        self._listeners.append(callback)

    def _on_message(self, msg: Any) -> None:
        events = parse_events(msg.xml)
        self.pending.extend(events)
        self.history.extend(events)
        self._arrived.set()
        for event in events:
            for callback in self._listeners:
                callback(event)

    def take(self, pred: Predicate) -> list[Event]:
        """Remove and return every pending event matching *pred*."""
        taken = [e for e in self.pending if pred(e)]
        self.pending = [e for e in self.pending if not pred(e)]
        return taken

    async def next(self, pred: Predicate = lambda e: True, within: float = TIMEOUT) -> Event:
        """The first event matching *pred*, waiting up to *within* seconds for it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            for i, event in enumerate(self.pending):
                if pred(event):
                    return self.pending.pop(i)
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(
                    f"{self.client.boundjid}: no matching event within {within}s; "
                    f"pending: {self.pending}"
                )
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except TimeoutError:
                pass

    async def collect(self, count: int, pred: Predicate, within: float = TIMEOUT) -> list[Event]:
        return [await self.next(pred, within) for _ in range(count)]

    async def barrier(self) -> None:
        """One IQ round trip to the service: what it sent us before is here after this."""
        await send(iq(self.client, f"<query xmlns='{DISCO_INFO}'/>", "get"))

    async def take_resent(self, node: str, ids: Iterable[str], within: float = TIMEOUT) -> None:
        """After a restart the service announces held items again (``delivery-resent``):
        take exactly the notices of *ids* (the items this client holds) on *node*."""
        expected = sorted(ids)

        def resent(e: Event) -> bool:
            return e.kind == "item" and e.node == node and "delivery-resent" in e.headers

        got = sorted(e.item_id or "" for e in await self.collect(len(expected), resent, within))
        assert got == expected, f"{self.client.boundjid}: re-sent {got}, held {expected}"

    async def assert_none(self, pred: Predicate = lambda e: True) -> None:
        """Nothing matching *pred* was sent to this client (proved by :meth:`barrier`)."""
        await self.barrier()
        found = [e for e in self.pending if pred(e)]
        assert not found, f"{self.client.boundjid} got unexpected events: {found}"

    async def wait_none(self, pred: Predicate, seconds: float) -> None:
        """Nothing matching *pred* arrives within *seconds* (for deadlines that must NOT
        fire: the only case where waiting out a span of time is the assertion)."""
        try:
            event = await self.next(pred, seconds)
        except AssertionError:
            return
        raise AssertionError(f"{self.client.boundjid} got {event} within {seconds}s")


# --- pubsub and queue requests --------------------------------------------------------


async def create_node(client: ClientXMPP, node: str | None, **config: Any) -> str:
    """Create (and configure) a node; returns its id (the instant node's, if *node* is None)."""
    reply = await client.plugin["xep_0060"].create_node(
        SERVICE, node, config=config_form(**config) if config else None, timeout=TIMEOUT
    )
    create = reply.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}create")
    if create is not None and create.get("node"):
        return create.get("node", "")
    assert node is not None, f"instant node without a node id: {xml_of(reply)}"
    return node


WORKER_ACCOUNTS = tuple(f"{u}@localhost" for u in ("w1", "w2", "w3", "w4", "w5", "alice", "bob"))
"""The session servers' worker accounts: members of the queues the suites create."""


async def set_affiliations(
    client: ClientXMPP, node: str, changes: Iterable[tuple[str, str]]
) -> None:
    """XEP-0060 §8.9.2 as the node's owner."""
    await client.plugin["xep_0060"].modify_affiliations(
        SERVICE, node, affiliations=list(changes), timeout=TIMEOUT
    )


async def create_queue(
    client: ClientXMPP,
    node: str | None = None,
    members: Iterable[str] = WORKER_ACCOUNTS,
    **config: Any,
) -> str:
    """A queue node; new queues are whitelisted, so its owner (*client*) makes the
    test's worker accounts members, as an operator would."""
    node_id = await create_node(client, node or unique("q"), queue=True, **config)
    rows = [(jid, "member") for jid in members if jid != client.boundjid.bare]
    if rows:
        await set_affiliations(client, node_id, rows)
    return node_id


async def publish(
    client: ClientXMPP,
    node: str,
    item_id: str | None = None,
    text: str = "payload",
    within: float = TIMEOUT,
) -> str:
    """Publish one item; returns the item id the service reports (§7.1.2)."""
    reply = await client.plugin["xep_0060"].publish(
        SERVICE, node, id=item_id, payload=payload(text), timeout=within
    )
    item = reply.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}publish/{{{PUBSUB}}}item")
    if item is not None and item.get("id"):
        return item.get("id", "")
    assert item_id is not None, f"publish result without an item id: {xml_of(reply)}"
    return item_id


def subscribe_queue_iq(
    client: ClientXMPP, node: str, queue_requests: Any, jid: str | None = None
) -> Iq:
    """§2.1's second example: subscribe with the options form in one request."""
    jid = jid or str(client.boundjid)
    stanza = iq(
        client,
        f"<pubsub xmlns='{PUBSUB}'><subscribe node='{_attr(node)}' jid='{_attr(jid)}'/></pubsub>",
    )
    options = ET.SubElement(
        stanza.xml.find(f"{{{PUBSUB}}}pubsub"), f"{{{PUBSUB}}}options", {"node": node, "jid": jid}
    )
    options.append(form_xml(SUBSCRIBE_OPTIONS, {"pubsub#queue_requests": queue_requests}))
    return stanza


async def subscribe_queue(
    client: ClientXMPP, node: str, queue_requests: int, jid: str | None = None
) -> str:
    """Subscribe as a worker (full JID by default, as docs/queueing.md advises).

    Returns the subid."""
    reply = await send(subscribe_queue_iq(client, node, queue_requests, jid))
    sub = reply.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}subscription")
    assert sub is not None and sub.get("subscription") == "subscribed", xml_of(reply)
    return sub.get("subid", "")


def retract_iq(
    client: ClientXMPP, node: str, item_id: str, itype: str = "set", notify: bool | None = None
) -> Iq:
    attrs = f" notify='{'true' if notify else 'false'}'" if notify is not None else ""
    return iq(
        client,
        f"<pubsub xmlns='{PUBSUB}'><retract node='{_attr(node)}'{attrs}>"
        f"<item id='{_attr(item_id)}'/></retract></pubsub>",
        itype,
    )


def unlock_iq(client: ClientXMPP, node: str, item_id: str, itype: str = "get") -> Iq:
    """XEP-0254 §2.4, as the spec's example sends it (type get)."""
    return iq(
        client,
        f"<pubsub xmlns='{PUBSUB}'><unlock xmlns='{QUEUEING}' node='{_attr(node)}'>"
        f"<item id='{_attr(item_id)}'/></unlock></pubsub>",
        itype,
    )


def extend_iq(client: ClientXMPP, node: str, item_id: str, seconds: int | None = None) -> Iq:
    """docs/queueing.md "Lock extension": ``<extend xmlns='urn:xmpp-queue:0'>``."""
    secs = f" seconds='{seconds}'" if seconds is not None else ""
    return iq(
        client,
        f"<pubsub xmlns='{PUBSUB}'><extend xmlns='{QUEUE_EXT}' node='{_attr(node)}'{secs}>"
        f"<item id='{_attr(item_id)}'/></extend></pubsub>",
    )


def _attr(value: str) -> str:
    return value.replace("&", "&amp;").replace("'", "&apos;").replace("<", "&lt;")


async def items(client: ClientXMPP, node: str, **kwargs: Any) -> Iq:
    return await client.plugin["xep_0060"].get_items(SERVICE, node, timeout=TIMEOUT, **kwargs)


async def send_presence_to_service(client: ClientXMPP) -> None:
    """Workers send directed presence so the component hears when they go (XEP-0254 §4)."""
    client.send_presence(pto=SERVICE)


# --- workers for load and durability ---------------------------------------------------


TRANSIENT = {
    "service-unavailable",
    "remote-server-not-found",
    "remote-server-timeout",
    "recipient-unavailable",
    "internal-server-error",
}
ABSENT_COMPONENT = "Access denied by service policy"
"""ejabberd's text with ``forbidden`` for a component domain nobody serves right now
(a take-over in progress); the service itself never words a refusal so."""


def is_transient(exc: IqError) -> bool:
    """An error after which the same request may well succeed: the service away."""
    info = error_info(exc.iq)
    return info.condition in TRANSIENT or (
        info.condition == "forbidden" and info.pubsub is None and ABSENT_COMPONENT in info.xml
    )


class QueueWorker:
    """A worker that holds each item for a short random "work" time, then acks it.

    It checks the one invariant only a worker can see: it never holds more items
    (notified, ack not yet sent) than its ``queue_requests``. Counting stops at
    the moment the ack is *sent*: the service cannot hand out the replacement
    before it has read that ack, so the count is exact and never lenient.
    """

    def __init__(
        self,
        client: ClientXMPP,
        node: str,
        limit: int,
        work_time: tuple[float, float] = (0.0, 0.01),
        name: str = "",
    ) -> None:
        self.client = client
        self.node = node
        self.limit = limit
        self.work_time = work_time
        self.name = name or str(client.boundjid)
        self.inbox = Inbox(client)
        self.held: set[str] = set()
        self.max_held = 0
        self.over_limit: list[tuple[str, set[str]]] = []
        self.deliveries: Counter[str] = Counter()
        self.last_delivered_at: dict[str, float] = {}  # time.monotonic() of the last delivery
        self.acked: list[str] = []  # ack results (the service confirmed the delete)
        self.ack_refused: list[tuple[str, str]] = []  # (item, condition) when the lock had moved on
        self.unlocked: list[str] = []  # unlock notifications (timeouts, departures)
        self.unacked: set[str] = set()  # acks that failed transiently: retry them
        self.uncertain: set[str] = set()  # acks that got no answer: committed or not?
        self.gone_on_retry: list[str] = []  # uncertain acks whose retry found no item
        self.frozen = False  # a hung worker: holds what it has, acks nothing more
        self.taken: dict[str, str] = {}  # item -> the delivery attempt taken last
        self.resent_ignored: list[str] = []  # re-sent notices of deliveries already taken
        self._tasks: set[asyncio.Task[None]] = set()
        self.inbox.listen(self._on_event)

    async def start(self) -> None:
        """Directed presence (so the service hears when we go), then subscribe."""
        await send_presence_to_service(self.client)
        await subscribe_queue(self.client, self.node, self.limit)

    def _on_event(self, event: Event) -> None:
        if event.node != self.node:
            return
        if event.kind == "unlock" and event.item_id:
            self.unlocked.append(event.item_id)
            self.held.discard(event.item_id)
        if event.kind != "item" or not event.item_id:
            return
        item_id = event.item_id
        if self.repeats(event):
            self.resent_ignored.append(item_id)
            return
        self.taken[item_id] = event.headers.get("delivery-attempt", "")
        self.deliveries[item_id] += 1
        self.last_delivered_at[item_id] = event.received_at
        self.held.add(item_id)
        self.max_held = max(self.max_held, len(self.held))
        if len(self.held) > self.limit:
            self.over_limit.append((item_id, set(self.held)))
        task = asyncio.get_running_loop().create_task(self._work(item_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def repeats(self, event: Event) -> bool:
        """A notice the service sent again after a restart (``delivery-resent``) for the
        delivery this worker took last: not new work (as the client library judges)."""
        return (
            "delivery-resent" in event.headers
            and event.item_id in self.taken
            and self.taken[event.item_id] == event.headers.get("delivery-attempt", "")
        )

    async def _work(self, item_id: str) -> None:
        await asyncio.sleep(random.uniform(*self.work_time))  # simulated work
        if self.frozen:
            return
        self.held.discard(item_id)
        await self.ack(item_id)

    async def ack(self, item_id: str, within: float = 5.0) -> None:
        try:
            await send(retract_iq(self.client, self.node, item_id), within)
        except IqError as exc:
            condition = error_info(exc.iq).condition
            if is_transient(exc):
                self.unacked.add(item_id)
            elif condition == "item-not-found" and item_id in self.uncertain:
                self.gone_on_retry.append(item_id)
            else:
                self.ack_refused.append((item_id, condition))
        except IqTimeout:
            self.unacked.add(item_id)
            self.uncertain.add(item_id)
        else:
            self.acked.append(item_id)

    async def retry_acks(self) -> None:
        pending, self.unacked = self.unacked, set()
        await asyncio.gather(*(self.ack(item_id) for item_id in pending))

    async def drain(self) -> None:
        """Wait for the work in hand to finish (acks sent and answered)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()


def assert_acked_exactly_once(workers: Iterable[QueueWorker], published: Iterable[str]) -> None:
    acks = Counter(i for w in workers for i in w.acked)
    expected = set(published)
    doubles = {i: n for i, n in acks.items() if n > 1}
    missing = expected - set(acks)
    extra = set(acks) - expected
    assert not doubles, f"items acked more than once: {sorted(doubles.items())[:10]}"
    assert not missing, f"{len(missing)} items never acked, e.g. {sorted(missing)[:10]}"
    assert not extra, f"acks of items never published: {sorted(extra)[:10]}"


async def wait_until(
    condition: Callable[[], bool], within: float, what: str, poll: float = 0.05
) -> None:
    """Poll a test-side condition (counters fed by events) until it holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(poll)


# --- a component and clients per test module ----------------------------------------------


def module_component(
    make_component: Callable[..., Any], server: Any, workdir: Any, **options: Any
) -> Any:
    """Migrate and start one component (SQLite in *workdir*) for a whole test module.

    The suites share one service per module (unique node ids keep tests apart); a
    module fixture parametrised over the servers starts one per server.
    """
    proc = make_component(server, f"sqlite:///{workdir / 'queue.sqlite'}", workdir, **options)
    proc.migrate()
    proc.start()
    return proc


class ClientPool:
    """Logged-in clients kept for a whole test module (one per user, made on first use).

    Building a slixmpp client with its plugins costs a quarter of a second on this
    machine, more than most of these tests; a module of small protocol tests
    reuses them (on a module-scoped event loop). Tests stay apart by their unique
    node ids, and every notification predicate names its node. ``fresh=True``
    gives a client of its own (for tests that disconnect it).
    """

    def __init__(
        self,
        server: Any,
        new_client: Callable[..., ClientXMPP],
        login: Callable[..., Awaitable[ClientXMPP]],
        logout: Callable[[ClientXMPP], Awaitable[None]],
    ) -> None:
        self.server = server
        self._new_client = new_client
        self._login = login
        self._logout = logout
        self._shared: dict[str, ClientXMPP] = {}
        self._all: list[ClientXMPP] = []

    async def get(
        self, user: str, *, fresh: bool = False, resource: str | None = None
    ) -> ClientXMPP:
        if not fresh and resource is None and user in self._shared:
            return self._shared[user]
        client = self._new_client(user, resource=resource, domain=self.server.domain)
        self._all.append(client)
        await self._login(client, self.server)
        if not fresh and resource is None:
            self._shared[user] = client
        return client

    async def close(self) -> None:
        await asyncio.gather(*(self._logout(c) for c in self._all), return_exceptions=True)


# --- publishing at speed, and the ledger ---------------------------------------------------


class Publisher:
    """Publishes a list of items with a window of outstanding IQs.

    With ``retry`` (the durability test) a publish that fails because the service
    is away (the server answers for a component that is not connected) or that
    gets no answer is sent again with the same item id, after a short back-off:
    re-publishing an id replaces the item and keeps its place (docs/queueing.md),
    so a retry never doubles work.
    """

    def __init__(
        self, client: ClientXMPP, node: str, window: int = 16, retry: bool = False
    ) -> None:
        self.client = client
        self.node = node
        self.window = window
        self.retry = retry
        self.confirmed: list[str] = []
        self.retries = 0
        self.uncertain: set[str] = set()  # a publish got no answer: it may have committed

    async def _one(self, item_id: str, gate: asyncio.Semaphore) -> None:
        async with gate:
            while True:
                try:
                    await publish(self.client, self.node, item_id, f"work {item_id}", within=5.0)
                except (IqError, IqTimeout) as exc:
                    transient = isinstance(exc, IqTimeout) or is_transient(exc)
                    if not (self.retry and transient):
                        raise
                    if isinstance(exc, IqTimeout):
                        self.uncertain.add(item_id)
                    self.retries += 1
                    await asyncio.sleep(0.2)  # back-off while the service is away
                else:
                    self.confirmed.append(item_id)
                    return

    async def run(self, item_ids: Iterable[str]) -> None:
        gate = asyncio.Semaphore(self.window)
        await asyncio.gather(*(self._one(i, gate) for i in item_ids))


def async_database_url(url: str) -> str:
    """conftest's URLs name no driver; the component uses aiosqlite and asyncpg."""
    scheme, sep, rest = url.partition("://")
    if "+" in scheme:
        return url
    driver = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}[scheme]
    return f"{driver}{sep}{rest}"


async def ledger_events(database_url: str, node: str) -> list[tuple[str, str, str | None]]:
    """(kind, item id, subscriber) of every ledger row of *node*, in order.

    The ledger (issue 3 item 8) is written in the same transaction as each change,
    so it is the service's own record of what happened to every item: the one
    place that can tell whether an ack whose reply was lost in a crash committed.
    """
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    from xmpp_queue import ledger_names as L

    engine = create_async_engine(async_database_url(database_url))
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                text(
                    f"SELECT {L.KIND}, {L.ITEM_ID}, {L.SUBSCRIBER} FROM {L.TABLE} "
                    f"WHERE {L.NODE} = :node ORDER BY {L.ID}"
                ),
                {"node": node},
            )
            return [(str(k), str(i), s) for k, i, s in rows]
    finally:
        await engine.dispose()
