"""Why a delivery failed: a nack's reason, a lock timeout, a departure, kept with the
item (``last-error``, ``error-history``), bounded, reserved, and carried into the
dead-letter node (docs/queueing.md "Why it failed")."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tests.kit import ALICE, BOB, OWNER, PUB, FakeClock
from tests.unit.test_service_queue import notices, queue, worker
from xmpp_queue.core.errors import AttributeRefused, BadRequest
from xmpp_queue.core.queue.failures import (
    ERROR_HISTORY,
    HISTORY,
    LAST_ERROR,
    MAX_HISTORY_BYTES,
    MAX_REASON,
    clean_reason,
    history,
    with_failure,
)
from xmpp_queue.core.service import PubSubService


async def held_headers(service: PubSubService, node: str, item_id: str) -> dict[str, str]:
    (item,) = [i for i in (await service.get_items(OWNER, node)).items if i.item_id == item_id]
    return dict(item.headers)


async def test_a_nack_reason_is_kept_with_the_item_and_reaches_the_next_worker(
    service: PubSubService,
) -> None:
    await queue(service, retry_delay="0")
    await worker(service, ALICE, 1)
    await service.publish(PUB, "jobs", "a", "<j/>", 4)
    await worker(service, BOB, 1)
    out = await service.unlock(ALICE, "jobs", "a", reason="ValueError: bad row 7")
    headers = await held_headers(service, "jobs", "a")
    assert headers[LAST_ERROR] == "ValueError: bad row 7"
    (entry,) = history(headers)
    assert entry["reason"] == "ValueError: bad row 7"
    assert entry["delivery"] == 1 and entry["by"] == ALICE.jid
    (notice,) = [e for e in out.effects if getattr(e, "items", None)]
    assert notice.items[0].headers[LAST_ERROR] == "ValueError: bad row 7"  # type: ignore[attr-defined]
    assert notices(out.effects) == [(BOB.jid, "a")]


async def test_a_plain_nack_records_nothing(service: PubSubService) -> None:
    await queue(service, retry_delay="0")
    await worker(service, ALICE, 1)
    await service.publish(PUB, "jobs", "a", "<j/>", 4)
    await service.unlock(ALICE, "jobs", "a")
    assert LAST_ERROR not in await held_headers(service, "jobs", "a")


async def test_the_history_keeps_the_last_few_and_the_dead_letter_carries_them(
    service: PubSubService, clock: FakeClock
) -> None:
    await queue(service, retry_delay="0", max_deliveries="7", lock_timeout="10")
    await worker(service, ALICE, 1)
    await service.publish(PUB, "jobs", "poison", "<j/>", 4)
    for n in range(1, 7):
        await service.unlock(ALICE, "jobs", "poison", reason=f"KeyError: 'k{n}'")
    clock.advance(11)  # the seventh delivery times out: the last straw
    await service.tick()
    assert (await service.get_items(OWNER, "jobs")).items == ()
    headers = await held_headers(service, "jobs/dead-letter", "poison")
    assert headers["reason"] == "max-deliveries"
    assert headers[LAST_ERROR] == "lock timeout"
    entries = history(headers)
    assert len(entries) == HISTORY
    assert [e["reason"] for e in entries] == [
        "KeyError: 'k3'",
        "KeyError: 'k4'",
        "KeyError: 'k5'",
        "KeyError: 'k6'",
        "lock timeout",
    ]
    assert [e["delivery"] for e in entries] == [3, 4, 5, 6, 7]


async def test_a_departed_holder_is_a_failure_too(service: PubSubService) -> None:
    await queue(service, retry_delay="0")
    await worker(service, ALICE, 1)
    await service.publish(PUB, "jobs", "a", "<j/>", 4)
    await service.release_subscriber(ALICE.jid, "unavailable")
    assert (await held_headers(service, "jobs", "a"))[LAST_ERROR] == "holder gone (unavailable)"


async def test_a_reason_past_the_bound_is_refused_and_changes_nothing(
    service: PubSubService,
) -> None:
    await queue(service, retry_delay="0")
    await worker(service, ALICE, 1)
    await service.publish(PUB, "jobs", "a", "<j/>", 4)
    with pytest.raises(BadRequest, match="200 characters"):
        await service.unlock(ALICE, "jobs", "a", reason="x" * (MAX_REASON + 1))
    items = (await service.get_items(OWNER, "jobs")).items
    assert items[0].lock_jid == ALICE.jid and LAST_ERROR not in items[0].headers


async def test_a_batch_nack_keeps_each_item_s_own_reason(service: PubSubService) -> None:
    await queue(service, retry_delay="5")
    await worker(service, ALICE, 2)
    await service.publish(PUB, "jobs", "a", "<j/>", 4)
    await service.publish(PUB, "jobs", "b", "<j/>", 4)
    await service.unlock(ALICE, "jobs", ["a", "b"], reason={"a": "E: a", "b": "E: b"})
    assert (await held_headers(service, "jobs", "a"))[LAST_ERROR] == "E: a"
    assert (await held_headers(service, "jobs", "b"))[LAST_ERROR] == "E: b"


@pytest.mark.parametrize("name", [LAST_ERROR, ERROR_HISTORY])
async def test_publishers_cannot_forge_the_failure_headers(
    service: PubSubService, name: str
) -> None:
    await queue(service)
    with pytest.raises(AttributeRefused, match="set by the service"):
        await service.publish(PUB, "jobs", "a", "<j/>", 4, attributes={name: "fake"})


def test_the_history_is_bounded_whatever_the_reasons() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    headers: dict[str, str] = {"keep": "me"}
    for n in range(50):
        headers = with_failure(headers, "é\n" * 500, n, "w@x/" + "r" * 1000, at)
    assert len(headers[ERROR_HISTORY].encode()) <= MAX_HISTORY_BYTES
    assert len(history(headers)) == HISTORY and headers["keep"] == "me"
    assert len(headers[LAST_ERROR]) <= MAX_REASON and "\n" not in headers[LAST_ERROR]
    assert json.loads(headers[ERROR_HISTORY])[-1]["at"] == "2026-01-01T00:00:00Z"
    assert clean_reason("a\x00b\tc") == "a b c"
    assert history({ERROR_HISTORY: "not json"}) == []
