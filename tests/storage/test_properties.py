"""Stateful property test: random sequences of every operation against the one store.

A Hypothesis ``RuleBasedStateMachine`` drives the real service (over
:class:`StateStore` on memory, SQLite or PostgreSQL) with several actors:
publishes (some refused: a stranger, a full queue), subscriptions with good and
bad windows, acks, nacks, extensions and retractions by the right and the wrong
actor, purges, departures, an owner's subscription change that must be refused
whole, redrives, lock timeouts on a fake clock, several operations in one batch,
and (on the SQL backends) restarts that reload the store from its database.

After every step it checks:

- **one place**: every item ever published is in exactly one place: waiting or
  locked in the queue, in the dead-letter node, or gone with an ack, retract or
  purge in the ledger; and the ledger's last word on each item agrees;
- **refusals change nothing**: an operation that raised left nodes, items,
  locks, subscriptions, affiliations and the ledger exactly as they were;
- **windows**: dispatch never pushes a subscription past its ``queue_requests``,
  and no notification carries more items than its subscriber's
  ``pubsub#queue_max_batch``;
- **batch wait**: a ready item stays waiting while a subscriber has room only when
  a subscriber with room set ``pubsub#queue_batch_wait``, fewer items are ready
  than its batch, and (checked at every timer tick) the oldest ready item has
  waited less than that wait; a restart loses the hold, and the start's tick
  over every node sends what it held;
- **batches**: a retract or unlock naming several items (XEP-0060 §13.11, our
  ``<unlock/>``) that succeeds acted on every one of them (one ledger row each);
  one that is refused changed nothing (the refusal rule above);
- **reload**: after a restart the store equals the one that was running;
- **pipeline**: with batch N's write held (``tests/kit/gated.py``) batch N+1 runs;
  no operation of either is answered before its own commit; when N's write fails
  every operation of N and N+1 fails and memory equals the state before N; when
  N+1's fails, N stands; on SQL backends a store loaded from the database then
  equals the live one (nothing answered lost, nothing failed kept);
- **attributes**: every item carries the attributes it was published with, in
  the queue and as a dead letter, across restarts, and in every notification that
  hands it out (single or batched, first delivery or redelivery, after a redrive);
- **time**: no item is delivered before its ``Start`` or at/after its expiry; an
  expired item is dead-lettered or dropped (the node's choice), still in one place;
- **priority**: an operation never hands out an item while a more urgent one
  (or an older one of the same level) that was ready before it stays waiting;
- **dedup**: inside the node's dedup window after an ack or retract, a publish of
  the same id stores nothing (no ``published`` row, only ``deduplicated``);
- **ordering** (in examples where the queue is ``pubsub#queue_ordered``): never two
  items of one ordering key in flight, and an item of a key is first delivered
  only when every item of its key published before it has left the queue (acked,
  retracted, purged, dropped or dead-lettered), so first deliveries and acks of a
  key follow publish order;
- **single active** (in examples where the queue is ``pubsub#queue_single_active``):
  at most one subscription holds items at any time, and it is a subscriber.

Budget: ``XMPP_QUEUE_PROPERTY_EXAMPLES`` examples of up to
``XMPP_QUEUE_PROPERTY_STEPS`` steps per backend (CI: 100 x 40). A longer run is
one command::

    XMPP_QUEUE_PROPERTY_EXAMPLES=500 XMPP_QUEUE_PROPERTY_STEPS=60 \\
        python -m pytest -q tests/storage/test_properties.py
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.kit import FakeClock
from tests.kit.gated import GatedBackend, WriteRefused
from tests.kit.stores import PROPERTY_BACKENDS, example_openers
from xmpp_queue.core.attributes import format_datetime
from xmpp_queue.core.effects import ItemNotice
from xmpp_queue.core.errors import PubSubError
from xmpp_queue.core.ledger import EventKind
from xmpp_queue.core.model import Actor, Affiliation, NewItem, PageRequest, SubscriptionState
from xmpp_queue.core.queue.batch_wait import ready_since
from xmpp_queue.core.queue.dispatch import takes_work
from xmpp_queue.core.queue.single_active import active_subscription
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.core.subscribe_options import batch_wait_of, max_batch_of
from xmpp_queue.storage.store import StateStore

EXAMPLES = int(os.environ.get("XMPP_QUEUE_PROPERTY_EXAMPLES", "100"))
STEPS = int(os.environ.get("XMPP_QUEUE_PROPERTY_STEPS", "40"))

QUEUE, DEAD = "q", "q/dead-letter"
OWNER = Actor("owner@example.org/desk")
PUB = Actor("pub@example.org/engine")
ADMIN = Actor("admin@example.org/console")
STRANGER = Actor("eve@elsewhere.example/x")
WORKERS = tuple(Actor(f"w{n}@example.org/r{n}") for n in range(1, 4))
ANYONE = (OWNER, PUB, STRANGER, *WORKERS)
IN_QUEUE = {
    EventKind.PUBLISHED,
    EventKind.DELIVERED,
    EventKind.UNLOCKED,
    EventKind.EXPIRED,
    EventKind.EXTENDED,
}
GONE = {EventKind.ACKED, EventKind.RETRACTED, EventKind.PURGED, EventKind.DROPPED}
FINISHED = {EventKind.ACKED, EventKind.RETRACTED}
NOT_A_MOVE = {EventKind.DEDUPLICATED}  # a ledger row that changes no item

PIPELINE_CALL = st.tuples(
    st.sampled_from(("publish", "publish", "ack", "unlock", "sub", "refused")),
    st.sampled_from(WORKERS),
)

Opener = Callable[[], Awaitable[StateStore]]
Reopener = Callable[[], Awaitable[StateStore]] | None


async def snapshot(store: StateStore) -> tuple[Any, ...]:
    async with store.transaction() as tx:
        nodes = await tx.nodes.all()
        items = {n.node_id: (await tx.items.page(n.node_id, PageRequest())).items for n in nodes}
        subs = {n.node_id: await tx.subscriptions.for_node(n.node_id) for n in nodes}
        affs = {n.node_id: await tx.affiliations.for_node(n.node_id) for n in nodes}
        ledger = await tx.ledger.events()
    return nodes, items, subs, affs, ledger


class QueueMachine(RuleBasedStateMachine):
    """See the module docstring. ``open_store``/``reopen_store`` are set per backend."""

    open_store: Opener
    reopen_store: Reopener = None

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.ids = itertools.count(1)
        self.published: list[str] = []
        self.attributes: dict[str, dict[str, str]] = {}  # as last published (stored)
        self.window = 0  # the queue's dedup window, seconds
        self.age = 0  # the queue's priority age, seconds
        self.single_step = False  # the step was one operation (the priority check)
        self.ticked = False  # the step ended with a timer tick (the batch wait's check)
        self.ordered = self.single_active = False
        self.key_of: dict[str, str | None] = {}  # item id -> its ordering key (last seen)
        self.loads: dict[str, int] = {}
        self.windows: dict[str, int] = {}  # per subid, as the invariants last saw it
        self.max_batch: dict[str, int] = {}  # per worker JID, as last subscribed
        self.subids = itertools.count(1)  # across restarts, as random ids would be
        self.store = self.run(type(self).open_store())
        self.service = self._service()
        self.last: tuple[Any, ...] | None = None  # the state the invariants last checked

    # --- plumbing ------------------------------------------------------------------------

    def run(self, coroutine: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(coroutine)

    def _service(self) -> PubSubService:
        service = PubSubService(
            self.store,
            self.clock,
            lambda: f"sub{next(self.subids)}",
            ServiceSettings(
                admins=frozenset({ADMIN.bare}), access=ServiceAccess.for_domain("example.org")
            ),
        )
        self.run(service.start())
        self.gate = GatedBackend.around(self.store)  # open unless a pipeline rule holds it
        return service

    def attempt(self, call: Callable[[], Awaitable[Any]]) -> Any:
        """Run one operation alone; if it is refused, nothing may have changed.

        "Before" is the state the invariants checked after the previous step."""
        before = self.last if self.last is not None else self.run(snapshot(self.store))
        self.single_step = True
        try:
            return self.run(call())
        except PubSubError:
            assert self.run(snapshot(self.store)) == before, "a refused operation changed state"
            return None

    def teardown(self) -> None:
        self.gate.hold = False
        for held in self.gate.held:  # a step that failed half-way: its writes fail
            if not held.done():
                held.set_result(WriteRefused())
        try:
            if type(self).reopen_store is not None:
                self.restart()
            self.run(self.service.stop())
            self.run(self.store.close())
        finally:
            self.loop.close()

    # --- set-up --------------------------------------------------------------------------

    @initialize(
        max_items=st.sampled_from(["4", "8", "16"]),
        max_deliveries=st.sampled_from(["2", "3"]),
        window=st.sampled_from([0, 60]),
        expire_action=st.sampled_from(["dead-letter", "drop"]),
        age=st.sampled_from([0, 40]),
        overflow=st.sampled_from(["refuse", "drop-oldest"]),
        ordered=st.booleans(),
        single_active=st.sampled_from([False, False, True]),
    )
    def make_queue(
        self,
        max_items: str,
        max_deliveries: str,
        window: int,
        expire_action: str,
        age: int,
        overflow: str,
        ordered: bool,
        single_active: bool,
    ) -> None:
        self.window, self.age = window, age
        self.ordered, self.single_active = ordered, single_active
        config = {
            "pubsub#queue": ["1"],
            "pubsub#max_items": [max_items],
            "pubsub#queue_lock_timeout": ["30"],
            "pubsub#queue_max_deliveries": [max_deliveries],
            "pubsub#queue_dedup_window": [str(window)],
            "pubsub#queue_expire_action": [expire_action],
            "pubsub#queue_priority_age": [str(age)],
            "pubsub#queue_overflow": [overflow],
            "pubsub#queue_ordered": ["1" if ordered else "0"],
            "pubsub#queue_single_active": ["1" if single_active else "0"],
        }
        self.run(self.service.create_node(OWNER, QUEUE, config))
        # A new queue is whitelisted: the owner names its publisher and workers.
        # (STRANGER is outside the service's users: everything it asks is refused.)
        members = [(w.bare, Affiliation.MEMBER) for w in WORKERS]
        self.run(
            self.service.set_node_affiliations(
                OWNER, QUEUE, [(PUB.bare, Affiliation.PUBLISHER), *members]
            )
        )

    # --- rules ---------------------------------------------------------------------------

    def _attributes(self, data: st.DataObject) -> dict[str, str]:
        """Some of: a user attribute, an Urgency, a Start (delay), a TTL; sometimes a
        reserved name (refused)."""
        attributes: dict[str, str] = {}
        if data.draw(st.booleans()):
            attributes["tenant"] = data.draw(st.sampled_from(["a", "b"]))
        urgency = data.draw(st.sampled_from([None, "low", "medium", "high"]))
        if urgency:
            attributes["Urgency"] = urgency
        delay = data.draw(st.sampled_from([None, None, 5, 40]))
        if delay:
            attributes["Start"] = format_datetime(self.clock.now + timedelta(seconds=delay))
        ttl = data.draw(st.sampled_from([None, None, 8, 50]))
        if ttl:
            attributes["TTL"] = str(ttl)
        key = data.draw(st.sampled_from([None, "A", "A", "B", "C"]))
        if key:
            attributes["ordering-key"] = key
        if data.draw(st.integers(0, 20)) == 0:
            attributes["delivery-attempt"] = "1"  # forged: refused
        return attributes

    @rule(actor=st.sampled_from((PUB, PUB, OWNER, STRANGER)), data=st.data())
    def publish(self, actor: Actor, data: st.DataObject) -> None:
        item_id = f"i{next(self.ids)}"
        attributes = self._attributes(data)
        done = self.attempt(
            lambda: self.service.publish(actor, QUEUE, item_id, "<job/>", 6, attributes=attributes)
        )
        if done is not None:
            self.published.append(item_id)
            self.attributes[item_id] = attributes
            self.check_notices(done)

    @rule(
        delay=st.sampled_from([None, 1, 5, 40]),
        urgency=st.sampled_from([None, "low", "high"]),
        tenant=st.booleans(),
        ttl=st.sampled_from([None, None, 3, 8, 50]),
    )
    def publish_for_later(
        self, delay: int | None, urgency: str | None, tenant: bool, ttl: int | None
    ) -> None:
        """A scheduled delivery (a ``Start``) and/or an item with a TTL, with no
        ordering key (``publish_a_run_of_one_key`` has keys), so on the ``-cold``
        backends it waits as (due, seq) and/or (expires, seq) only: it joins the
        cold ready items when due, and comes back whole when it expires."""
        item_id = f"i{next(self.ids)}"
        attributes: dict[str, str] = {}
        if delay:
            attributes["Start"] = format_datetime(self.clock.now + timedelta(seconds=delay))
        if ttl:
            attributes["TTL"] = str(ttl)
        if urgency:
            attributes["Urgency"] = urgency
        if tenant:
            attributes["tenant"] = "a"
        done = self.attempt(
            lambda: self.service.publish(PUB, QUEUE, item_id, "<job/>", 6, attributes=attributes)
        )
        if done is not None:
            self.published.append(item_id)
            self.attributes[item_id] = attributes
            self.check_notices(done)

    @rule(
        key=st.sampled_from(["A", "B"]),
        count=st.integers(2, 5),
        tenant=st.booleans(),
        times=st.lists(
            st.sampled_from([{}, {}, {}, {"Urgency": "high"}, {"TTL": "8"}, {"Start": "5"}]),
            min_size=5,
            max_size=5,
        ),
    )
    def publish_a_run_of_one_key(
        self, key: str, count: int, tenant: bool, times: list[dict[str, str]]
    ) -> None:
        """Several items of one ordering key in one publish: on an ordered queue
        all but the key's placed member wait behind it, so on the ``-cold``
        backends they wait as seqs in their key's fifo, come back when their turn
        comes, and a restart loads them as (key, seqs). Some carry an urgency, a
        TTL or a ``Start``: a member that expires while it heads its key (before
        the expiry timer ran) must let the next one through in the same dispatch."""
        batch: list[NewItem] = []
        for extra in times[:count]:
            attributes = {"ordering-key": key} | ({"tenant": "a"} if tenant else {}) | extra
            if "Start" in attributes:
                later = self.clock.now + timedelta(seconds=int(attributes["Start"]))
                attributes["Start"] = format_datetime(later)
            batch.append(NewItem(f"i{next(self.ids)}", "<job/>", 6, attributes))
        done = self.attempt(lambda: self.service.publish_items(PUB, QUEUE, batch))
        if done is not None:
            for new in batch:
                self.published.append(new.item_id)
                self.attributes[new.item_id] = dict(new.attributes)
            self.check_notices(done)

    @rule(data=st.data())
    def publish_a_finished_id_again(self, data: st.DataObject) -> None:
        """A publisher's retry of an id that was acked or retracted: inside the
        dedup window it stores nothing; outside it (or with none) it is new work."""
        last = self.run(self._last_events())
        finished = [i for i in self.published if last.get(i) in FINISHED]
        if not finished:
            return
        item_id = data.draw(st.sampled_from(finished[-4:]))
        done = self.attempt(lambda: self.service.publish(PUB, QUEUE, item_id, "<job/>", 6))
        if done is not None:
            after = self.run(self._last_events())
            if after.get(item_id) is EventKind.PUBLISHED or item_id in self._locked_now():
                self.attributes[item_id] = {}
            self.check_notices(done)

    async def _last_events(self) -> dict[str, EventKind]:
        async with self.store.transaction() as tx:
            events = await tx.ledger.events(QUEUE)
        return _last_moves(events)

    def _locked_now(self) -> set[str]:
        async def read() -> set[str]:
            async with self.store.transaction() as tx:
                return {i.item_id for i in await tx.items.locked(QUEUE)}

        return self.run(read())

    @rule(
        worker=st.sampled_from(WORKERS),
        window=st.sampled_from([0, 1, 1, 1, 2, 3]),
        max_batch=st.sampled_from([None, 1, 2, 3, 0]),
        batch_wait=st.sampled_from([None, None, 0, 2000, 20_000]),
    )
    def subscribe(
        self, worker: Actor, window: int, max_batch: int | None, batch_wait: int | None
    ) -> None:
        """Some ask for batches and some let a short batch wait (2 s: held past a 1 s
        step, due after a 10 s one; 20 s: past one of those too; 20,000 ms is also
        past the bound of 10,000: refused)."""
        options = {"pubsub#queue_requests": [str(window)]}
        if max_batch is not None:
            options["pubsub#queue_max_batch"] = [str(max_batch)]
        if batch_wait is not None:
            options["pubsub#queue_batch_wait"] = [str(min(batch_wait, 10_000))]
            if batch_wait > 10_000 and window:
                options["pubsub#queue_batch_wait"] = [str(batch_wait)]
        done = self.attempt(lambda: self.service.subscribe(worker, QUEUE, worker.jid, options))
        if done is not None:
            self.max_batch[worker.jid] = max_batch or self.max_batch.get(worker.jid, 1)
            self.check_notices(done)

    @rule(worker=st.sampled_from(WORKERS))
    def subscribe_without_a_window(self, worker: Actor) -> None:
        self.check_notices(self.attempt(lambda: self.service.subscribe(worker, QUEUE, worker.jid)))

    @rule(worker=st.sampled_from(WORKERS), wait=st.sampled_from([2000, 2000, 0]))
    def subscribe_for_batches(self, worker: Actor, wait: int) -> None:
        """A batch worker: a window of 3, up to 3 items per notification, and mostly
        a 2 s wait for a fuller batch (the trickle ``finish_all_held`` leaves)."""
        options = {
            "pubsub#queue_requests": ["3"],
            "pubsub#queue_max_batch": ["3"],
            "pubsub#queue_batch_wait": [str(wait)],
        }
        done = self.attempt(lambda: self.service.subscribe(worker, QUEUE, worker.jid, options))
        if done is not None:
            self.max_batch[worker.jid] = 3
            self.check_notices(done)

    @rule(worker=st.sampled_from(WORKERS))
    def finish_all_held(self, worker: Actor) -> None:
        """A batch worker acks everything it holds in one retract: its whole window
        is free again, so the next items may be held for a batch."""

        async def held() -> list[str]:
            async with self.store.transaction() as tx:
                return [i.item_id for i in await tx.items.locked(QUEUE) if i.lock_jid == worker.jid]

        mine = self.run(held())
        if mine:
            self.check_notices(self.attempt(lambda: self.service.retract(worker, QUEUE, mine)))

    @rule(worker=st.sampled_from(WORKERS))
    def unsubscribe(self, worker: Actor) -> None:
        self.check_notices(
            self.attempt(lambda: self.service.unsubscribe(worker, QUEUE, worker.jid))
        )

    def _some_item(self, data: st.DataObject) -> str:
        if not self.published:
            return "nothing"
        return data.draw(st.sampled_from([*self.published[-6:], "nothing"]))

    @rule(actor=st.sampled_from(ANYONE), data=st.data())
    def ack_or_retract(self, actor: Actor, data: st.DataObject) -> None:
        item_id = self._some_item(data)
        self.check_notices(self.attempt(lambda: self.service.retract(actor, QUEUE, item_id)))

    @rule(worker=st.sampled_from(WORKERS), nack=st.booleans())
    def finish_held(self, worker: Actor, nack: bool) -> None:
        """A worker doing its job: ack (or nack) an item it holds, so the backlog
        drains and dispatch has to choose among waiting items."""

        async def held() -> list[str]:
            async with self.store.transaction() as tx:
                return [i.item_id for i in await tx.items.locked(QUEUE) if i.lock_jid == worker.jid]

        mine = self.run(held())
        if not mine:
            return
        call = self.service.unlock if nack else self.service.retract
        done = self.attempt(lambda: call(worker, QUEUE, mine[0]))
        if done is not None:
            self.check_notices(done)

    @rule(actor=st.sampled_from(ANYONE), data=st.data())
    def unlock(self, actor: Actor, data: st.DataObject) -> None:
        item_id = self._some_item(data)
        self.check_notices(self.attempt(lambda: self.service.unlock(actor, QUEUE, item_id)))

    def _some_items(self, data: st.DataObject) -> list[str]:
        pool = [*self.published[-6:], "nothing"]
        return data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4))

    async def _count(self, kinds: set[EventKind]) -> int:
        async with self.store.transaction() as tx:
            return sum(1 for e in await tx.ledger.events(QUEUE) if e.kind in kinds)

    @rule(actor=st.sampled_from(ANYONE), data=st.data())
    def ack_or_retract_several(self, actor: Actor, data: st.DataObject) -> None:
        """XEP-0060 §13.11: all of them or none (none is checked by ``attempt``)."""
        ids = self._some_items(data)
        before = self.run(self._count(GONE))
        done = self.attempt(lambda: self.service.retract(actor, QUEUE, ids))
        if done is not None:
            assert self.run(self._count(GONE)) == before + len(ids), "a batch acked only part"
            self.check_notices(done)

    @rule(worker=st.sampled_from(WORKERS), data=st.data())
    def unlock_several(self, worker: Actor, data: st.DataObject) -> None:
        """Our batch ``<unlock/>``: every item given back, or none."""
        ids = self._some_items(data)
        before = self.run(self._count({EventKind.UNLOCKED}))
        done = self.attempt(lambda: self.service.unlock(worker, QUEUE, ids))
        if done is not None:
            after = self.run(self._count({EventKind.UNLOCKED}))
            assert after == before + len(ids), "a batch unlocked only part"
            self.check_notices(done)

    def check_notices(self, outcome: Any) -> None:
        """No notification carries more items than its subscriber's max_batch, and
        each item in it carries the attributes it was published with (single and
        batched notices, first deliveries and redeliveries alike). *outcome* None:
        the operation was refused and sent nothing."""
        for effect in outcome.effects if outcome is not None else ():
            if isinstance(effect, ItemNotice):
                limit = self.max_batch.get(effect.to, 1)
                assert 1 <= len(effect.items) <= limit, (effect.to, len(effect.items), limit)
                for item in effect.items:
                    sent = self.attributes.get(item.item_id, {})
                    kept = {k: item.headers.get(k) for k in sent}
                    assert kept == sent, ("notice lost attributes", item.item_id, kept, sent)

    @rule(actor=st.sampled_from(ANYONE), data=st.data(), seconds=st.sampled_from([None, 5, 60]))
    def extend(self, actor: Actor, data: st.DataObject, seconds: int | None) -> None:
        item_id = self._some_item(data)
        self.attempt(lambda: self.service.extend_lock(actor, QUEUE, item_id, seconds))

    @rule(actor=st.sampled_from((OWNER, OWNER, STRANGER)))
    def purge(self, actor: Actor) -> None:
        self.attempt(lambda: self.service.purge_node(actor, QUEUE))

    @rule(worker=st.sampled_from(WORKERS))
    def depart(self, worker: Actor) -> None:
        self.check_notices(
            self.attempt(lambda: self.service.release_subscriber(worker.jid, "offline"))
        )

    @rule(worker=st.sampled_from(WORKERS), newcomer=st.sampled_from(WORKERS))
    def owner_changes_subscriptions(self, worker: Actor, newcomer: Actor) -> None:
        """Removing one and subscribing another without a window: refused as a whole
        unless the newcomer is already subscribed (then it is only an update)."""
        changes = [
            (worker.jid, SubscriptionState.NONE, None),
            (newcomer.jid, SubscriptionState.SUBSCRIBED, None),
        ]
        self.check_notices(
            self.attempt(lambda: self.service.set_node_subscriptions(OWNER, QUEUE, changes))
        )

    @rule(limit=st.sampled_from([None, 1, 2]), actor=st.sampled_from((ADMIN, ADMIN, PUB)))
    def redrive(self, limit: int | None, actor: Actor) -> None:
        self.check_notices(self.attempt(lambda: self.service.redrive(actor, DEAD, limit)))

    @rule(seconds=st.sampled_from([1, 10, 31, 45]), tick=st.booleans())
    def time_passes(self, seconds: int, tick: bool) -> None:
        """The clock moves; the timer may be late (the next operation comes first)."""
        self.clock.advance(seconds)
        if tick:
            self.check_notices(self.run(self.service.tick()))
            self.single_step = True  # one operation: dispatch order is checked too
            self.ticked = True  # a hold that ended must have been dispatched

    @rule(seconds=st.sampled_from([1, 3]))
    def a_short_while_passes(self, seconds: int) -> None:
        """Less than a lock's timeout, and the timer on time: a batch held for 2 s is
        still held after 1 s and must have gone after 3 s."""
        self.clock.advance(seconds)
        self.check_notices(self.run(self.service.tick()))
        self.single_step = self.ticked = True

    @rule(
        calls=st.lists(
            st.tuples(
                st.sampled_from(("publish", "ack", "unlock", "sub0")), st.sampled_from(WORKERS)
            ),
            min_size=2,
            max_size=4,
        )
    )
    def a_batch(self, calls: list[tuple[str, Actor]]) -> None:
        """Several operations at once share one commit; some may be refused."""
        tasks = []
        for what, worker in calls:
            last = self.published[-1] if self.published else "nothing"
            if what == "publish":
                item_id = f"i{next(self.ids)}"
                tasks.append((item_id, self.service.publish(PUB, QUEUE, item_id, "<job/>", 6)))
            elif what == "ack":
                tasks.append((None, self.service.retract(worker, QUEUE, last)))
            elif what == "unlock":
                tasks.append((None, self.service.unlock(worker, QUEUE, last)))
            else:  # a refused subscription in the middle of the batch
                options = {"pubsub#queue_requests": ["0"]}
                tasks.append((None, self.service.subscribe(worker, QUEUE, worker.jid, options)))

        async def together() -> list[Any]:
            return await asyncio.gather(*(t for _, t in tasks), return_exceptions=True)

        for (item_id, _), result in zip(tasks, self.run(together()), strict=True):
            if isinstance(result, BaseException) and not isinstance(result, PubSubError):
                raise result
            if item_id is not None and not isinstance(result, BaseException):
                self.published.append(item_id)

    def _calls(self, calls: list[tuple[str, Actor]]) -> list[tuple[str | None, Any]]:
        """Operations of a batch (publish, ack, unlock, a refused subscription)."""
        made: list[tuple[str | None, Any]] = []
        for what, worker in calls:
            last = self.published[-1] if self.published else "nothing"
            if what == "publish":
                item_id = f"i{next(self.ids)}"
                made.append((item_id, self.service.publish(PUB, QUEUE, item_id, "<job/>", 6)))
            elif what == "ack":
                made.append((None, self.service.retract(worker, QUEUE, last)))
            elif what == "unlock":
                made.append((None, self.service.unlock(worker, QUEUE, last)))
            elif what == "sub":
                options = {"pubsub#queue_requests": ["1"]}
                made.append((None, self.service.subscribe(worker, QUEUE, worker.jid, options)))
            else:  # refused: a window of 0
                options = {"pubsub#queue_requests": ["0"]}
                made.append((None, self.service.subscribe(worker, QUEUE, worker.jid, options)))
        return made

    @rule(
        first=st.lists(PIPELINE_CALL, min_size=1, max_size=3),
        second=st.lists(PIPELINE_CALL, min_size=1, max_size=3),
        outcome=st.sampled_from(("both", "both", "first_fails", "second_fails")),
        uncertain=st.booleans(),
    )
    def pipelined_batches(
        self,
        first: list[tuple[str, Actor]],
        second: list[tuple[str, Actor]],
        outcome: str,
        uncertain: bool,
    ) -> None:
        """Batch N's write is held while batch N+1 runs against memory; then each
        commits or fails. Nothing is answered before its commit; a failed commit
        fails the batch built on it too, and memory is back at the last durable
        state (checked against the database itself on the SQL backends)."""
        durable = self.last if self.last is not None else self.run(snapshot(self.store))
        # "The database may hold it" makes the store reload: only a database can.
        uncertain = uncertain and type(self).reopen_store is not None
        a, b = self._calls(first), self._calls(second)
        results = self.run(self._pipeline(a, b, outcome, uncertain))
        failed = [r for r in results if isinstance(r, WriteRefused)]
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, PubSubError | WriteRefused):
                raise r
        for (item_id, _), result in zip([*a, *b], results, strict=True):
            if item_id is not None and not isinstance(result, BaseException):
                self.published.append(item_id)
        if failed and outcome == "first_fails":
            assert len(failed) == len(results), "an operation of a failed pipeline succeeded"
            assert self.run(snapshot(self.store)) == durable, "a failed commit left changes"
        self.memory_equals_database()

    async def _pipeline(
        self,
        a: list[tuple[str | None, Any]],
        b: list[tuple[str | None, Any]],
        outcome: str,
        uncertain: bool,
    ) -> list[Any]:
        gate = self.gate
        gate.held.clear()
        gate.hold = True
        try:
            ta = [asyncio.ensure_future(c) for _, c in a]
            if not await gate.arrived(1, unless=ta):  # N wrote nothing: nothing held
                gate.hold = False
                return await asyncio.gather(*ta, *(c for _, c in b), return_exceptions=True)
            tb = [asyncio.ensure_future(c) for _, c in b]
            for _ in range(30):
                await asyncio.sleep(0)  # batch N+1 runs meanwhile
            assert not any(t.done() for t in ta + tb), "answered before its commit"
            if outcome == "first_fails":
                gate.fail(0, WriteRefused(uncertain))
                return await asyncio.gather(*ta, *tb, return_exceptions=True)
            gate.release(0)
            done_a = await asyncio.gather(*ta, return_exceptions=True)
            if await gate.arrived(2, unless=tb):
                assert not any(t.done() for t in tb), "answered before its commit"
                if outcome == "second_fails":
                    gate.fail(1, WriteRefused(uncertain))
                else:
                    gate.release(1)
            return [*done_a, *await asyncio.gather(*tb, return_exceptions=True)]
        finally:
            gate.hold = False

    def memory_equals_database(self) -> None:
        """On a database: a second store loaded from it equals the live one."""
        reopen = type(self).reopen_store
        if reopen is None:
            return

        async def loaded() -> tuple[Any, ...]:
            other = await reopen()
            try:
                return await snapshot(other)
            finally:
                await other.close()

        assert self.run(loaded()) == self.run(snapshot(self.store)), "memory differs from the db"

    @rule()
    def announce_held_again(self) -> None:
        """The component's stream came up: every held item is announced to its holder
        again (same lock, same attempt, marked), and nothing stored changes."""
        before = self.run(snapshot(self.store))
        outcome = self.run(self.service.resend_held())
        assert self.run(snapshot(self.store)) == before, "announcing held items changed state"
        _, items, _, _, _ = before
        held = {
            (i.lock_jid, n, i.item_id, str(i.deliveries))
            for n, page in items.items()
            for i in page
            if i.locked_by is not None
        }
        told = {
            (e.to, e.node, x.item_id, x.headers["delivery-attempt"])
            for e in outcome.effects
            for x in e.items
            if x.headers.get("delivery-resent") == "1"
        }
        assert len(outcome.effects) == outcome.value == len(held)
        assert told == held, (told, held)

    @precondition(lambda self: type(self).reopen_store is not None)
    @rule()
    def restart(self) -> None:
        """Stop, close, reopen from the database: the reloaded store equals the live one."""
        live = self.run(snapshot(self.store))
        self.run(self.service.stop())
        self.run(self.store.close())
        reopen = type(self).reopen_store
        assert reopen is not None
        self.store = self.run(reopen())
        self.service = self._service()
        assert self.run(snapshot(self.store)) == live, "the reloaded store differs"
        # The component's timer starts with a tick over every node: what a queue held
        # for a batch (a hold is not stored) is dispatched or held anew.
        self.check_notices(self.run(self.service.sweep(every_node=True)))
        self.ticked = True

    # --- invariants ----------------------------------------------------------------------

    @invariant()
    def invariants(self) -> None:
        before = self.last
        self.last = self.run(snapshot(self.store))
        self.every_item_is_in_exactly_one_place(self.last)
        self.dispatch_never_overfills_a_window(self.last)
        self.no_ready_item_waits_while_a_subscriber_has_room(self.last)
        self.attributes_travel_with_items(self.last)
        self.only_waiting_items_are_dropped(self.last)
        self.nothing_is_delivered_outside_its_time(self.last)
        self.no_repeat_inside_the_dedup_window(self.last)
        self.one_item_per_key_in_flight(self.last)
        self.keys_are_served_in_publish_order(self.last)
        self.one_active_consumer(self.last)
        if self.single_step and before is not None:
            self.more_urgent_first(before, self.last)
        self.single_step = self.ticked = False

    def only_waiting_items_are_dropped(self, state: tuple[Any, ...]) -> None:
        """A truncation or an expiry drops an item no worker holds."""
        _, _, _, _, ledger = state
        held: set[str] = set()
        for event in ledger:
            if event.node != QUEUE:
                continue
            if event.kind is EventKind.DELIVERED:
                held.add(event.item_id)
            elif event.kind in {EventKind.UNLOCKED, EventKind.EXPIRED} or event.kind in GONE:
                if event.kind is EventKind.DROPPED:
                    assert event.item_id not in held, (event.item_id, "dropped while held")
                held.discard(event.item_id)
            elif event.kind is EventKind.DEAD_LETTERED:
                held.discard(event.item_id)

    def attributes_travel_with_items(self, state: tuple[Any, ...]) -> None:
        _, items, _, _, _ = state
        for node in (QUEUE, DEAD):
            for item in items.get(node, ()):
                sent = self.attributes.get(item.item_id, {})
                kept = {k: item.headers.get(k) for k in sent}
                assert kept == sent, (node, item.item_id, dict(item.headers), sent)

    def nothing_is_delivered_outside_its_time(self, state: tuple[Any, ...]) -> None:
        """Each delivery happened at/after the item's Start and before its expiry.

        A redrive (published again right after being dead-lettered) is an admin's
        explicit "now": the moved item starts a new life with neither."""
        _, _, _, _, ledger = state
        life: dict[str, tuple[datetime | None, datetime | None]] = {}
        previous: dict[str, EventKind] = {}
        for event in ledger:
            if event.kind is EventKind.DEAD_LETTERED:
                previous[event.item_id] = event.kind
            if event.node != QUEUE:
                continue
            redriven = previous.get(event.item_id) is EventKind.DEAD_LETTERED
            previous[event.item_id] = event.kind
            if event.kind is EventKind.PUBLISHED:
                times = self._times(event.item_id, event.at)
                life[event.item_id] = (None, None) if redriven else times
            elif event.kind is EventKind.DELIVERED:
                start, end = life.get(event.item_id, (None, None))
                assert start is None or event.at >= start, (event.item_id, "before its Start")
                assert end is None or event.at < end, (event.item_id, "after its expiry")

    def _times(self, item_id: str, at: datetime) -> tuple[datetime | None, datetime | None]:
        attributes = self.attributes.get(item_id, {})
        start = datetime.fromisoformat(attributes["Start"]) if "Start" in attributes else None
        end = at + timedelta(seconds=int(attributes["TTL"])) if "TTL" in attributes else None
        return start, end

    def no_repeat_inside_the_dedup_window(self, state: tuple[Any, ...]) -> None:
        _, _, _, _, ledger = state
        finished_at: dict[str, datetime] = {}
        for event in ledger:
            if event.node != QUEUE:
                continue
            if event.kind in FINISHED:
                finished_at[event.item_id] = event.at
            elif event.kind is EventKind.PUBLISHED and self.window:
                done = finished_at.get(event.item_id)
                assert done is None or event.at >= done + timedelta(seconds=self.window), (
                    event.item_id,
                    "published again inside its dedup window",
                )

    def more_urgent_first(self, before: tuple[Any, ...], after: tuple[Any, ...]) -> None:
        """No item handed out in this step while one ahead of it in dispatch order
        (more urgent, or as urgent and older) that was ready before stays waiting."""
        now = self.clock.now
        old = {i.item_id for i in before[1].get(QUEUE, ())}
        new_rows = after[4][len(before[4]) :]
        given = {e.item_id for e in new_rows if e.kind is EventKind.DELIVERED}
        items = {i.item_id: i for i in after[1].get(QUEUE, ())}
        handed = [items[i] for i in given if i in items and items[i].locked_by is not None]
        offerable = {i.item_id for i in self._offerable(list(items.values()))}
        waiting = [
            i
            for i in items.values()
            if i.item_id in old
            and i.item_id in offerable
            and (i.available_at is None or i.available_at <= now)
            and (i.expires_at is None or i.expires_at > now)
        ]
        if not handed or not waiting:
            return
        top = max(i.priority for i in [*handed, *waiting])

        def rank(i: Any) -> tuple[int, int]:
            since = i.available_at or i.published_at
            aged = self.age and (now - since).total_seconds() >= self.age
            return (-(top if aged else i.priority), i.seq)

        worst_handed = max(rank(i) for i in handed)
        best_waiting = min(rank(i) for i in waiting)
        assert best_waiting > worst_handed, ("dispatch order", worst_handed, best_waiting)

    def one_item_per_key_in_flight(self, state: tuple[Any, ...]) -> None:
        _, items, _, _, _ = state
        for node in (QUEUE, DEAD):
            for item in items.get(node, ()):
                self.key_of[item.item_id] = item.ordering_key
        if not self.ordered:
            return
        in_flight: dict[str, str] = {}
        for item in items.get(QUEUE, ()):
            if item.locked_by is not None and item.ordering_key is not None:
                other = in_flight.setdefault(item.ordering_key, item.item_id)
                assert other == item.item_id, ("two in flight", item.ordering_key, other)

    def keys_are_served_in_publish_order(self, state: tuple[Any, ...]) -> None:
        """Replay the ledger: each life of an item (publish to ack/retract/purge/drop/
        dead letter) is first delivered only when it is the oldest open life of its key."""
        if not self.ordered:
            return
        _, _, _, _, ledger = state
        open_lives: dict[str, list[str]] = {}  # key -> item ids in publish order
        delivered: set[str] = set()  # open lives delivered at least once
        ends = GONE | {EventKind.DEAD_LETTERED}
        for event in ledger:
            if event.node != QUEUE:
                continue
            key = self.key_of.get(event.item_id)
            if key is None:
                continue
            lives = open_lives.setdefault(key, [])
            if event.kind is EventKind.PUBLISHED:
                lives.append(event.item_id)
                delivered.discard(event.item_id)
            elif event.kind is EventKind.DELIVERED and event.item_id not in delivered:
                assert lives and lives[0] == event.item_id, (
                    "delivered out of its key's order",
                    key,
                    event.item_id,
                    lives,
                )
                delivered.add(event.item_id)
            elif event.kind in ends and event.item_id in lives:
                if event.kind is EventKind.ACKED:  # acks, too, complete in publish order
                    assert lives[0] == event.item_id, ("acked out of order", key, lives)
                lives.remove(event.item_id)
                delivered.discard(event.item_id)

    def one_active_consumer(self, state: tuple[Any, ...]) -> None:
        if not self.single_active:
            return
        _, items, subs, _, _ = state
        holders = {i.locked_by for i in items.get(QUEUE, ()) if i.locked_by is not None}
        assert len(holders) <= 1, ("several active consumers", holders)
        subids = {s.subid for s in subs.get(QUEUE, ())}
        assert holders <= subids, ("a holder that is no subscriber", holders, subids)

    def every_item_is_in_exactly_one_place(self, state: tuple[Any, ...]) -> None:
        _, items, _, _, ledger = state
        in_queue = {i.item_id for i in items.get(QUEUE, ())}
        in_dead = {i.item_id for i in items.get(DEAD, ())}
        last = _last_moves(ledger)
        assert not in_queue & in_dead, f"in two places: {in_queue & in_dead}"
        for item_id in self.published:
            places = (item_id in in_queue) + (item_id in in_dead) + (last.get(item_id) in GONE)
            assert places == 1, f"{item_id}: {places} places (ledger says {last.get(item_id)})"
            if item_id in in_queue:
                assert last[item_id] in IN_QUEUE, (item_id, last[item_id])
            elif item_id in in_dead:
                assert last[item_id] is EventKind.DEAD_LETTERED, (item_id, last[item_id])
        assert in_queue | in_dead <= set(self.published)

    def dispatch_never_overfills_a_window(self, state: tuple[Any, ...]) -> None:
        """A subscription may hold more than its window only after shrinking it, and then
        dispatch gives it nothing more until it is back under. (A step of several
        operations may fill the old window and then shrink it: up to the window
        it had before the step.)"""
        _, items, subs, _, _ = state
        loads: dict[str, int] = {}
        for item in items.get(QUEUE, ()):
            if item.locked_by is not None:
                loads[item.locked_by] = loads.get(item.locked_by, 0) + 1
        for sub in subs.get(QUEUE, ()):
            held = loads.get(sub.subid, 0)
            if held > (sub.queue_requests or 0):
                allowed = max(self.loads.get(sub.subid, 0), self.windows.get(sub.subid, 0))
                assert held <= allowed, f"{sub.subid} was given more"
        self.loads = loads
        self.windows = {sub.subid: sub.queue_requests or 0 for sub in subs.get(QUEUE, ())}

    def no_ready_item_waits_while_a_subscriber_has_room(self, state: tuple[Any, ...]) -> None:
        """Dispatch's index misses nobody: after every step, an item that is ready (no
        retry delay) stays unlocked only when no subscription that takes work has room."""
        _, items, subs, _, _ = state
        queue = items.get(QUEUE, ())
        if not any(i.available_at is None for i in self._offerable(queue)):
            return
        loads: dict[str, int] = {}
        for item in queue:
            if item.locked_by is not None:
                loads[item.locked_by] = loads.get(item.locked_by, 0) + 1
        candidates = list(subs.get(QUEUE, ()))
        if self.single_active:
            active = active_subscription(candidates, loads)
            candidates = [active] if active is not None else []
        with_room = [
            s
            for s in candidates
            if takes_work(s) and loads.get(s.subid, 0) < (s.queue_requests or 0)
        ]
        if with_room and not self._held_for_a_batch(queue, with_room, loads):
            raise AssertionError(f"{with_room[0].subid} has room while an item is ready")

    def _held_for_a_batch(self, queue: Any, with_room: list[Any], loads: dict[str, int]) -> bool:
        """Whether ready items may wait for a subscriber's fuller batch: one with room
        set ``pubsub#queue_batch_wait`` and takes batches, fewer are ready than it
        would take at once, and (after a tick) the oldest has not waited that long."""
        if self.ordered:
            return False  # an ordered queue never holds (a key gives one item at a time)
        now = self.clock.now
        ready = [i for i in self._offerable(queue) if i.available_at is None]
        since = min(ready_since(i) for i in ready)
        for sub in with_room:
            wait = batch_wait_of(sub.options)
            room = (sub.queue_requests or 0) - loads.get(sub.subid, 0)
            want = min(max_batch_of(sub.options), room)
            if wait > 0 and want > 1 and len(ready) < want:
                if not self.ticked or now < since + timedelta(milliseconds=wait):
                    return True
        return False

    def _offerable(self, queue: Any) -> list[Any]:
        """The waiting items dispatch may hand out: on an ordered queue only the
        oldest item of a key, and only while no item of that key is held."""
        waiting = [i for i in queue if i.locked_by is None]
        if not self.ordered:
            return waiting
        held = {i.ordering_key for i in queue if i.locked_by is not None}
        first: dict[str, Any] = {}
        for item in sorted(queue, key=lambda i: i.seq):
            if item.ordering_key is not None:
                first.setdefault(item.ordering_key, item)
        return [
            i
            for i in waiting
            if i.ordering_key is None or (i.ordering_key not in held and first[i.ordering_key] is i)
        ]


def _last_moves(ledger: Any) -> dict[str, EventKind]:
    """The last ledger word on each item of the queue (rows that move nothing skipped)."""
    last: dict[str, EventKind] = {}
    for event in ledger:
        if event.node == QUEUE and event.kind not in NOT_A_MOVE:
            last[event.item_id] = event.kind
    return last


def _machine(open_store: Opener, reopen_store: Reopener) -> type[QueueMachine]:
    return type(
        "QueueMachineOnBackend",
        (QueueMachine,),
        {"open_store": staticmethod(open_store), "reopen_store": staticmethod(reopen_store)},
    )


SETTINGS = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def test_the_store_keeps_its_promises_in_memory() -> None:
    async def open_memory() -> StateStore:
        return StateStore.in_memory()

    run_state_machine_as_test(_machine(open_memory, None), settings=SETTINGS)


@pytest.mark.parametrize("backend", PROPERTY_BACKENDS)
def test_the_store_keeps_its_promises_on_a_database(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """Each example starts from an empty migrated database; restarts reload from it."""
    open_db, reopen_db = example_openers(backend, request)
    run_state_machine_as_test(_machine(open_db, reopen_db), settings=SETTINGS)
