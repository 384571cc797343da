"""SubscriberIndex: subscriptions found by JID, and who gets a queue's next item.

Part of :class:`~xmpp_queue.storage.state.MemoryState`, kept in a module of its
own. Why: a departure (unavailable presence, bounce, unsubscribe), a subscribe,
an ack and a publish each look subscriptions up by JID, and every operation on a
queue ends with a dispatch that asks who has room. Scanning the node's (or the
store's) subscriptions there made each of them O(subscribers): 10,000 workers
leaving at once kept the component busy for minutes (docs/benchmarks.md,
"Departures"). Here:

- ``subs_by_jid``: exact JID -> (node id, subid) of its subscriptions, and
  ``jids_by_account``: bare JID -> the JIDs seen. Entries are added whenever a
  subscription appears (created, put back by a rollback, loaded) and checked
  against the node's ``subs`` when read, so a removal, a dropped node or a
  rolled-back creation costs nothing here and a stale entry is dropped by the
  next read. The store's savepoint rules (``changes``) stay as they were: undo
  puts subscriptions back and calls :meth:`index_sub` for them.
- each queue's :class:`~xmpp_queue.core.queue.dispatch.RoomIndex` (in the node's
  ``QueueIndex``) is *offered* a subscription whenever its load, window or state
  changes (:meth:`offer_room`: from item (un)indexing, subscription writes, undo,
  purge and load); the entries are checked against the same truth when read.

So a lookup costs the JID's own subscriptions, and a choice O(log n).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from xmpp_queue.core.model import Subscription, bare
from xmpp_queue.core.queue.dispatch import takes_work

if TYPE_CHECKING:
    from xmpp_queue.storage.node_state import NodeState

SubKey = tuple[str, str]  # (node_id, subid)


class SubscriberIndex:
    """See the module docstring. Shares the store's ``nodes`` dict (never replaced)."""

    __slots__ = ("jids_by_account", "nodes", "subs_by_jid")

    def __init__(self, nodes: dict[str, NodeState]) -> None:
        self.nodes = nodes
        self.subs_by_jid: dict[str, dict[SubKey, None]] = {}
        self.jids_by_account: dict[str, dict[str, None]] = {}

    def index_sub(self, ns: NodeState, sub: Subscription) -> None:
        """*sub* is (again) one of *ns*'s subscriptions: find it by JID, offer it work."""
        self.subs_by_jid.setdefault(sub.jid, {})[(ns.node.node_id, sub.subid)] = None
        self.jids_by_account.setdefault(bare(sub.jid), {})[sub.jid] = None
        self.offer_room(ns, sub.subid)

    def index_node_subs(self, ns: NodeState) -> None:
        """Every subscription of *ns* (a node put back whole, or loaded)."""
        for sub in ns.subs.values():
            self.index_sub(ns, sub)

    def subs_of_jid(self, jid: str, node_id: str | None = None) -> list[Subscription]:
        """Subscriptions held by exactly *jid* (on *node_id* only, when given), oldest
        first. Costs the JID's own subscriptions, stale index entries dropped on the way."""
        entries = self.subs_by_jid.get(jid)
        if not entries:
            return []
        nodes = self.nodes
        found: list[tuple[int, Subscription]] = []
        stale: list[SubKey] = []
        for key in entries:
            ns = nodes.get(key[0])
            sub = ns.subs.get(key[1]) if ns is not None else None
            if sub is None or sub.jid != jid:
                stale.append(key)
            elif node_id is None or key[0] == node_id:
                found.append((ns.sub_ids[key[1]], sub))  # type: ignore[union-attr]
        for key in stale:
            del entries[key]
        if not entries:
            del self.subs_by_jid[jid]
        found.sort(key=lambda pair: pair[0])
        return [sub for _, sub in found]

    def subs_of_account(self, account: str) -> list[Subscription]:
        """Subscriptions of every JID of this bare JID, oldest first."""
        jids = self.jids_by_account.get(account)
        if not jids:
            return []
        found: list[tuple[int, Subscription]] = []
        for jid in list(jids):
            subs = self.subs_of_jid(jid)
            if not subs:
                del jids[jid]
            found += [(self.nodes[s.node].sub_ids[s.subid], s) for s in subs]
        if not jids:
            del self.jids_by_account[account]
        found.sort(key=lambda pair: pair[0])
        return [sub for _, sub in found]

    # --- who gets the next item ----------------------------------------------------------

    @staticmethod
    def room_truth(ns: NodeState) -> Callable[[str], tuple[int, int, int] | None]:
        """What the node's RoomIndex checks its entries against: (load, window, order)."""
        subs, loads, ids = ns.subs, ns.queue.loads, ns.sub_ids

        def truth(subid: str) -> tuple[int, int, int] | None:
            sub = subs.get(subid)
            if sub is None or not takes_work(sub):
                return None
            return loads.get(subid, 0), sub.queue_requests or 0, ids[subid]

        return truth

    def offer_room(self, ns: NodeState, subid: str) -> None:
        """What dispatch reads of *subid* changed: give the RoomIndex its new entry."""
        sub = ns.subs.get(subid)
        if sub is None or not takes_work(sub):
            return
        room = ns.queue.room
        room.offer(subid, ns.queue.loads.get(subid, 0), sub.queue_requests or 0, ns.sub_ids[subid])
        if room.oversized(len(ns.subs)):
            room.rebuild(list(ns.subs), self.room_truth(ns))

    def next_with_room(self, ns: NodeState, avoid: str | None) -> Subscription | None:
        subid = ns.queue.room.best(self.room_truth(ns), avoid)
        return ns.subs[subid] if subid is not None else None
