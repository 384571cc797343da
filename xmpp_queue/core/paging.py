"""XEP-0059 result-set paging over a node's items, as pure functions.

The rules (exclusive ``after``/``before`` ids, ``before == ""`` for the last
page, ``index`` as an offset, ``max`` taken from the end when paging backwards)
are the protocol's, so they live in the core. The store answers with positions
only (:func:`page_bounds` asks it where an id stands), so a page of a node
holding 800,000 items costs the page, not the backlog: nothing is copied to
find it. :func:`trim_to_bytes` keeps a page under a byte budget before any
payload is fetched, so a page of large items does not bring them all into
memory only to be cut by the transport.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xmpp_queue.core.errors import PageNotFound
from xmpp_queue.core.model import Item, ItemPage, PageRequest


def is_unpaged(request: PageRequest) -> bool:
    r = request
    return r.max is None and r.after is None and r.before is None and r.index is None


def page_bounds(
    count: int, request: PageRequest, position: Callable[[str], int | None]
) -> tuple[int, int]:
    """``(start, stop)`` offsets of the page *request* asks for, over *count* items.

    *position* gives an item id's offset in publish order (None: unknown, which
    raises PageNotFound as XEP-0059 §2.4 wants).
    """
    r = request
    start, stop = 0, count
    if r.after is not None:
        at = position(r.after)
        if at is None:
            raise PageNotFound(f"no item {r.after} to page after")
        start = at + 1
    if r.before:
        at = position(r.before)
        if at is None:
            raise PageNotFound(f"no item {r.before} to page before")
        stop = at
    if r.index is not None and r.after is None and r.before is None:
        start = max(0, r.index)
    start = min(start, stop)
    limit = max(0, r.max) if r.max is not None else None
    if is_backward(r) and limit is not None:
        start = max(start, stop - limit)
    elif limit is not None:
        stop = min(stop, start + limit)
    return start, stop


def is_backward(request: PageRequest) -> bool:
    """A ``before`` page: its items are taken from the end (the ones nearest ``before``)."""
    return request.before is not None


def trim_to_bytes(
    items: Sequence[Item], budget: int | None, backward: bool = False
) -> tuple[Item, ...]:
    """The longest run of *items* whose payloads add up to at most *budget* bytes,
    from the start (from the end for a backward page, so the client's next
    ``before`` misses nothing). Never empty when *items* is not: one item always
    goes (whether it fits is the transport's question)."""
    if budget is None or not items:
        return tuple(items)
    ordered = list(reversed(items)) if backward else list(items)
    kept: list[Item] = []
    used = 0
    for item in ordered:
        used += item.payload_size
        if kept and used > budget:
            break
        kept.append(item)
    if backward:
        kept.reverse()
    return tuple(kept)


def page_of(items: list[Item], request: PageRequest) -> ItemPage:
    """XEP-0059 over a plain list in publish order (no paging field: everything,
    unpaged). ``first_index`` is None when the page is empty."""
    if is_unpaged(request):
        return ItemPage(items=tuple(items), count=len(items))
    index = {item.item_id: n for n, item in enumerate(items)}
    start, stop = page_bounds(len(items), request, index.get)
    chosen = tuple(items[start:stop])
    return ItemPage(
        items=chosen,
        count=len(items),
        first_index=start if chosen else None,
        paged=True,
        backward=is_backward(request),
    )
