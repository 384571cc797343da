"""After a load: the ids of the items loaded cold, read in the background into
their tails' id filters (``id_filter``, ``backlog``)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from xmpp_queue.storage.backlog import ColdReader
from xmpp_queue.storage.state import MemoryState

log = logging.getLogger("xmpp_queue.storage.backlog")


async def fill_id_filters(current: Callable[[], MemoryState], reader: ColdReader) -> None:
    """After a load: read the ids of the items loaded cold, a chunk at a time
    (between the store's own reads and commits), into their tails' id filters,
    so a publish of a new id into a deep queue needs no database read.

    Until a tail's fill ends it answers "maybe" (``unknown_upto``): correct,
    only slower. A purge (a new tail) or a reload (a new state) ends the fill
    of what they replaced; a failed read leaves the rest unknown."""
    state = current()
    for node_id, ns in list(state.nodes.items()):
        tail = ns.queue.tail
        if tail is None or not tail.unknown_upto:
            continue
        upto, after = tail.unknown_upto, 0
        tail.ids.reserve(len(tail))
        while True:
            try:
                rows = await reader.tail_ids(node_id, after, upto)
            except Exception as exc:  # an outage: the filters stay "maybe"
                log.warning("event=id_filter_fill_failed error=%s", type(exc).__name__)
                return
            if current() is not state:
                return  # reloaded: the new state has its own fill
            if ns.queue.tail is not tail:
                break  # purged
            for _, item_id in rows:
                tail.ids.add(item_id)
            if not rows:
                if tail.unknown_upto == upto:
                    tail.unknown_upto = 0
                break
            after = rows[-1][0]
