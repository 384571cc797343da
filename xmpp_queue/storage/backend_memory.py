"""MemoryBackend: the store with nothing behind it.

Used where nothing must outlive the process (the unit, protocol and admin
suites, ``demo --memory``), so those run exactly the store production runs,
with its transactions, savepoints and rollbacks; only the write is missing.
Committed ledger rows are kept, so ledger reads (the admin figures) see what a
database would. ``fail_next`` makes the next write fail, as a full disk or a
lost database would: the tests of failed commits use it.
"""

from __future__ import annotations

from datetime import datetime

from xmpp_queue.core.errors import StorageUnavailable
from xmpp_queue.core.ledger import EventKind, LedgerEvent
from xmpp_queue.core.model import Item
from xmpp_queue.storage.backend import FlushFailed
from xmpp_queue.storage.flush import Flush
from xmpp_queue.storage.state import MemoryState


class MemoryBackend:
    keeps_payloads = False  # nothing to read a dropped payload back from

    def __init__(self) -> None:
        self.events: list[LedgerEvent] = []
        self.writes = 0
        self.fail_next = 0

    async def load(self) -> MemoryState:
        return MemoryState()

    async def write(self, flush: Flush) -> None:
        self.write_now(flush)

    def write_now(self, flush: Flush) -> bool:
        if self.fail_next > 0:
            self.fail_next -= 1
            raise FlushFailed(StorageUnavailable("the write failed (simulated)"), False)
        self.events.extend(flush.events)
        self.writes += 1
        return True

    async def ledger_count(self, node_id: str, kind: EventKind, since: datetime) -> int:
        return sum(1 for e in self.events if e.node == node_id and e.kind == kind and e.at >= since)

    async def payloads(self, node_id: str, item_ids: list[str]) -> dict[str, str | None]:
        return {}  # never asked: payloads are never dropped from memory here

    async def ledger_events(self, node_id: str | None) -> list[LedgerEvent]:
        return [e for e in self.events if node_id is None or e.node == node_id]

    async def items_by_seq(self, node_id: str, seqs: list[int]) -> list[Item]:
        return []  # never asked: nothing goes cold without a database

    async def tail_ids(self, node_id: str, after: int, upto: int) -> list[tuple[int, str]]:
        return []

    async def item_by_id(self, node_id: str, item_id: str) -> Item | None:
        return None

    async def close(self) -> None:
        return None
