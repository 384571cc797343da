"""One partition's publisher connection in ``pipeline enqueue``: batches, the
row-by-row re-send of a refused batch, and the per-key order of ordered input.

Batches: consecutive rows go out several per publish (XEP-0060 §13.11), which
the service stores all or none in one commit. A refusal therefore means that
nothing of the batch was stored, so its rows are sent again one per publish and
each ends published or rejected with its own reason: the rejects file names the
row the service refused, not its neighbours.

Ordering keys (``--ordering-key-column``): the rows of one key must reach the
queue in the input's order. Spark puts all rows of a key into one partition in
input order (``enqueue.py``); here, **a key is never in two unanswered publishes
at once**: a publish (a batch, or one row of a refused batch's re-send) that
holds a row of key K starts only after every earlier publish holding K was
answered, its refused rows re-sent one by one and answered too. Publishes of
other keys go on meanwhile through the same window. Without that rule two
publishes of one key could overtake each other: a refused batch's rows are
re-sent after the batches behind it were stored, and a ``wait`` error (the
publish rate) is retried after a backoff while later publishes go through.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from xmpp_queue.client.attributes import headers_bytes
from xmpp_queue.pipeline.enqueue_summary import FAILED, PUBLISHED, REJECTED
from xmpp_queue.pipeline.item_columns import Outgoing, headers_of, key_of
from xmpp_queue.pipeline.payloads import ITEM_ID, NOT_SENT, PAYLOAD, REFUSED
from xmpp_queue.pipeline.settings import PublisherConfig

BATCH_PAYLOAD_BYTES = 64 * 1024
"""Payload and attribute bytes per batch publish at most (a single larger row goes alone). XMPP
servers cap a client's stanza size (Prosody and ejabberd at 256 KiB by default) and
close the stream above it, which would fail every publish in flight."""

Outcome = tuple[str, str | None, Any]


class PartitionSender:
    """One publisher connection for a partition, opened on first use and opened
    again for the next chunk after a failure (rows already answered keep their
    outcome; with --id-column a re-run resends the rest safely)."""

    def __init__(self, config: PublisherConfig, node: str, ordered: bool = False) -> None:
        self.config = config
        self.node = node
        self.ordered = ordered
        self.publisher: Any = None
        self.retries_seen = 0
        """``wait`` errors (the service's publish rate) retried by closed publishers."""

    @property
    def throttled(self) -> int:
        """How many publishes the service asked to retry later (``[limits] publish_rate``)."""
        live = self.publisher.retries if self.publisher is not None else 0
        return self.retries_seen + live

    async def _open(self) -> None:
        from xmpp_queue.client import Publisher

        cfg = self.config
        publisher = Publisher(
            cfg.account,
            window=cfg.window,
            # XML payloads were checked by xml_problem; JSON containers are built well-formed.
            check_payloads=False,
        )
        await publisher.connect()
        self.publisher = publisher

    async def close(self) -> None:
        publisher, self.publisher = self.publisher, None
        if publisher is not None:
            self.retries_seen += publisher.retries
            try:
                await publisher.close()
            except Exception:  # closing a broken stream must not hide the outcomes
                publisher.abort()

    async def publish_all(self, rows: list[Any]) -> list[Outcome]:
        """Submit every row through the publisher's window, then collect the answers.

        Rows go in batches of ``config.batch``; the rows of a batch the service
        refused are sent again one by one (see the module docstring)."""
        if not rows:
            return []
        if self.publisher is None:
            try:
                await self._open()
            except Exception as exc:  # reported per row; the other partitions go on
                reason = f"{NOT_SENT}: cannot connect ({type(exc).__name__}: {exc})"
                return [(FAILED, reason, row) for row in rows]
        groups = batches(rows, self.config.batch)
        if self.ordered:
            results = await self._send_keyed(groups)
        else:
            results, refused = await self._send(groups)
            if refused:
                singles, _ = await self._send([[row] for row in refused])
                results += singles
        if any(status == FAILED for status, _, _ in results):
            await self.close()  # the stream is suspect: reconnect for the next chunk
        return results

    async def _send(self, groups: Sequence[list[Any]]) -> tuple[list[Outcome], list[Any]]:
        """Outcomes of *groups* (one publish each), and the rows of refused batches."""
        pending: list[tuple[list[Any], asyncio.Future[Any] | BaseException]] = []
        for group in groups:
            try:
                pending.append((group, await self._submit(group)))
            except Exception as exc:  # the stream broke while sending
                pending.append((group, exc))
        results: list[Outcome] = []
        refused: list[Any] = []
        for group, future in pending:
            outcomes = await self._answer(group, future)
            if outcomes is None:
                refused += group  # all or none: nothing of it was stored
            else:
                results += outcomes
        return results, refused

    async def _answer(
        self, group: list[Any], future: asyncio.Future[Any] | BaseException
    ) -> list[Outcome] | None:
        """The outcome of one publish per row; None when a batch was refused whole."""
        try:
            if isinstance(future, BaseException):
                raise future
            await future
        except Exception as exc:
            status, reason, _ = _failure(exc, group[0])
            if status == REJECTED and len(group) > 1:
                return None
            return [(status, reason, row) for row in group]
        return [(PUBLISHED, None, row) for row in group]

    async def _send_keyed(self, groups: Sequence[list[Any]]) -> list[Outcome]:
        """Like :meth:`_send` plus the re-send, with the per-key rule of the module
        docstring: each group is a task that first waits for the tasks of the
        earlier groups sharing one of its keys."""
        last: dict[str, asyncio.Task[list[Outcome]]] = {}
        tasks: list[asyncio.Task[list[Outcome]]] = []
        for group in groups:
            keys = {k for k in map(key_of, group) if k is not None}
            before = {id(t): t for t in (last[k] for k in keys if k in last)}
            task = asyncio.ensure_future(self._publish_after(group, list(before.values())))
            tasks.append(task)
            for key in keys:
                last[key] = task
        results: list[Outcome] = []
        for task in tasks:  # in submission order, as _send reports them
            results += await task
        return results

    async def _publish_after(
        self, group: list[Any], before: list[asyncio.Task[list[Outcome]]]
    ) -> list[Outcome]:
        if before:
            await asyncio.wait(before)
        try:
            future: asyncio.Future[Any] | BaseException = await self._submit(group)
        except Exception as exc:
            future = exc
        outcomes = await self._answer(group, future)
        if outcomes is not None:
            return outcomes
        results: list[Outcome] = []
        for row in group:  # the refused batch's rows, one answered publish at a time
            try:
                single: asyncio.Future[Any] | BaseException = await self._submit([row])
            except Exception as exc:
                single = exc
            results += await self._answer([row], single) or []
        return results

    async def _submit(self, group: list[Any]) -> asyncio.Future[Any]:
        from xmpp_queue.client import PublishItem

        if len(group) == 1:
            row = group[0]
            if isinstance(row, Outgoing):
                return await self.publisher.submit(
                    self.node, row[PAYLOAD], row[ITEM_ID], attributes=row.headers
                )
            return await self.publisher.submit(self.node, row[PAYLOAD], row[ITEM_ID])
        items = [
            PublishItem(row[PAYLOAD], row[ITEM_ID], row.headers)
            if isinstance(row, Outgoing)
            else (row[PAYLOAD], row[ITEM_ID])
            for row in group
        ]
        return await self.publisher.submit_batch(self.node, items)


def batches(
    rows: Sequence[Any], size: int, max_bytes: int = BATCH_PAYLOAD_BYTES
) -> list[list[Any]]:
    """Consecutive rows, at most *size* per batch and *max_bytes* of payload and
    attribute headers (a row larger than that on its own is a batch of one)."""
    out: list[list[Any]] = []
    group: list[Any] = []
    weight = 0
    for row in rows:
        payload = row[PAYLOAD]
        n = len(payload.encode("utf-8")) if payload else 0
        n += headers_bytes(headers_of(row))
        if group and (len(group) >= size or weight + n > max_bytes):
            out.append(group)
            group, weight = [], 0
        group.append(row)
        weight += n
    if group:
        out.append(group)
    return out


def _failure(exc: Exception, row: Any) -> Outcome:
    """A refusal by the service (rejected) or a transport failure (not sent)."""
    from xmpp_queue.client import PublishError

    if isinstance(exc, PublishError):
        if exc.condition in ("connection-lost", "remote-server-timeout"):
            return (FAILED, f"{NOT_SENT}: {exc.condition}", row)
        return (REJECTED, f"{REFUSED}: {exc}", row)
    return (FAILED, f"{NOT_SENT}: {type(exc).__name__}: {exc}", row)
