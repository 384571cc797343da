"""NoticeBatches: a dispatch's items, grouped into one notification per subscriber.

XEP-0060 §7.1.2.1 lets an ``<items/>`` event carry several ``<item/>``; a worker
that set ``pubsub#queue_max_batch`` above 1 gets the items chosen for it in one
dispatch together, at most that many per message. Each item keeps its own lock
and deadline: the grouping is only of the stanza, never of the work.

A notice goes out when its subscriber's batch is full or the dispatch ends, so
items are never held back waiting for company (no added latency), and the
order of items within and across a subscriber's notices stays FIFO.
"""

from __future__ import annotations

from xmpp_queue.core.effects import Effect, ItemNotice, NoticeItem
from xmpp_queue.core.model import Subscription
from xmpp_queue.core.subscribe_options import max_batch_of


class NoticeBatches:
    """The open batch of each subscription during one dispatch of one node."""

    def __init__(self, node_id: str, headline: bool = False) -> None:
        self._node = node_id
        self._headline = headline  # the node's pubsub#notification_type
        self._open: dict[str, tuple[Subscription, int, list[NoticeItem]]] = {}

    def add(self, effects: list[Effect], sub: Subscription, item: NoticeItem) -> None:
        """Add *item* to *sub*'s batch; a full batch is appended to *effects* now."""
        entry = self._open.get(sub.subid)
        if entry is None:
            entry = (sub, max_batch_of(sub.options), [])
            self._open[sub.subid] = entry
        _, limit, items = entry
        items.append(item)
        if len(items) >= limit:
            del self._open[sub.subid]
            effects.append(self._notice(sub, items))

    def flush(self, effects: list[Effect]) -> None:
        """The batches still open, in the order their first item was chosen."""
        for sub, _, items in self._open.values():
            effects.append(self._notice(sub, items))
        self._open.clear()

    def _notice(self, sub: Subscription, items: list[NoticeItem]) -> ItemNotice:
        return ItemNotice(
            to=sub.jid,
            node=self._node,
            items=tuple(items),
            subids=(sub.subid,),
            headline=self._headline,
        )
