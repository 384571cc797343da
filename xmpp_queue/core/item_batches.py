"""Requests that name several items (XEP-0060 §13.11 "Batch Processing").

A batch is one operation: the service loops over its items inside one savepoint,
so the first item that fails undoes the ones before it and its error is the
answer (all or none, as §13.11 asks). What is shared here is the guard on the
ids and the merging of the notices a batch produced, so a batch of acks costs
the holder one retract notice instead of one per item.
"""

from __future__ import annotations

from collections.abc import Sequence

from xmpp_queue.core.access import check_id
from xmpp_queue.core.effects import Effect, RetractNotice
from xmpp_queue.core.errors import BadRequest, ItemRequired
from xmpp_queue.core.subscribe_options import MAX_BATCH_ITEMS


def check_batch(item_ids: str | Sequence[str]) -> tuple[str, ...]:
    """The ids of a request that may name several: at least one, at most
    ``MAX_BATCH_ITEMS``, each a valid id."""
    ids = (item_ids,) if isinstance(item_ids, str) else tuple(item_ids)
    if not ids:
        raise ItemRequired()
    if len(ids) > MAX_BATCH_ITEMS:
        raise BadRequest(f"at most {MAX_BATCH_ITEMS} items per request")
    for item_id in ids:
        check_id(item_id, "item id")
    return ids


def merge_retract_notices(effects: list[Effect], start: int) -> None:
    """Merge the retract notices in ``effects[start:]`` that go to the same
    recipient for the same node and subscriptions into the first of them
    (XEP-0060 §7.2.2.1 allows several ``<retract/>`` in one event). Other effects
    keep their places."""
    merged: dict[tuple[str, str, tuple[str, ...], bool], int] = {}
    out: list[Effect] = []
    for effect in effects[start:]:
        if isinstance(effect, RetractNotice):
            key = (effect.to, effect.node, effect.subids, effect.headline)
            at = merged.get(key)
            if at is not None:
                first = out[at]
                assert isinstance(first, RetractNotice)
                out[at] = RetractNotice(
                    first.to,
                    first.node,
                    first.item_ids + effect.item_ids,
                    first.subids,
                    first.headline,
                )
                continue
            merged[key] = len(out)
        out.append(effect)
    effects[start:] = out
