"""Runs one pubsub IQ through the request table and hands the answer on.

Why apart from the table: the router is where every request's failure becomes
a mapped error reply (never slixmpp's default), where the answer's size is
checked against the stream's limit, and where an owner's authorization form
(XEP-0060 §8.6) is applied; the table only says which handler a request gets.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from collections.abc import Awaitable, Callable
from functools import lru_cache

from slixmpp import Iq, Message

from xmpp_queue.core.effects import Effect
from xmpp_queue.core.errors import BadRequest, InvalidPayload, PubSubError
from xmpp_queue.core.model import Actor, SubscriptionState
from xmpp_queue.core.service import PubSubService
from xmpp_queue.settings import DEFAULT_MAX_STANZA_SIZE
from xmpp_queue.xmpp import errors, forms, wire_size
from xmpp_queue.xmpp import requests as rq
from xmpp_queue.xmpp.handlers import locate, route_for
from xmpp_queue.xmpp.iq_request import IqRequest
from xmpp_queue.xmpp.redirect import NodeElsewhere, PlacementGuard, redirect_reply
from xmpp_queue.xmpp.refusals import REFUSALS

log = logging.getLogger("xmpp_queue.xmpp.handlers")


@lru_cache(maxsize=4096)
def sender_jid(value: str) -> str:
    """The requester's full JID, normalised as slixmpp would (``iq["from"].full``).

    Cached: a queue's traffic comes from a few publishers and workers, and JID
    normalisation (stringprep) is the costliest step of reading a request.
    """
    return rq.normalise_jid(value) if value else ""


SendAnswer = Callable[[Iq | str | None, tuple[Effect, ...]], Awaitable[None]]
"""Sends a reply (if any) and then the effects, in order: the component's send_outcome."""


class RequestRouter:
    """Runs one pubsub IQ through the table and hands the answer to the component.

    Refusals and failures are answered here through ``errors`` (never by slixmpp's
    default handler), so nothing a client sends can produce an unmapped reply.
    """

    def __init__(
        self,
        service: PubSubService,
        send_answer: SendAnswer,
        stanza_of: Callable[[ET.Element], Iq] = lambda xml: Iq(xml=xml),
        max_stanza_size: int = DEFAULT_MAX_STANZA_SIZE,
    ) -> None:
        self.service = service
        self.send_answer = send_answer
        self.stanza_of = stanza_of  # the component's stanza factory (its own Iq class)
        self.max_stanza_size = max_stanza_size
        # A shard of a sharded deployment: nodes of other shards are redirected.
        self.guard: PlacementGuard | None = None

    async def handle(self, iq: Iq) -> None:
        """A request slixmpp already built into a stanza (its handler path)."""
        await self.handle_element(iq.xml, iq)

    async def handle_element(self, xml: ET.Element, iq: Iq | None = None) -> None:
        """A request straight from the stream parser; slixmpp's stanza object is built
        only for handlers that render with it, and for error replies."""
        if xml.get("type") not in ("get", "set"):
            return  # results and errors addressed to us need no answer
        request = IqRequest(xml, self.stanza_of, iq, self.max_stanza_size)
        verb = ""
        try:
            container, element, key = locate(xml)
            verb = key[2]
            route = route_for(key)
            guard, node = self.guard, element.get("node")
            if guard is not None and node and not guard.holds(node):
                await guard.check(verb, node)
            actor = Actor(sender_jid(xml.get("from", "")))
            answer = await route.handler(self.service, request, actor, container, element)
            reply = answer.reply
            if not isinstance(reply, str):
                reply = wire_size.stanza_text(reply)
            wire_size.check_answer(reply, self.max_stanza_size)
        except NodeElsewhere as where:  # another shard's node: send the client there
            await self.send_answer(redirect_reply(xml, where), ())
            return
        except Exception as exc:  # every failure gets a mapped reply
            if await self._moved_meanwhile(verb, xml):
                return
            error = errors.reply_for_exception(request.stanza, exc, verb)
            # A change the core committed still has its notices to send.
            effects = answer.effects if isinstance(exc, errors.AnswerTooBig) else ()
            await self.send_answer(error, effects)
            return
        await self.send_answer(reply, answer.effects)

    async def _moved_meanwhile(self, verb: str, xml: ET.Element) -> bool:
        """A request that passed the guard and then failed because its node left this
        shard while it waited (a move, docs/scaling.md): answered with the redirect to
        the node's new shard, so the client sends it there. True if it was."""
        guard = self.guard
        if guard is None or verb in ("", "create"):
            return False
        try:
            _, element, _ = locate(xml)
            node = element.get("node")
            if not node or guard.holds(node):
                return False
            await guard.check(verb, node)
        except NodeElsewhere as where:
            await self.send_answer(redirect_reply(xml, where), ())
            return True
        except Exception:  # the placement is unreadable: the original error stands
            return False
        return False

    async def refuse_too_deep(self, xml: ET.Element) -> None:
        """A stanza nested deeper than ``requests.MAX_DEPTH``: an IQ request gets
        bad-request (with invalid-payload for a publish), anything else is dropped.

        The reply is built from the stanza without its children: copying or
        serialising the deep tree is what would fail (Python's recursion limit)."""
        if xml.tag.rsplit("}", 1)[-1] != "iq" or xml.get("type") not in ("get", "set"):
            sender = xml.get("from", "")
            REFUSALS.note(
                sender,
                "event=stanza_dropped reason=too_deep from=%s",
                sender,
                condition="bad-request",
            )
            return
        verb = ""
        try:
            verb = locate(xml)[2][2]
        except Exception:
            pass  # not a pubsub request: plain bad-request
        text = f"nested deeper than {rq.MAX_DEPTH} elements"
        exc: PubSubError = InvalidPayload(text) if verb == "publish" else BadRequest(text)
        shallow = ET.Element(xml.tag, dict(xml.attrib))
        await self.send_answer(errors.reply_for_exception(self.stanza_of(shallow), exc, verb), ())

    async def handle_authorization(self, msg: Message) -> None:
        """XEP-0060 §8.6: an owner's answer to a subscription authorization form."""
        x = forms.find_form(msg.xml)
        if x is None:
            return
        form = forms.read_form(x)
        if form.form_type != forms.SUBSCRIBE_AUTHORIZATION_FORM or form.type != "submit":
            return
        values = {k: (v[0] if v else "") for k, v in form.values.items()}
        allow = values.get("pubsub#allow", "").lower() in ("1", "true")
        state = SubscriptionState.SUBSCRIBED if allow else SubscriptionState.NONE
        try:
            jid = rq.normalise_jid(values.get("pubsub#subscriber_jid", ""))
            change = (jid, state, values.get("pubsub#subid") or None)
            out = await self.service.set_node_subscriptions(
                Actor(msg["from"].full), values.get("pubsub#node", ""), [change]
            )
        except PubSubError as exc:
            row = errors.row_for(exc)
            REFUSALS.note(
                msg["from"].full,
                "event=authorization_refused from=%s error=%s text=%r",
                msg["from"],
                type(exc).__name__,
                str(exc),
                condition=row.condition if row is not None else "bad-request",
            )
            return
        except Exception:
            log.exception("event=authorization_failed from=%s", msg["from"])
            return
        await self.send_answer(None, out.effects)
