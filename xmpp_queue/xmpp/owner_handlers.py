"""The owner's handlers (XEP-0060 §8): each parses its request, calls ONE service
method and renders the result; if one grows past a few lines, logic is leaking
out of the core.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from xmpp_queue.core.model import Actor
from xmpp_queue.core.service import PubSubService
from xmpp_queue.xmpp import forms, iq_results
from xmpp_queue.xmpp import owner_requests as rq
from xmpp_queue.xmpp.iq_request import Answer, IqRequest
from xmpp_queue.xmpp.stanzas import (
    PUBSUB_OWNER,
)


async def on_create(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_create(ps, el)
    out = await svc.create_node(actor, req.node, req.config)
    return Answer(
        iq_results.create_result(iq.stanza, out.value, instant=req.node is None), out.effects
    )


async def on_configure_get(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_node(ps, el)
    config = await svc.get_config(actor, req.node)
    form = forms.node_config_form(config)
    return Answer(iq_results.form_result(iq.stanza, PUBSUB_OWNER, "configure", form, node=req.node))


async def on_configure_set(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_configure_set(ps, el)
    if req.cancel:  # §8.2.6: the owner cancelled; nothing changes
        return Answer(iq_results.empty_result(iq.stanza))
    out = await svc.configure_node(actor, req.node, req.values)
    return Answer(iq_results.empty_result(iq.stanza), out.effects)


async def on_default_config(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    form = forms.node_config_form(svc.default_config(actor))
    return Answer(iq_results.form_result(iq.stanza, PUBSUB_OWNER, "default", form))


async def on_delete(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_delete(ps, el)
    out = await svc.delete_node(actor, req.node, req.redirect)
    return Answer(iq_results.empty_result(iq.stanza), out.effects)


async def on_purge(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    out = await svc.purge_node(actor, rq.parse_node(ps, el).node)
    return Answer(iq_results.empty_result(iq.stanza), out.effects)


async def on_node_subscriptions_get(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    node = rq.parse_node(ps, el).node
    subs = await svc.get_node_subscriptions(actor, node)
    return Answer(iq_results.node_subscriptions_result(iq.stanza, node, subs))


async def on_node_subscriptions_set(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_node_subscriptions_set(ps, el)
    out = await svc.set_node_subscriptions(actor, req.node, req.changes)
    return Answer(iq_results.empty_result(iq.stanza), out.effects)


async def on_node_affiliations_get(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    node = rq.parse_node(ps, el).node
    entries = await svc.get_node_affiliations(actor, node)
    return Answer(iq_results.node_affiliations_result(iq.stanza, node, entries))


async def on_node_affiliations_set(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_node_affiliations_set(ps, el)
    out = await svc.set_node_affiliations(actor, req.node, req.changes)
    return Answer(iq_results.empty_result(iq.stanza), out.effects)
