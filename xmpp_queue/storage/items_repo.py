"""The core's items repository (``ItemsPort``) over the store's memory.

The pubsub side lives here (store, get, replace, remove, move, purge, pages);
the retention verbs (``items_retained``) and the queue verbs (``items_queue``)
are its other parts, composed as base classes over one shared state
(``payload_warming``). As in ``repositories``, each write records the key's
original value in the transaction's change set, then changes memory through
:meth:`MemoryState.set_item`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from datetime import datetime

from xmpp_queue.core.model import Item, ItemPage, PageRequest, copy_item, new_item
from xmpp_queue.core.paging import is_backward, is_unpaged, page_bounds, trim_to_bytes
from xmpp_queue.storage import backlog
from xmpp_queue.storage.item_values import (
    COLD,
    frozen_headers,
    stored_item,
    utc,
    utc_opt,
    with_payload,
    with_payload_value,
)
from xmpp_queue.storage.items_queue import QueueItems
from xmpp_queue.storage.items_retained import RetainedItems
from xmpp_queue.storage.node_state import NodeState
from xmpp_queue.storage.repositories import node_state_of


class ItemsRepo(RetainedItems, QueueItems):
    """Items of every node: the pubsub verbs here, retention and queue in the bases."""

    async def put(self, item: Item) -> Item:
        state = self._s
        ns = node_state_of(state, item.node)
        if item.item_id in ns.items:
            raise ValueError(f"item {item.item_id!r} exists on node {item.node!r}")
        stored = stored_item(item, state.next_seq)
        state.next_seq += 1
        self._forget_retained(ns, item.item_id)
        self._c.touch_item(item.node, item.item_id)
        state.set_item(ns, item.item_id, stored)
        return stored

    async def replace_payload(
        self,
        node_id: str,
        item_id: str,
        payload: str | None,
        size: int,
        publisher: str,
        at: datetime,
        headers: Mapping[str, str] | None = None,
        priority: int | None = None,
        expires_at: datetime | None = None,
    ) -> None:
        ns = self._s.nodes.get(node_id)
        old = await self._find(ns, item_id)
        if ns is not None and old is not None:
            new = with_payload(old, payload, size, publisher, utc(at))
            if headers is not None:
                new = copy_item(
                    new,
                    headers=frozen_headers(headers),
                    priority=old.priority if priority is None else priority,
                    expires_at=utc_opt(expires_at),
                )
            self._c.touch_item(node_id, item_id)
            self._s.set_item(ns, item_id, new)

    async def get(self, node_id: str, item_id: str) -> Item | None:
        ns = self._s.nodes.get(node_id)
        found = ns.items.get(item_id) if ns is not None else None
        if found is None and ns is not None and ns.queue.tail:  # inlined: the hot path
            found = await self._find(ns, item_id)
        if found is not None and found.payload is COLD:
            assert ns is not None
            return (await self._warm(ns, [found]))[0]
        return found

    async def remove(self, node_id: str, item_id: str) -> bool:
        ns = self._s.nodes.get(node_id)
        if ns is None:
            return False
        if item_id not in ns.items and (not ns.queue.tail or not await self._find(ns, item_id)):
            return False
        self._c.touch_item(node_id, item_id)
        self._s.set_item(ns, item_id, None)
        return True

    async def move(
        self,
        node_id: str,
        item_id: str,
        target_node: str,
        target_item_id: str,
        headers: Mapping[str, str],
        at: datetime,
    ) -> Item:
        state = self._s
        source = node_state_of(state, node_id)
        target = node_state_of(state, target_node)
        item = await self.get(node_id, item_id)  # with its payload in hand
        if item is None:
            raise ValueError(f"no item {item_id!r} on node {node_id!r} to move")
        when = utc(at)
        moved = stored_item(
            new_item(
                target_node,
                target_item_id,
                item.publisher,
                item.payload,
                item.payload_size,
                headers,
                when,
                priority=item.priority,
                ordering_key=item.ordering_key,
            ),
            state.next_seq,
        )
        state.next_seq += 1
        self._c.touch_item(node_id, item_id)
        state.set_item(source, item_id, None)
        await self._find(target, target_item_id)  # a cold one is recorded whole
        self._forget_retained(target, target_item_id)
        self._c.touch_item(target_node, target_item_id)
        state.set_item(target, target_item_id, None)
        state.set_item(target, target_item_id, moved)
        return moved

    async def remove_all(self, node_id: str) -> list[Item]:
        ns = self._s.nodes.get(node_id)
        if ns is None or not backlog.count(ns):
            return []
        every = await backlog.resolve(ns, self._reader, list(backlog.merged(ns)))
        self._c.touch_node(node_id)
        self._c.purged.add(node_id)
        removed = [
            with_payload_value(i, None) if i.payload is COLD else i for i in every
        ]  # the port allows purged items without payloads
        self._s.clear_items(ns)
        return removed

    async def count(self, node_id: str) -> int:
        ns = self._s.nodes.get(node_id)
        return backlog.count(ns) if ns is not None else 0

    async def payload_bytes(self, node_id: str) -> int:
        ns = self._s.nodes.get(node_id)
        return ns.queue.payload_bytes if ns is not None else 0

    async def oldest_waiting(self, node_id: str, limit: int) -> list[Item]:
        ns = self._s.nodes.get(node_id)
        if ns is None or limit <= 0:
            return []
        if ns.queue.tail:
            oldest = await backlog.oldest(self._s, ns, self._reader, limit, True)
            return await self._warm(ns, oldest)
        # Locked items are at the head (the oldest go out first): skipping them
        # costs at most the node's in-flight count.
        found = list(
            itertools.islice((i for i in ns.in_order().values() if i.locked_by is None), limit)
        )
        return await self._warm(ns, found)

    async def count_all(self) -> int:
        return sum(backlog.count(ns) for ns in self._s.nodes.values())

    async def page(
        self, node_id: str, request: PageRequest, max_bytes: int | None = None
    ) -> ItemPage:
        ns = self._s.nodes.get(node_id)
        if ns is not None and ns.queue.tail:
            return await self._page_cold(ns, request, max_bytes)
        count = len(ns.items) if ns is not None else 0
        if is_unpaged(request):
            chosen = ns.window(0, count) if ns is not None else []
            return ItemPage(items=tuple(await self._warm_opt(ns, chosen)), count=count)
        position = ns.position if ns is not None else (lambda _: None)
        start, stop = page_bounds(count, request, position)
        backward = is_backward(request)
        window = ns.window(start, stop) if ns is not None else []
        chosen = list(trim_to_bytes(window, max_bytes, backward))
        if backward:
            start = stop - len(chosen)
        return ItemPage(
            items=tuple(await self._warm_opt(ns, chosen)),
            count=count,
            first_index=start if chosen else None,
            paged=True,
            backward=backward,
        )

    async def _page_cold(
        self, ns: NodeState, request: PageRequest, max_bytes: int | None
    ) -> ItemPage:
        """:meth:`page` over a node with cold items: hot and cold merged in
        publish order, the cold ones of the page read from their rows."""
        reader = self._reader
        count = backlog.count(ns)
        if is_unpaged(request):
            every = await backlog.resolve(ns, reader, backlog.window(ns, 0, count))
            return ItemPage(items=tuple(await self._warm(ns, every)), count=count)
        named = [x for x in (request.after, request.before) if x]
        places = {x: await backlog.position(ns, reader, x) for x in named}
        start, stop = page_bounds(count, request, places.get)
        backward = is_backward(request)
        window = await backlog.resolve(ns, reader, backlog.window(ns, start, stop))
        chosen = list(trim_to_bytes(window, max_bytes, backward))
        if backward:
            start = stop - len(chosen)
        return ItemPage(
            items=tuple(await self._warm(ns, chosen)),
            count=count,
            first_index=start if chosen else None,
            paged=True,
            backward=backward,
        )

    async def latest(self, node_id: str, limit: int) -> list[Item]:
        ns = self._s.nodes.get(node_id)
        if ns is None or limit <= 0:
            return []
        if ns.queue.tail:
            entries = list(itertools.islice(backlog.merged(ns, newest_first=True), limit))
            entries.reverse()
            return await self._warm(ns, await backlog.resolve(ns, self._reader, entries))
        newest = list(itertools.islice(reversed(ns.in_order().values()), limit))
        newest.reverse()
        return await self._warm(ns, newest)

    async def oldest_ids(self, node_id: str, limit: int) -> list[str]:
        ns = self._s.nodes.get(node_id)
        if ns is None or limit <= 0:
            return []
        if ns.queue.tail:
            oldest = await backlog.oldest(self._s, ns, self._reader, limit, False)
            return [i.item_id for i in oldest]
        return list(itertools.islice(ns.in_order(), limit))
