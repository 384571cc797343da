"""The subscriber's handlers (XEP-0060 §6): each parses its request, calls ONE
service method and renders the result; if one grows past a few lines, logic is
leaking out of the core.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from xmpp_queue.core.model import Actor
from xmpp_queue.core.service import PubSubService
from xmpp_queue.core.subscribe_options import parse_subscribe_options
from xmpp_queue.xmpp import forms, iq_results, wire_size
from xmpp_queue.xmpp import subscriber_requests as rq
from xmpp_queue.xmpp.iq_request import Answer, IqRequest
from xmpp_queue.xmpp.stanzas import (
    PUBSUB,
)


async def on_subscribe(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_subscribe(ps, el)
    out = await svc.subscribe(actor, req.node, req.jid, req.options)
    sub = out.value
    # XEP-0254 §2.1 (and §6.3.7 subscribe-and-configure): echo the options in force.
    echo = req.options is not None or sub.queue_requests is not None
    options = parse_subscribe_options(sub.options) if echo else None
    return Answer(iq_results.subscription_result(iq.stanza, sub, options), out.effects)


async def on_unsubscribe(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_subscription(ps, el)
    out = await svc.unsubscribe(actor, req.node, req.jid, req.subid)
    # §6.2.2: the result carries the subscription, now state none.
    return Answer(iq_results.subscription_result(iq.stanza, out.value, None), out.effects)


async def on_options_get(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_subscription(ps, el)
    sub, options = await svc.get_subscription_options(actor, req.node, req.jid, req.subid)
    form = forms.subscribe_options_form(options, queue=sub.queue_requests is not None)
    reply = iq_results.form_result(
        iq.stanza, PUBSUB, "options", form, node=req.node, jid=req.jid, subid=sub.subid
    )
    return Answer(reply)


async def on_options_set(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_options_set(ps, el)
    out = await svc.set_subscription_options(actor, req.node, req.jid, req.subid, req.values)
    return Answer(iq_results.empty_result(iq.stanza), out.effects)


async def on_default_options(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_default_options(ps, el)
    queue = req.node is not None and (await svc.get_node(actor, req.node)).config.queue
    form = forms.subscribe_options_form(svc.default_subscribe_options(actor, queue), queue)
    return Answer(iq_results.form_result(iq.stanza, PUBSUB, "default", form, node=req.node))


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
    return Answer(iq_results.subscriptions_result(iq.stanza, subs, node))


async def on_affiliations(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    node = rq.parse_optional_node(ps, el).node
    entries = await svc.own_affiliations(actor, node)
    return Answer(iq_results.affiliations_result(iq.stanza, entries, node))
