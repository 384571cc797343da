"""The request table: (iq type, namespace, element) -> one short handler.

Like wokkel's ``_requestVerbMap`` and Prosody's ``handlers[type.."_"..name]``:
every handler parses its request (``requests``), calls ONE service method and
renders the result (``render``); if a handler grows past a few lines, logic is
leaking out of the core. The table also says which disco features each entry
implements, so ``disco`` advertises exactly what is routed here.

XEP-0254's examples send retract and unlock as ``type='get'``; both types are
accepted for them (docs/queueing.md). A known element with the wrong IQ type is
bad-request; an element the service does not know is feature-not-implemented.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import lru_cache

from slixmpp import Iq, Message

from xmpp_queue.core.effects import Effect
from xmpp_queue.core.errors import BadRequest, InvalidPayload, PubSubError
from xmpp_queue.core.model import Actor, SubscriptionState
from xmpp_queue.core.node_config import parse_subscribe_options
from xmpp_queue.core.service import PubSubService
from xmpp_queue.settings import DEFAULT_MAX_STANZA_SIZE
from xmpp_queue.xmpp import errors, forms, render, wire_size
from xmpp_queue.xmpp import requests as rq
from xmpp_queue.xmpp.stanzas import (
    PUBSUB,
    PUBSUB_OWNER,
    QUEUE_EXT,
    QUEUEING,
    RSM,
    pubsub_feature,
)

log = logging.getLogger("xmpp_queue.xmpp.handlers")


@dataclass(frozen=True, slots=True)
class Answer:
    """What a handler produced: the IQ reply, then the notifications to send.

    The per-item answers (publish, retract, unlock) come as text, like the queue
    notices (``render.notice_text``): they are sent for every work item.
    """

    reply: Iq | str
    effects: tuple[Effect, ...] = ()


class IqRequest:
    """A request IQ: its element, and slixmpp's stanza object only when asked for.

    The per-item requests (publish, retract, unlock) are read and answered from the
    element alone: building slixmpp's ``Iq`` for them (plugin objects, language
    lookups, dictionary-style field access) cost more CPU than handling the
    request. Handlers that render with slixmpp take :attr:`stanza`, built once.
    """

    __slots__ = ("_build", "_stanza", "max_bytes", "xml")

    def __init__(
        self,
        xml: ET.Element,
        build: Callable[[ET.Element], Iq],
        stanza: Iq | None = None,
        max_bytes: int = DEFAULT_MAX_STANZA_SIZE,
    ) -> None:
        self.xml = xml
        self._build = build
        self._stanza = stanza
        self.max_bytes = max_bytes  # the largest answer the stream takes (wire_size)

    @property
    def stanza(self) -> Iq:
        if self._stanza is None:
            self._stanza = self._build(self.xml)
        return self._stanza


Handler = Callable[[PubSubService, IqRequest, Actor, ET.Element, ET.Element], Awaitable[Answer]]


# --- owner (§8) ----------------------------------------------------------------------


async def on_create(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_create(ps, el)
    out = await svc.create_node(actor, req.node, req.config)
    return Answer(render.create_result(iq.stanza, out.value, instant=req.node is None), out.effects)


async def on_configure_get(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_node(ps, el)
    config = await svc.get_config(actor, req.node)
    form = forms.node_config_form(config)
    return Answer(render.form_result(iq.stanza, PUBSUB_OWNER, "configure", form, node=req.node))


async def on_configure_set(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_configure_set(ps, el)
    if req.cancel:  # §8.2.6: the owner cancelled; nothing changes
        return Answer(render.empty_result(iq.stanza))
    out = await svc.configure_node(actor, req.node, req.values)
    return Answer(render.empty_result(iq.stanza), out.effects)


async def on_default_config(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    form = forms.node_config_form(svc.default_config(actor))
    return Answer(render.form_result(iq.stanza, PUBSUB_OWNER, "default", form))


async def on_delete(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_delete(ps, el)
    out = await svc.delete_node(actor, req.node, req.redirect)
    return Answer(render.empty_result(iq.stanza), out.effects)


async def on_purge(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    out = await svc.purge_node(actor, rq.parse_node(ps, el).node)
    return Answer(render.empty_result(iq.stanza), out.effects)


async def on_node_subscriptions_get(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    node = rq.parse_node(ps, el).node
    subs = await svc.get_node_subscriptions(actor, node)
    return Answer(render.node_subscriptions_result(iq.stanza, node, subs))


async def on_node_subscriptions_set(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_node_subscriptions_set(ps, el)
    out = await svc.set_node_subscriptions(actor, req.node, req.changes)
    return Answer(render.empty_result(iq.stanza), out.effects)


async def on_node_affiliations_get(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    node = rq.parse_node(ps, el).node
    entries = await svc.get_node_affiliations(actor, node)
    return Answer(render.node_affiliations_result(iq.stanza, node, entries))


async def on_node_affiliations_set(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_node_affiliations_set(ps, el)
    out = await svc.set_node_affiliations(actor, req.node, req.changes)
    return Answer(render.empty_result(iq.stanza), out.effects)


# --- publisher (§7) -----------------------------------------------------------------


async def on_publish(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_publish(ps, el)
    out = await svc.publish_items(actor, req.node, req.items, req.publish_options)
    return Answer(render.publish_result_text(iq, req.node, out.value), out.effects)


async def on_retract(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_retract(ps, el)
    out = await svc.retract(actor, req.node, req.item_ids, req.notify)
    return Answer(render.empty_result_text(iq), out.effects)


# --- subscriber (§6) ----------------------------------------------------------------


async def on_subscribe(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_subscribe(ps, el)
    out = await svc.subscribe(actor, req.node, req.jid, req.options)
    sub = out.value
    # XEP-0254 §2.1 (and §6.3.7 subscribe-and-configure): echo the options in force.
    echo = req.options is not None or sub.queue_requests is not None
    options = parse_subscribe_options(sub.options) if echo else None
    return Answer(render.subscription_result(iq.stanza, sub, options), out.effects)


async def on_unsubscribe(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_subscription(ps, el)
    out = await svc.unsubscribe(actor, req.node, req.jid, req.subid)
    # §6.2.2: the result carries the subscription, now state none.
    return Answer(render.subscription_result(iq.stanza, out.value, None), out.effects)


async def on_options_get(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_subscription(ps, el)
    sub, options = await svc.get_subscription_options(actor, req.node, req.jid, req.subid)
    form = forms.subscribe_options_form(options, queue=sub.queue_requests is not None)
    reply = render.form_result(
        iq.stanza, PUBSUB, "options", form, node=req.node, jid=req.jid, subid=sub.subid
    )
    return Answer(reply)


async def on_options_set(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_options_set(ps, el)
    out = await svc.set_subscription_options(actor, req.node, req.jid, req.subid, req.values)
    return Answer(render.empty_result(iq.stanza), out.effects)


async def on_default_options(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_default_options(ps, el)
    queue = req.node is not None and (await svc.get_node(actor, req.node)).config.queue
    form = forms.subscribe_options_form(svc.default_subscribe_options(actor, queue), queue)
    return Answer(render.form_result(iq.stanza, PUBSUB, "default", form, node=req.node))


async def on_items(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_items(ps, el)
    page = await svc.get_items(actor, req.node, req.item_ids, req.max_items, req.page, req.subid)
    return Answer(wire_size.items_reply_text(iq.stanza, req.node, page, iq.max_bytes))


async def on_subscriptions(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    node = rq.parse_optional_node(ps, el).node
    subs = await svc.own_subscriptions(actor, node)
    return Answer(render.subscriptions_result(iq.stanza, subs, node))


async def on_affiliations(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    node = rq.parse_optional_node(ps, el).node
    entries = await svc.own_affiliations(actor, node)
    return Answer(render.affiliations_result(iq.stanza, entries, node))


# --- queue (XEP-0254 and our extension) -----------------------------------------------


async def on_unlock(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_lock(ps, el)
    out = await svc.unlock(actor, req.node, req.item_id)
    return Answer(render.empty_result_text(iq), out.effects)


async def on_extend(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_lock(ps, el)
    out = await svc.extend_lock(actor, req.node, req.item_id, req.seconds)
    return Answer(render.extend_result(iq.stanza, req.node, req.item_id, out.value), out.effects)


async def on_unlock_later(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_batch_unlock(ps, el)
    out = await svc.unlock(actor, req.node, req.item_ids, req.delay or 0, req.reasons)
    return Answer(render.empty_result_text(iq), out.effects)


async def on_dead_letter(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_lock(ps, el)
    out = await svc.dead_letter_now(actor, req.node, req.item_id, req.reason)
    return Answer(render.empty_result_text(iq), out.effects)


# --- the table -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Route:
    """One table entry: the handler and the disco features it implements."""

    handler: Handler
    features: tuple[str, ...] = ()


def _pubsub(*names: str) -> tuple[str, ...]:
    return tuple(pubsub_feature(n) for n in names)


_RETRACT = Route(on_retract, _pubsub("delete-items", "retract-items"))
_UNLOCK = Route(on_unlock, (QUEUEING,))
_OPTIONS = _pubsub("subscription-options")

ROUTES: dict[tuple[str, str, str], Route] = {
    # owner use cases (§8); create-and-configure sends <configure/> in the pubsub ns
    ("set", PUBSUB, "create"): Route(
        on_create, _pubsub("create-nodes", "instant-nodes", "create-and-configure")
    ),
    ("get", PUBSUB_OWNER, "configure"): Route(on_configure_get, _pubsub("config-node")),
    ("set", PUBSUB_OWNER, "configure"): Route(on_configure_set, _pubsub("config-node")),
    ("get", PUBSUB_OWNER, "default"): Route(on_default_config, _pubsub("retrieve-default")),
    ("set", PUBSUB_OWNER, "delete"): Route(on_delete, _pubsub("delete-nodes")),
    ("set", PUBSUB_OWNER, "purge"): Route(on_purge, _pubsub("purge-nodes")),
    ("get", PUBSUB_OWNER, "subscriptions"): Route(
        on_node_subscriptions_get, _pubsub("manage-subscriptions")
    ),
    ("set", PUBSUB_OWNER, "subscriptions"): Route(
        on_node_subscriptions_set, _pubsub("manage-subscriptions")
    ),
    ("get", PUBSUB_OWNER, "affiliations"): Route(
        on_node_affiliations_get, _pubsub("modify-affiliations")
    ),
    ("set", PUBSUB_OWNER, "affiliations"): Route(
        on_node_affiliations_set, _pubsub("modify-affiliations")
    ),
    # publisher (§7)
    ("set", PUBSUB, "publish"): Route(
        on_publish, _pubsub("publish", "publish-options", "item-ids")
    ),
    ("set", PUBSUB, "retract"): _RETRACT,
    ("get", PUBSUB, "retract"): _RETRACT,
    # subscriber (§6)
    ("set", PUBSUB, "subscribe"): Route(on_subscribe, _pubsub("subscribe")),
    ("set", PUBSUB, "unsubscribe"): Route(on_unsubscribe, _pubsub("subscribe")),
    ("get", PUBSUB, "options"): Route(on_options_get, _OPTIONS),
    ("set", PUBSUB, "options"): Route(on_options_set, _OPTIONS),
    ("get", PUBSUB, "default"): Route(on_default_options, _pubsub("retrieve-default-sub")),
    ("get", PUBSUB, "items"): Route(
        on_items, (*_pubsub("retrieve-items", "persistent-items", "rsm"), RSM)
    ),
    ("get", PUBSUB, "subscriptions"): Route(on_subscriptions, _pubsub("retrieve-subscriptions")),
    ("get", PUBSUB, "affiliations"): Route(on_affiliations, _pubsub("retrieve-affiliations")),
    # queue: XEP-0254 unlock (both IQ types, as its examples) and our lock extension
    ("set", QUEUEING, "unlock"): _UNLOCK,
    ("get", QUEUEING, "unlock"): _UNLOCK,
    ("set", QUEUE_EXT, "extend"): Route(on_extend, (QUEUE_EXT,)),
    ("set", QUEUE_EXT, "unlock"): Route(on_unlock_later, (QUEUE_EXT,)),
    ("set", QUEUE_EXT, "dead-letter"): Route(on_dead_letter, (QUEUE_EXT,)),
}

# Elements that qualify the request beside it rather than being the request.
MODIFIERS = frozenset(
    {(PUBSUB, "configure"), (PUBSUB, "options"), (PUBSUB, "publish-options"), (RSM, "set")}
)
_CONTAINERS = (f"{{{PUBSUB}}}pubsub", f"{{{PUBSUB_OWNER}}}pubsub")


def split_tag(tag: str) -> tuple[str, str]:
    if tag.startswith("{"):
        ns, _, name = tag[1:].partition("}")
        return ns, name
    return "", tag


def locate(xml: ET.Element) -> tuple[ET.Element, ET.Element, tuple[str, str, str]]:
    """The ``<pubsub/>`` container, the request element inside it, and its table key."""
    container = next((c for c in xml if c.tag in _CONTAINERS), None)
    if container is None:
        raise BadRequest("no pubsub request")
    children = list(container)
    primary = [c for c in children if split_tag(c.tag) not in MODIFIERS] or children
    if not primary:
        raise BadRequest("empty pubsub request")
    ns, name = split_tag(primary[0].tag)
    return container, primary[0], (xml.get("type", ""), ns, name)


def route_for(key: tuple[str, str, str]) -> Route:
    route = ROUTES.get(key)
    if route is not None:
        return route
    iq_type, ns, name = key
    if any(k[1:] == (ns, name) for k in ROUTES):
        raise BadRequest(f"<{name}/> is not a request of type {iq_type}")
    raise errors.UnknownRequest(f"unknown request <{name} xmlns='{ns}'/>")


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
            actor = Actor(sender_jid(xml.get("from", "")))
            answer = await route.handler(self.service, request, actor, container, element)
            reply = answer.reply
            if not isinstance(reply, str):
                reply = wire_size.stanza_text(reply)
            wire_size.check_answer(reply, self.max_stanza_size)
        except Exception as exc:  # every failure gets a mapped reply
            error = errors.reply_for_exception(request.stanza, exc, verb)
            # A change the core committed still has its notices to send.
            effects = answer.effects if isinstance(exc, errors.AnswerTooBig) else ()
            await self.send_answer(error, effects)
            return
        await self.send_answer(reply, answer.effects)

    async def refuse_too_deep(self, xml: ET.Element) -> None:
        """A stanza nested deeper than ``requests.MAX_DEPTH``: an IQ request gets
        bad-request (with invalid-payload for a publish), anything else is dropped.

        The reply is built from the stanza without its children: copying or
        serialising the deep tree is what would fail (Python's recursion limit)."""
        if xml.tag.rsplit("}", 1)[-1] != "iq" or xml.get("type") not in ("get", "set"):
            log.info("event=stanza_dropped reason=too_deep from=%s", xml.get("from", ""))
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
            log.info(
                "event=authorization_refused from=%s error=%s text=%r",
                msg["from"],
                type(exc).__name__,
                str(exc),
            )
            return
        except Exception:
            log.exception("event=authorization_failed from=%s", msg["from"])
            return
        await self.send_answer(None, out.effects)
