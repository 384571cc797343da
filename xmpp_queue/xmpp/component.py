"""QueueComponent: the XEP-0114 component that serves pubsub and queues.

It is one sink of the outbox plus a source of requests (docs/architecture.md):
it owns the slixmpp plugins (disco, forms, pubsub stanzas, RSM, SHIM, ad-hoc
commands for the admin helper), the request table (``router.RequestRouter``),
disco from the core, what it sees of workers (directed presence and bounced
notifications, reported to the presence tracker of ``runtime``), the delivery of
the effects the outbox routes to it (:meth:`deliver`). Staying connected (the
reconnect policy, :meth:`run` and :meth:`stop`) is its base class's job
(``reconnect.ReconnectingComponent``); the deadline timer is not here
(``runtime/scheduler.py``).

Every outgoing answer goes through :meth:`send_outcome`: the reply first, then
the notifications, in order, through the outbox, which hands those for XMPP
subscribers back to :meth:`deliver` in the same call (docs/architecture.md: commit
first, then send effects; the core hands effects out only after commit). Writes are
coalesced per event-loop tick (``transport.CoalescingTransport``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, cast

from slixmpp import JID, Iq, Message, Presence
from slixmpp.xmlstream import StanzaBase
from slixmpp.xmlstream.handler import CoroutineCallback
from slixmpp.xmlstream.matcher import MatchXPath, StanzaPath
from slixmpp.xmlstream.matcher.base import MatcherBase

from xmpp_queue.core.effects import Effect, ItemNotice, Outcome
from xmpp_queue.core.model import Actor
from xmpp_queue.core.service import PubSubService
from xmpp_queue.core.service_access import ServiceAccessDenied
from xmpp_queue.runtime.outbox import Outbox
from xmpp_queue.runtime.presence import PresenceTracker, SubscriberRelease
from xmpp_queue.settings import DEFAULT_MAX_STANZA_SIZE
from xmpp_queue.slixmpp_seam import install_handshake_redaction
from xmpp_queue.xmpp import render, stanzas, text_render, wire_size
from xmpp_queue.xmpp.disco import DiscoProvider
from xmpp_queue.xmpp.reconnect import ReconnectingComponent
from xmpp_queue.xmpp.requests import MAX_DEPTH
from xmpp_queue.xmpp.router import RequestRouter
from xmpp_queue.xmpp.transport import CoalescingTransport

log = logging.getLogger("xmpp_queue.xmpp.component")
install_handshake_redaction()  # no handshake digest in a DEBUG log (slixmpp_seam)

# Children that make a get/set IQ ours alone (see QueueComponent.take_raw).
_PUBSUB_CHILDREN = frozenset(
    {
        "{http://jabber.org/protocol/pubsub}pubsub",
        "{http://jabber.org/protocol/pubsub#owner}pubsub",
    }
)

COMMANDS = "http://jabber.org/protocol/commands"

PLUGINS = (
    "xep_0030",  # service discovery
    "xep_0004",  # data forms
    "xep_0059",  # result set management
    "xep_0060",  # pubsub stanza classes (its client-side handlers stay idle)
    "xep_0131",  # SHIM headers (SubID, dead-letter origin)
    "xep_0050",  # ad-hoc commands: the admin helper adds its commands here
)


class ServiceIq(Iq):
    """RFC 6120 §8.4: an IQ get/set nobody handles is service-unavailable.

    slixmpp's own ``Iq.unhandled`` answers feature-not-implemented; registered as
    the component's root IQ class so this applies only to this stream.
    """

    def unhandled(self) -> None:
        if self["type"] in ("get", "set"):
            reply = self.reply()
            reply["error"]["type"] = "cancel"
            reply["error"]["condition"] = "service-unavailable"
            reply.send()


def _stanza_error(stanza: StanzaBase) -> tuple[str, str]:
    """(type, condition) of a received error stanza.

    Read from the XML: in a component stream the ``<error/>`` child is in the
    component namespace, where slixmpp's ``stanza['error']`` (jabber:client) does
    not find it and would report its default type, cancel.
    """
    for child in stanza.xml:
        if child.tag.rsplit("}", 1)[-1] == "error":
            conditions = (
                c.tag.rsplit("}", 1)[-1]
                for c in child
                if c.tag.startswith(f"{{{stanzas.STANZAS}}}") and not c.tag.endswith("}text")
            )
            return child.get("type", ""), next(conditions, "")
    return "", ""


class QueueComponent(ReconnectingComponent):
    transport_wrapper = CoalescingTransport  # one socket write per loop tick

    def __init__(
        self,
        jid: str,
        secret: str,
        server_host: str,
        server_port: int,
        service: PubSubService,
        *,
        name: str = "xmpp-queue",
        max_stanza_size: int = DEFAULT_MAX_STANZA_SIZE,
        outbox: Outbox | None = None,
        workers: PresenceTracker | None = None,
    ) -> None:
        """*outbox* and *workers* come from the composition root (``app``), which
        makes this component the outbox's default sink; a component built without
        them (tests) gets an outbox of its own, with itself as the sink."""
        super().__init__(jid, secret, server_host, server_port)
        self.max_stanza_size = max_stanza_size  # nothing larger is written (wire_size)
        self.enable_direct_tls = False  # XEP-0114 is a plain TCP stream
        self.service = service
        self.outbox = outbox if outbox is not None else Outbox(default=self)
        self.remove_stanza(Iq)
        self.register_stanza(ServiceIq)
        for plugin in PLUGINS:
            self.register_plugin(plugin)
        stanzas.register()

        self.requests = RequestRouter(
            service,
            self.send_outcome,
            stanza_of=self._iq_of,
            max_stanza_size=max_stanza_size,
        )
        self._iq_tag = f"{{{self.default_ns}}}iq"
        self._request_tasks: set[asyncio.Task[None]] = set()
        self.disco_provider = DiscoProvider(self, service, name)
        self.disco_provider.register()
        if workers is None:
            workers = PresenceTracker(SubscriberRelease(service, self.outbox))
        self.workers = workers

        ns = self.default_ns
        for label, path in (("pubsub", "iq/pubsub"), ("pubsub owner", "iq/pubsub_owner")):
            self._handle(label, StanzaPath(path), self.requests.handle)
        self._handle(
            "pubsub authorization",
            MatchXPath(f"{{{ns}}}message/{{{stanzas.DATA_FORMS}}}x"),
            self.requests.handle_authorization,
        )
        self._handle("bounces", StanzaPath("message@type=error"), self._on_bounce)
        self._handle("worker presence", MatchXPath(f"{{{ns}}}presence"), self._on_presence)
        self.add_event_handler("session_bind", self._relist_commands)
        self._watch_session()  # session_start, stream_error, connection_failed, disconnected

    def take_raw(self, xml: Any) -> bool:
        """Pubsub IQs (the per-item traffic) go straight to the request router.

        slixmpp matches every incoming stanza against every handler its plugins
        registered; for the publish/retract stream that matching was the largest
        CPU cost per item. A get or set IQ whose child is a pubsub element has one
        handler, ours, so its element is handed over directly (the router builds
        a stanza object only for the routes that use one); every other stanza takes
        slixmpp's usual path (``slixmpp_seam``: the hook behind ``_spawn_event``).
        """
        if wire_size.element_depth_exceeds(xml, MAX_DEPTH):
            self._spawn(self.requests.refuse_too_deep(xml))
            return True
        if (
            xml.tag == self._iq_tag
            and xml.get("type") in ("get", "set")
            and len(xml) == 1
            and xml[0].tag in _PUBSUB_CHILDREN
        ):
            self._spawn(self.requests.handle_element(xml))
            return True
        return False

    def _iq_of(self, xml: Any) -> Iq:
        """The router's stanza factory: only pubsub IQs reach it (``take_raw``)."""
        return cast(Iq, self.stanza_of(xml))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = self.loop.create_task(work)
        self._request_tasks.add(task)
        task.add_done_callback(self._request_tasks.discard)

    def _handle(
        self, name: str, matcher: MatcherBase, handler: Callable[[Any], Awaitable[None]]
    ) -> None:
        self.register_handler(CoroutineCallback(name, matcher, handler))

    def _relist_commands(self, _: Any) -> None:
        """slixmpp's xep_0050 empties the disco list of ad-hoc commands at every
        session_bind (every reconnect) while keeping the commands themselves; list
        the registered commands again so admins can discover them."""
        disco = self.plugin["xep_0030"]
        for (jid, node), (name, *_rest) in self.plugin["xep_0050"].commands.items():
            disco.add_item(jid=jid, name=name, node=COMMANDS, subnode=node or "", ijid=JID(jid))

    # --- sending -----------------------------------------------------------------------

    async def send_outcome(
        self, reply: StanzaBase | str | None, effects: Outcome[Any] | Sequence[Effect] = ()
    ) -> None:
        """Send *reply* (if any), then hand the effects to the outbox, in order.

        Synchronous on purpose: outcomes leave in the order they reach this method
        (the order the core committed them), the outbox hands this component its
        effects within the same call (:meth:`deliver`), and a burst written within
        one loop tick leaves as one socket write (``transport``).
        """
        if isinstance(effects, Outcome):
            effects = effects.effects
        if reply is not None:
            try:
                if isinstance(reply, str):
                    self._send_text(reply)  # the per-item answers come as text
                else:
                    reply.send()
            except Exception:
                log.exception("event=send_failed what=reply")
        if effects:
            self.outbox.send(effects)

    def deliver(self, effects: Sequence[Effect]) -> None:
        """The outbox's XMPP sink: one message per effect, in order. The message
        type (the node's ``pubsub#notification_type``) is carried by the effect. A
        failure to render is logged; it cannot undo a committed change."""
        try:
            sender = self.boundjid.full
            for effect in effects:
                if isinstance(effect, ItemNotice):
                    for part in wire_size.split_item_notice(effect, sender, self.max_stanza_size):
                        self._send_effect(part, sender)
                else:
                    self._send_effect(effect, sender)
        except Exception:
            log.exception("event=send_failed effects=%d", len(effects))

    def _send_effect(self, effect: Effect, sender: str) -> None:
        """One notice as text, under the stanza limit: a one-item notice still too
        large goes without its payload (``wire_size``)."""
        text = self._notice_text(effect, sender)
        if wire_size.utf8_size(text) > self.max_stanza_size and isinstance(effect, ItemNotice):
            text = self._notice_text(wire_size.without_payload(effect), sender)
        self._send_text(text)

    def _notice_text(self, effect: Effect, sender: str) -> str:
        """Each kind of notice has one renderer: the per-item kinds (items, retract,
        unlock) are written as text, the occasional ones built as stanzas."""
        msg_id = render.NOTIFICATION_ID_PREFIX + self.new_id()
        text = text_render.notice_text(effect, sender, msg_id)
        if text is None:
            return wire_size.stanza_text(render.notification(self, effect, sender, msg_id))
        return text

    def may_write(self, data: str | bytes) -> bool:
        """The last guard: nothing over ``max_stanza_size`` reaches the socket in a
        running session, since the server would close the stream for it (the paths
        above cut, split or refuse first; this drops and logs what they missed)."""
        size = len(data) if isinstance(data, bytes) else wire_size.utf8_size(data)
        if size > self.max_stanza_size:
            log.error(
                "event=stanza_dropped reason=too_big bytes=%d limit=%d head=%r",
                size,
                self.max_stanza_size,
                data[:120],
            )
            return False
        return True

    def _send_text(self, text: str) -> None:
        """Per-item text, written at once when nothing waits in slixmpp's send queue.

        ``send`` puts each stanza on a queue that a task drains; at thousands of
        stanzas a second that hand-over (queue, task wake-up) was a measurable share
        of the CPU. With the queue empty everything sent before is already written
        (the drain task takes an entry and writes it without yielding), so writing
        now keeps the order; otherwise the text queues behind what is waiting.
        """
        if self.send_queue_idle():
            self.send_raw(text)
        else:
            self.send(text)

    # --- workers coming and going -------------------------------------------------------

    async def _on_presence(self, pres: Presence) -> None:
        kind = pres.xml.get("type")
        sender = pres["from"].full
        if not sender:
            return
        try:
            self.service.admit(Actor(sender))
        except ServiceAccessDenied:
            return  # a stranger's presence is neither tracked nor answered
        if kind is None:
            if self.workers.available(sender):
                self.make_presence(pto=sender, pfrom=pres["to"].full or self.boundjid.full).send()
        elif kind == "unavailable":
            await self.workers.gone(sender, "unavailable")

    async def _on_bounce(self, msg: Message) -> None:
        """XEP-0060 §13.4: a notification came back as an error."""
        if not msg["id"].startswith(render.NOTIFICATION_ID_PREFIX):
            return
        etype, condition = _stanza_error(msg)
        if etype == "cancel" or condition == "gone":
            await self.workers.gone(msg["from"].full, "bounce")
        else:
            log.info(
                "event=notification_bounced jid=%s type=%s condition=%s action=none",
                msg["from"],
                etype,
                condition,
            )
