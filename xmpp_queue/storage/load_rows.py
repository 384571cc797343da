"""Rows read after the load, and load rows regrouped: one item row read whole
(a cold item brought back, ``backlog``), and time-ordered (due, seq) rows
gathered per node (SQLite's load of cold due and expiry times)."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from itertools import groupby
from operator import itemgetter

from xmpp_queue.core.model import Item
from xmpp_queue.storage import codec
from xmpp_queue.storage.item_values import EMPTY_HEADERS, frozen_headers
from xmpp_queue.storage.load import DateDecoder, Row


def whole_item(row: Row, when: DateDecoder) -> Item:
    """One item row (``ITEM_FIELDS``, payload included) as the store keeps it."""
    (
        seq,
        node_id,
        item_id,
        publisher,
        payload,
        size,
        published,
        updated,
        locked_by,
        lock_jid,
        locked_at,
        expires,
        available,
        deliveries,
        headers,
        priority,
        item_expires,
        ordering_key,
        acked_at,
    ) = row
    published_at, updated_at = when(published), when(updated)
    assert published_at is not None and updated_at is not None
    return Item(
        node_id,
        item_id,
        seq,
        publisher or "",
        payload,
        published_at,
        updated_at,
        size,
        locked_by,
        lock_jid,
        when(locked_at),
        when(expires),
        when(available),
        deliveries,
        frozen_headers(codec.decode_headers(headers)) if headers else EMPTY_HEADERS,
        priority,
        when(item_expires),
        ordering_key,
        when(acked_at),
    )


def schedule_rows(
    rows: Iterable[tuple[str, int, int]],
) -> Iterator[tuple[str, array[int], array[int]]]:
    """(node id, due, seq) rows in (node, due, seq) order, one group per node."""
    for node_id, group in groupby(rows, key=itemgetter(0)):
        dues, seqs = array("q"), array("q")
        add_due, add_seq = dues.append, seqs.append
        for _, due, seq in group:
            add_due(due)
            add_seq(seq)
        yield node_id, dues, seqs
