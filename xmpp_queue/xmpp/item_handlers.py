"""The per-item handlers: publish and retract (XEP-0060 §7), XEP-0254's unlock,
our extend, batch unlock and dead-letter.

The hot path: these are answered as text (``text_render``), built from the
request element alone, since they are sent for every work item.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from xmpp_queue.core.model import Actor
from xmpp_queue.core.service import PubSubService
from xmpp_queue.xmpp import iq_results, text_render
from xmpp_queue.xmpp import item_requests as rq
from xmpp_queue.xmpp.iq_request import Answer, IqRequest

# --- publisher (§7) ---


async def on_publish(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_publish(ps, el)
    out = await svc.publish_items(actor, req.node, req.items, req.publish_options)
    return Answer(text_render.publish_result_text(iq, req.node, out.value), out.effects)


async def on_retract(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_retract(ps, el)
    out = await svc.retract(actor, req.node, req.item_ids, req.notify)
    return Answer(text_render.empty_result_text(iq), out.effects)


# --- queue (XEP-0254 and our extension) ---


async def on_unlock(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_lock(ps, el)
    out = await svc.unlock(actor, req.node, req.item_id)
    return Answer(text_render.empty_result_text(iq), out.effects)


async def on_extend(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_lock(ps, el)
    out = await svc.extend_lock(actor, req.node, req.item_id, req.seconds)
    return Answer(
        iq_results.extend_result(iq.stanza, req.node, req.item_id, out.value), out.effects
    )


async def on_unlock_later(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_batch_unlock(ps, el)
    out = await svc.unlock(actor, req.node, req.item_ids, req.delay or 0, req.reasons)
    return Answer(text_render.empty_result_text(iq), out.effects)


async def on_dead_letter(
    svc: PubSubService, iq: IqRequest, actor: Actor, ps: ET.Element, el: ET.Element
) -> Answer:
    req = rq.parse_lock(ps, el)
    out = await svc.dead_letter_now(actor, req.node, req.item_id, req.reason)
    return Answer(text_render.empty_result_text(iq), out.effects)
