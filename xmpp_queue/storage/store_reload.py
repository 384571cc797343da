"""Changing which rows are a store's, then loading its memory again (shard moves).

Why apart from ``store.py``: the store believes its memory and is the only writer
of its rows. A shard move (``sharding_moves.py``, docs/scaling.md) changes which
rows are this store's: the old shard rewrites a family's placement, the new one
takes in rows it never held. Both must run while no transaction of the store
runs, and end with memory loaded from the database again; that is this one
function, kept beside the store because it holds the store's lock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from xmpp_queue.storage.store import StateStore

T = TypeVar("T")


async def reloaded_after(store: StateStore, action: Callable[[], Awaitable[T]]) -> T:
    """Run *action* while no transaction runs (the write in flight ends first), then
    load the store's memory from the database again, whatever *action* did (a failed
    load is retried at the next transaction). Costs a full load: for rare events."""
    async with store._lock:
        await store.write_ended()
        try:
            return await action()
        finally:
            store._reload = True
            await store._reload_state()
