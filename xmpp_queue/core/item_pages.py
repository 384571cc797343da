"""What one items retrieval (XEP-0060 §6.5) answers: never more than a page.

A node may hold hundreds of thousands of items; an answer holding them all
froze the component and, past the XMPP server's stanza limit, got it
disconnected. So every retrieval is bounded by ``items_page_size`` items (and
the store stops a page at ``page_bytes`` of payload), and whenever the limit
cut the answer it is paged, with an XEP-0059 ``<set/>`` saying where to go on.
Where the specs are silent (docs/operations.md, "Size and paging limits"):

- No paging asked, node holding more than a page: the first page (oldest
  first, as §6.5.2's "all items" would start) with count/first/last.
- RSM ``max`` above the page size: the page size.
- ``max_items`` (§6.5.7, the N newest) above the page size: the first page of
  those N (so ``after`` = last goes on through the rest of them), paged.
- Items asked by id: at most a page of them, in the order asked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from xmpp_queue.core.errors import BadRequest
from xmpp_queue.core.model import ItemPage, PageRequest
from xmpp_queue.core.paging import is_unpaged
from xmpp_queue.core.ports import Transaction


async def read_items(
    tx: Transaction,
    node: str,
    item_ids: Sequence[str],
    max_items: int | None,
    page: PageRequest | None,
    page_size: int,
    page_bytes: int | None,
) -> ItemPage:
    """The page of *node* a retrieval asks for, bounded as the module docstring says."""
    if item_ids:
        by_id = [await tx.items.get(node, i) for i in item_ids[:page_size]]
        items = tuple(i for i in by_id if i is not None)
        return ItemPage(items=items, count=len(items))
    count = await tx.items.count(node)
    request = page or PageRequest()
    whole = is_unpaged(request)  # everything, or the max_items newest: paged only if cut
    if max_items is not None:
        if max_items < 0:
            raise BadRequest("max_items must not be negative")
        request = PageRequest(max=max_items, index=max(0, count - max_items))
    elif whole:
        request = PageRequest(max=count)
    if request.max is None or request.max > page_size:
        request = dataclasses.replace(request, max=page_size)
    found = await tx.items.page(node, request, page_bytes)
    if whole and len(found.items) == min(count, max_items if max_items is not None else count):
        return dataclasses.replace(found, paged=False)
    return found
