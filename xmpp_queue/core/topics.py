"""Topics with subscriptions: one publish copied into every queue bound to a topic.

A topic is an ordinary node; a queue is bound to it by its own configuration
(``pubsub#queue_topic``, set by the queue's owner, ``topic_config``). Each bound
queue is one subscription in Google Pub/Sub's sense: its own backlog, acks,
dead letters and filter (``pubsub#queue_filter``). The topic's own subscribers
keep their broadcast notifications.

Fan-out runs inside the publishing operation (its savepoint): after the topic
took the item, each bound queue whose filter matches gets a copy through the
queue type's own publish step, so the copy gets the queue's schedule (priority,
``Start``, expiry, ordering key from the attributes), its dedup window (the
copy keeps the topic's item id), its overflow rule and its ledger row. If any
bound queue refuses the copy (full, an attribute or size limit tighter than the
topic's), the whole publish is refused and nothing changes anywhere: the
publisher learns at once that a subscription cannot take the item, instead of
the item silently missing from one backlog (Pub/Sub accepts and lets the
subscription's backlog policy decide; docs/queueing.md says why we differ).

A queue's filter is evaluated before anything is built for it: an item it keeps
out costs a call of the compiled filter and a counter increment
(``Work.filtered``); the topic's bound queues and their compiled filters come
from the store's topic index, kept exact at every change of a binding (undo
included), so a publish neither looks the queues up nor parses a filter; the
commit batcher writes one ``filtered`` ledger row per queue and committed batch
with the count (``ledger.record_filtered``): the count of filtered items per
subscription, which the metrics and the pipeline's report read. A copy's
``published`` row names the topic it came from (its ``reason``).

Deleting a topic unbinds its queues (their backlog stays, as Pub/Sub detaches
subscriptions of a deleted topic) and tells each queue's subscribers and owners
with a configuration notice.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable

from xmpp_queue.core.access import check_access, own_subscriptions_on, visible
from xmpp_queue.core.attributes import check_attributes
from xmpp_queue.core.batcher import Work
from xmpp_queue.core.capabilities import Action
from xmpp_queue.core.context import ServiceContext
from xmpp_queue.core.effects import ConfigNotice, headline
from xmpp_queue.core.errors import (
    Forbidden,
    InvalidNodeConfig,
    ItemForbidden,
    PayloadRequired,
    PayloadTooBig,
    PubSubError,
)
from xmpp_queue.core.model import (
    AccessModel,
    Actor,
    Affiliation,
    NewItem,
    Node,
    NodeConfig,
    SubscriptionState,
)
from xmpp_queue.core.payload_ceiling import payload_limit
from xmpp_queue.core.topic_config import QUEUE_TOPIC

log = logging.getLogger("xmpp_queue.topics")

# The queue type's publish step: store one checked item with the node's rules.
PublishInto = Callable[[Work, Node, str, NewItem, str, str | None], Awaitable[None]]


def check_item(config: NodeConfig, item: NewItem, most: int) -> None:
    """What every node checks of a new item before its type stores it."""
    if item.payload is None and config.deliver_payloads and config.persist_items:
        raise PayloadRequired()
    if item.payload is not None and not config.deliver_payloads and not config.persist_items:
        raise ItemForbidden()
    if item.size > most:
        raise PayloadTooBig(item.size, most)
    check_attributes(item.attributes, config)


class Topics:
    """Binding checks, fan-out and a topic's deletion (see the module docstring)."""

    def __init__(self, ctx: ServiceContext, publish_into: PublishInto) -> None:
        self._ctx = ctx
        self._publish_into = publish_into

    async def check_binding(
        self, work: Work, actor: Actor, queue_id: str, config: NodeConfig, before: NodeConfig | None
    ) -> None:
        """Refuse a binding the queue's owner may not make.

        The topic must be an existing ordinary node other than the queue, which
        the requester may subscribe to under the topic's access model (open:
        anyone not banned; whitelist: members and stronger; authorize: an
        approved subscriber or an affiliate). Keeping an existing binding (a
        new filter, another field) needs no new check."""
        topic_id = config.queue_topic if config.queue else ""
        if not topic_id:
            return
        if before is not None and before.queue and before.queue_topic == topic_id:
            return
        if topic_id == queue_id:
            raise InvalidNodeConfig(QUEUE_TOPIC, "a queue cannot be bound to itself")
        topic = await work.tx.nodes.get(topic_id)
        aff = await self._ctx.affiliation(work, topic_id, actor)
        if topic is None or not visible(topic, aff):
            raise InvalidNodeConfig(QUEUE_TOPIC, f"no node {topic_id!r}")
        if topic.config.queue:
            raise InvalidNodeConfig(QUEUE_TOPIC, f"{topic_id!r} is a queue, not a topic")
        if self._ctx.is_admin(actor):
            return
        subs = await own_subscriptions_on(work.tx, topic_id, actor)
        try:
            check_access(topic, aff, Action.SUBSCRIBE, subs)
        except PubSubError:
            raise Forbidden("bind", f"may not subscribe to topic {topic_id!r}") from None
        approved = any(s.state is SubscriptionState.SUBSCRIBED for s in subs)
        if (
            topic.config.access_model is AccessModel.AUTHORIZE
            and aff is Affiliation.NONE
            and not approved
        ):
            raise Forbidden("bind", f"topic {topic_id!r} needs an approved subscription")

    async def check_topic_change(self, work: Work, topic: Node, config: NodeConfig) -> None:
        """A node with bound queues stays an ordinary node."""
        if config.queue and not topic.config.queue:
            if await work.tx.nodes.bindings(topic.node_id):
                raise InvalidNodeConfig("pubsub#queue", "queues are bound to this topic")

    async def fan_out(
        self, work: Work, topic: Node, item_id: str, item: NewItem, publisher: str
    ) -> None:
        """Copy one item the topic took into every bound queue whose filter matches.

        The hot case is a queue that does not want the item: it costs a call of
        its compiled filter and a counter, nothing else (the publisher's rate must
        not depend on how many subscriptions ignore its items). The bindings come
        from the store's topic index (``NodeRepository.bindings``), built once per
        change of a binding, not per publish."""
        bindings = await work.tx.nodes.bindings(topic.node_id)
        if not bindings:
            return
        attributes = item.attributes
        for binding in bindings:
            accepts = binding.accepts
            if accepts is not None and not accepts(attributes):
                counts = work.filtered
                if counts is None:
                    counts = work.filtered = {}
                key = binding.counter
                counts[key] = counts.get(key, 0) + 1
                continue
            queue = binding.queue
            cfg = queue.config
            ceiling = self._ctx.settings.max_payload_ceiling
            try:
                check_item(cfg, item, payload_limit(cfg, ceiling))
                work.touched[queue.node_id] = None
                await self._publish_into(work, queue, item_id, item, publisher, topic.node_id)
            except PubSubError as exc:
                log.info(
                    "event=topic_publish_refused topic=%s queue=%s item=%s reason=%r",
                    topic.node_id,
                    queue.node_id,
                    item_id,
                    str(exc),
                )
                raise

    async def topic_deleted(self, work: Work, topic: Node) -> None:
        """Unbind the topic's queues (their backlog stays) and tell who uses them."""
        for binding in await work.tx.nodes.bindings(topic.node_id):
            queue = binding.queue
            config = dataclasses.replace(queue.config, queue_topic="")
            await work.tx.nodes.update_config(queue.node_id, config)
            told = {s.jid for s in await work.tx.subscriptions.for_node(queue.node_id)}
            told.update(
                e.jid
                for e in await work.tx.affiliations.for_node(queue.node_id)
                if e.affiliation is Affiliation.OWNER
            )
            payload = config if config.deliver_payloads else None
            for jid in sorted(told):
                work.effects.append(ConfigNotice(jid, queue.node_id, payload, headline(config)))
            log.info("event=topic_unbound topic=%s queue=%s", topic.node_id, queue.node_id)
