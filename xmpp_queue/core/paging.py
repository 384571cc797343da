"""XEP-0059 result-set paging over a node's items, as one pure function.

The rules (exclusive ``after``/``before`` ids, ``before == ""`` for the last
page, ``index`` as an offset, ``max`` taken from the end when paging backwards)
are the protocol's, so they live in the core; the store hands in the node's
items in publish order.
"""

from __future__ import annotations

from xmpp_queue.core.errors import PageNotFound
from xmpp_queue.core.model import Item, ItemPage, PageRequest


def page_of(items: list[Item], request: PageRequest) -> ItemPage:
    """XEP-0059 over a node's items in publish order (shared rules, plain list).

    No paging field at all returns everything unpaged. ``after``/``before`` are
    exclusive item ids (PageNotFound when unknown), ``before == ""`` is the last
    page, ``index`` an offset; ``max`` caps the page (taken from the end when
    paging backwards). ``first_index`` is None when the page is empty.
    """
    r = request
    if r.max is None and r.after is None and r.before is None and r.index is None:
        return ItemPage(items=tuple(items), count=len(items))
    ids = [i.item_id for i in items]
    start, stop = 0, len(items)
    if r.after is not None:
        if r.after not in ids:
            raise PageNotFound(f"no item {r.after} to page after")
        start = ids.index(r.after) + 1
    if r.before:
        if r.before not in ids:
            raise PageNotFound(f"no item {r.before} to page before")
        stop = ids.index(r.before)
    if r.index is not None and r.after is None and r.before is None:
        start = max(0, r.index)
    start = min(start, stop)
    limit = max(0, r.max) if r.max is not None else None
    if r.before is not None and limit is not None:
        start = max(start, stop - limit)
    elif limit is not None:
        stop = min(stop, start + limit)
    chosen = tuple(items[start:stop])
    return ItemPage(
        items=chosen, count=len(items), first_index=start if chosen else None, paged=True
    )
