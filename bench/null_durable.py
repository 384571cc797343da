"""The null component's `durable` mode: the least a queue that keeps its items must do.

Why: issue 26 asks for our p99 publish -> delivery at 500/s within the null component's
p99 plus one raw commit's p99. That floor adds the two as if a durable queue paid one
commit beside the null path. A queue also commits every ack, and a publish that lands
while an ack is being committed waits for it. This mode measures that floor directly:
the null component's stanza flow (`message` mode), and before anything one socket read
produced is written back, one SQLite commit of what that read asked for (a row inserted
per published item, deleted per retract), on the event loop, with the component's
pragmas (WAL, ``synchronous=FULL``, ``BEGIN IMMEDIATE``). So every answer and
notification follows its own operation's fsync, and a stanza that arrives during a
commit waits for it, as in the real component; nothing else (no parsing beyond the
regexes, no locks, no ledger, no dispatch logic) is done.

`PgDurable` is the same commit on PostgreSQL (`asyncpg`, one statement per read, sent
without ``BEGIN``/``COMMIT``, like the real component's steady commit).
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

_ITEM_IDS = re.compile(rb"<item\b[^>]*?\bid=(?:'([^']*)'|\"([^\"]*)\")")
_PAYLOAD = re.compile(rb"<item\b[^>]*>(.*?)</item>", re.S)


def _ids(stanza: bytes) -> list[str]:
    return [(m.group(1) or m.group(2) or b"").decode() for m in _ITEM_IDS.finditer(stanza)]


class Operations:
    """What one read's stanzas ask to keep or drop: the rows of one commit."""

    def __init__(self) -> None:
        self.added: list[tuple[str, str]] = []
        self.removed: list[str] = []

    def note(self, stanza: bytes) -> None:
        if not stanza.startswith(b"<iq"):
            return
        if b"<publish" in stanza:
            payloads = [m.group(1).decode() for m in _PAYLOAD.finditer(stanza)]
            ids = _ids(stanza)
            self.added += zip(ids, payloads + [""] * (len(ids) - len(payloads)), strict=True)
        elif b"<retract" in stanza:  # `<retract node=...><item id=.../>...</retract>`
            self.removed += _ids(stanza)

    def __bool__(self) -> bool:
        return bool(self.added or self.removed)


class SqliteDurable:
    """One durable SQLite commit per read, on the loop, as the component commits.

    With *checkpointer*, the commits never checkpoint the log themselves
    (``wal_autocheckpoint=0``): a thread of its own, on its own connection, runs a
    passive checkpoint every 100 ms, so a checkpoint's copy and sync of the database
    file never stall the loop (they may still share the disk with a commit's sync)."""

    def __init__(self, path: Path, checkpointer: bool = False) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS items (id TEXT PRIMARY KEY, payload TEXT)")
        if checkpointer:
            self.conn.execute("PRAGMA wal_autocheckpoint=0")
            threading.Thread(target=self._checkpoints, args=(path,), daemon=True).start()

    @staticmethod
    def _checkpoints(path: Path) -> None:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA synchronous=FULL")
        while True:
            time.sleep(0.1)
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    async def commit(self, ops: Operations) -> None:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        if ops.added:
            conn.executemany("INSERT OR REPLACE INTO items VALUES (?, ?)", ops.added)
        if ops.removed:
            conn.executemany("DELETE FROM items WHERE id = ?", [(i,) for i in ops.removed])
        conn.execute("COMMIT")


class PgDurable:
    """One PostgreSQL statement per read (its own transaction), awaited before writing."""

    STATEMENT = (
        "WITH added AS (INSERT INTO items SELECT * FROM unnest($1::text[], $2::text[]) "
        "ON CONFLICT (id) DO UPDATE SET payload = excluded.payload RETURNING 1) "
        "DELETE FROM items WHERE id = ANY($3::text[])"
    )

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    @classmethod
    async def open(cls, url: str) -> PgDurable:
        import asyncpg

        conn = await asyncpg.connect(url)
        await conn.execute("DROP TABLE IF EXISTS items")
        await conn.execute("CREATE TABLE items (id TEXT PRIMARY KEY, payload TEXT)")
        return cls(conn)

    async def commit(self, ops: Operations) -> None:
        ids = [i for i, _ in ops.added]
        payloads = [p for _, p in ops.added]
        await self.conn.execute(self.STATEMENT, ids, payloads, ops.removed)
