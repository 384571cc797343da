"""The operations listener over the real service (memory store): metrics text,
probes, the dashboard's JSON, the token guard and the actions."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.kit import ALICE, BOB, OWNER, PUB
from tests.kit.http import TOKEN, Ops
from xmpp_queue.core.effects import ItemNotice, UnlockNotice
from xmpp_queue.core.errors import StorageUnavailable
from xmpp_queue.core.model import SYSTEM, Affiliation
from xmpp_queue.core.service import PubSubService
from xmpp_queue.storage.backend_memory import MemoryBackend


async def _queue(svc: PubSubService, node: str = "jobs", **config: str) -> None:
    """A queue with XEP-0254's immediate hand-over (these tests follow items at once)."""
    config = {"retry_delay": "0", **config}
    values = {"pubsub#queue": ["1"]} | {f"pubsub#queue_{k}": [v] for k, v in config.items()}
    await svc.create_node(OWNER, node, values)
    await svc.set_node_affiliations(OWNER, node, [(PUB.bare, Affiliation.PUBLISHER)])


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(text: str, name: str, **labels: str) -> float:
    return samples(text)[(name, tuple(sorted(labels.items())))]


async def test_metrics_parse_and_count_what_committed(ops: Ops) -> None:
    svc = ops.service
    await _queue(svc)
    for n in range(5):
        await svc.publish(PUB, "jobs", f"i{n}", "<x/>", 4)
    ops.clock.advance(1.5)
    await svc.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["2"]})
    ops.clock.advance(0.5)
    await svc.retract(ALICE, "jobs", "i0")

    status, text = await ops.get("/metrics")
    assert status == 200
    overview = {r.node: r for r in await svc.queue_overview(SYSTEM)}["jobs"]
    assert value(text, "xmpp_queue_waiting", node="jobs") == overview.backlog == 2
    assert value(text, "xmpp_queue_in_flight", node="jobs") == overview.in_flight == 2
    assert value(text, "xmpp_queue_dead_letters", node="jobs") == 0
    assert value(text, "xmpp_queue_oldest_waiting_seconds", node="jobs") == 2.0
    assert value(text, "xmpp_queue_published_total", node="jobs") == 5
    assert value(text, "xmpp_queue_delivered_total", node="jobs") == 3
    assert value(text, "xmpp_queue_acked_total", node="jobs") == 1
    # publish -> first delivery: two items waited 1.5 s, the third 2.0 s
    assert value(text, "xmpp_queue_publish_to_delivery_seconds_count", node="jobs") == 3
    assert value(text, "xmpp_queue_publish_to_delivery_seconds_sum", node="jobs") == 5.0
    assert value(text, "xmpp_queue_delivery_to_ack_seconds_sum", node="jobs") == 0.5
    assert value(text, "xmpp_queue_commit_batch_operations_count") >= 1
    assert value(text, "xmpp_queue_commit_seconds_count") >= 1
    assert value(text, "xmpp_queue_xmpp_connected") == 0
    assert ("process_cpu_seconds_total", ()) in samples(text)


async def test_node_labels_past_the_limit_fold_into_other(ops: Ops) -> None:
    svc = ops.service
    ops.metrics.labels.max_nodes = 2
    for node in ("a", "b", "c", "d"):
        await _queue(svc, node)
        await svc.publish(PUB, node, "x", "<x/>", 4)
    _, text = await ops.get("/metrics")
    assert value(text, "xmpp_queue_published_total", node="a") == 1
    assert value(text, "xmpp_queue_published_total", node="b") == 1
    assert value(text, "xmpp_queue_published_total", node="_other") == 2
    assert value(text, "xmpp_queue_waiting", node="_other") == 2
    assert value(text, "xmpp_queue_metrics_nodes_folded") == 2
    labels = {dict(k[1]).get("node") for k in samples(text) if k[0] == "xmpp_queue_waiting"}
    assert labels == {"a", "b", "_other"}


async def test_probes(ops: Ops) -> None:
    assert (await ops.get("/healthz"))[0] == 200
    status, body = await ops.get("/readyz")
    assert status == 503 and "not connected" in body  # no XMPP session in this test
    ops.metrics.session_started()
    status, body = await ops.get("/readyz")
    assert status == 200, body


async def test_readyz_stays_not_ready_after_a_failed_write_until_a_write_succeeds(
    ops: Ops,
) -> None:
    """Issue 27 point 5: a full disk stays "not ready" although reads go through.
    The memory backend fails writes on demand, as a full disk does; retry_for 0:
    a disk that stays full (the store does not wait for it to heal)."""
    ops.metrics.session_started()
    await _queue(ops.service)
    store = ops.store
    assert store is not None
    backend = store.backend
    assert isinstance(backend, MemoryBackend)
    store.health.retry_for = 0.0
    backend.fail_next = 1_000
    with pytest.raises(StorageUnavailable):
        await ops.service.publish(PUB, "jobs", "i1", "<x/>", 4)
    status, body = await ops.get("/readyz")
    assert status == 503 and "the last write failed" in body, body
    # A read-only batch commits nothing: it must not make the write look healed.
    assert (await ops.service.queue_details(SYSTEM, "jobs")) is not None
    status, body = await ops.get("/readyz")
    assert status == 503, body
    backend.fail_next = 0
    await ops.service.publish(PUB, "jobs", "i2", "<x/>", 4)
    status, body = await ops.get("/readyz")
    assert status == 200, body


async def test_pages_and_json(ops: Ops) -> None:
    await _queue(ops.service)
    await ops.service.publish(PUB, "jobs", "i1", "<x/>", 4)
    status, html = await ops.get("/")
    assert status == 200 and "/static/app.js" in html
    assert (await ops.get("/static/app.js"))[0] == 200
    assert (await ops.get("/static/../config.py"))[0] == 404
    status, text = await ops.get("/api/queue?node=jobs")
    assert status == 200 and '"waiting": 1' in text
    assert (await ops.get("/api/queue?node=nope"))[0] == 404


async def test_a_refused_action_changes_nothing(ops: Ops) -> None:
    svc = ops.service
    await _queue(svc)
    await svc.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    await svc.publish(PUB, "jobs", "i1", "<x/>", 4)
    before = await svc.queue_details(SYSTEM, "jobs")
    for token in (None, "wrong-token-wrong-token", TOKEN[:-1]):
        for action, body in (
            ("unlock", {"node": "jobs", "item": "i1"}),
            ("purge", {"node": "jobs", "confirm": True}),
        ):
            status, reply = await ops.post(f"/api/actions/{action}", body, token)
            assert status in (401, 403), reply
    after = await svc.queue_details(SYSTEM, "jobs")
    assert [(i.item_id, i.locked_by) for i in after.locks] == [
        (i.item_id, i.locked_by) for i in before.locks
    ]
    assert after.backlog == before.backlog
    assert ops.sent == []


async def test_unlock_moves_the_item_to_another_worker(ops: Ops) -> None:
    svc = ops.service
    await _queue(svc)
    await svc.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    await svc.publish(PUB, "jobs", "i1", "<x/>", 4)
    await svc.subscribe(BOB, "jobs", BOB.jid, {"pubsub#queue_requests": ["1"]})
    status, reply = await ops.post("/api/actions/unlock", {"node": "jobs", "item": "i1"}, TOKEN)
    assert status == 200 and reply["count"] == 1, reply
    locks = (await svc.queue_details(SYSTEM, "jobs")).locks
    assert [(i.item_id, i.lock_jid) for i in locks] == [("i1", BOB.jid)]
    assert any(isinstance(e, UnlockNotice) and e.to == ALICE.jid for e in ops.sent)
    assert any(isinstance(e, ItemNotice) and e.to == BOB.jid for e in ops.sent)
    _, text = await ops.get("/metrics")
    assert value(text, "xmpp_queue_unlocked_total", node="jobs") == 1


async def test_purge_needs_confirmation_and_redrive_counts(ops: Ops) -> None:
    svc = ops.service
    await _queue(svc, max_deliveries="1")
    await svc.subscribe(ALICE, "jobs", ALICE.jid, {"pubsub#queue_requests": ["1"]})
    await svc.publish(PUB, "jobs", "i1", "<x/>", 4)
    await svc.unlock(ALICE, "jobs", "i1")  # past max_deliveries: dead-lettered
    status, _ = await ops.post("/api/actions/purge", {"node": "jobs"}, TOKEN)
    assert status == 400
    await svc.unsubscribe(ALICE, "jobs", ALICE.jid)
    status, reply = await ops.post("/api/actions/redrive", {"node": "jobs"}, TOKEN)
    assert status == 200 and reply["count"] == 1, reply
    _, text = await ops.get("/metrics")
    assert value(text, "xmpp_queue_redriven_total", node="jobs") == 1
    assert value(text, "xmpp_queue_dead_lettered_total", node="jobs") == 1
    status, reply = await ops.post("/api/actions/purge", {"node": "jobs", "confirm": True}, TOKEN)
    assert status == 200 and reply["count"] == 1
    assert (await svc.queue_details(SYSTEM, "jobs")).backlog == 0


def test_queue_json_counts_delayed_items_and_shows_attributes() -> None:
    """Issue 19: the dashboard's JSON has the delayed count and each lock's and dead
    letter's attributes (the publisher's; the service's own headers apart)."""
    from datetime import UTC, datetime

    from xmpp_queue.core.model import Item
    from xmpp_queue.core.reports import QueueSummary
    from xmpp_queue.http.queues import dead_letter_json, lock_json, summary_json

    now = datetime(2026, 1, 1, tzinfo=UTC)
    summary = QueueSummary("q", 5, 1, 1, None, 0, 0, 0, delayed=2)
    assert summary_json(summary)["delayed"] == 2
    locked = Item("q", "i", 1, "p@x", "<a/>", now, now, headers={"k": "v", "delivery-attempt": "1"})
    assert lock_json(locked, now)["attributes"] == {"k": "v"}
    dead = Item("dl", "i", 1, "p@x", "<a/>", now, now, headers={"reason": "expired", "t": "x"})
    assert dead_letter_json(dead)["attributes"] == {"t": "x"}
    assert dead_letter_json(dead)["reason"] == "expired"


def test_locks_and_dead_letters_show_why_their_deliveries_failed() -> None:
    """Issue 24: the last error and the bounded history, typed, beside each lock and
    dead letter (and never among the publisher's attributes)."""
    from datetime import UTC, datetime

    from xmpp_queue.core.model import Item
    from xmpp_queue.core.queue.failures import with_failure
    from xmpp_queue.http.queues import dead_letter_json, lock_json

    now = datetime(2026, 1, 1, tzinfo=UTC)
    headers = with_failure({"t": "x"}, "ValueError: bad", 1, "w@x/w1", now)
    locked = Item("q", "i", 1, "p@x", "<a/>", now, now, headers=headers)
    shown = lock_json(locked, now)
    assert shown["last_error"] == "ValueError: bad" and shown["attributes"] == {"t": "x"}
    assert shown["errors"] == [
        {"delivery": 1, "at": "2026-01-01T00:00:00Z", "by": "w@x/w1", "reason": "ValueError: bad"}
    ]
    dead = Item(
        "dl", "i", 1, "p@x", "<a/>", now, now, headers=headers | {"reason": "max-deliveries"}
    )
    assert dead_letter_json(dead)["last_error"] == "ValueError: bad"
    assert lock_json(Item("q", "j", 2, "p@x", None, now, now), now)["errors"] == []


async def test_metrics_count_delayed_and_deduplicated_items(ops: Ops) -> None:
    """The message model's figures: delayed items apart from the waiting ones, and the
    publishes the dedup window answered without storing anything."""
    from datetime import timedelta

    from xmpp_queue.core.attributes import format_datetime

    svc = ops.service
    await _queue(svc)
    await svc.configure_node(OWNER, "jobs", {"pubsub#queue_dedup_window": ["60"]})
    later = format_datetime(ops.clock.now + timedelta(seconds=30))
    await svc.publish(PUB, "jobs", "d", "<x/>", 4, attributes={"Start": later})
    await svc.publish(PUB, "jobs", "n", "<x/>", 4)
    await svc.publish(PUB, "jobs", "n", "<x/>", 4)  # a repeat of a queued id
    status, text = await ops.get("/metrics")
    assert status == 200
    assert value(text, "xmpp_queue_waiting", node="jobs") == 2
    assert value(text, "xmpp_queue_delayed", node="jobs") == 1
    assert value(text, "xmpp_queue_deduplicated_total", node="jobs") == 1


async def test_the_affiliation_action_lets_a_worker_into_a_whitelisted_queue(ops: Ops) -> None:
    """Issue 24: new queues are whitelisted; the queue page's action (behind the token,
    like the others) makes a worker account a member, and the page lists it."""
    svc = ops.service
    await _queue(svc)
    carol = "carol@example.org"
    body = {"node": "jobs", "jid": carol, "affiliation": "member"}
    for token in (None, "wrong-token-wrong-token"):
        status, _ = await ops.post("/api/actions/affiliation", body, token)
        assert status in (401, 403)
    status, reply = await ops.post(
        "/api/actions/affiliation", {**body, "affiliation": "boss"}, TOKEN
    )
    assert status == 400 and "one of" in str(reply)
    status, reply = await ops.post("/api/actions/affiliation", {**body, "jid": "x"}, TOKEN)
    assert status == 400
    entries = {e.jid: e.affiliation for e in await svc.get_node_affiliations(SYSTEM, "jobs")}
    assert carol not in entries  # nothing changed by the refusals

    status, reply = await ops.post("/api/actions/affiliation", body, TOKEN)
    assert status == 200 and reply["message"] == f"{carol} is now member", reply
    entries = {e.jid: e.affiliation for e in await svc.get_node_affiliations(SYSTEM, "jobs")}
    assert entries[carol] is Affiliation.MEMBER
    _, text = await ops.get("/api/queue?node=jobs")
    assert {"jid": carol, "affiliation": "member"} in json.loads(text)["affiliations"]

    status, _ = await ops.post("/api/actions/affiliation", {**body, "affiliation": "none"}, TOKEN)
    assert status == 200
    assert carol not in {e.jid for e in await svc.get_node_affiliations(SYSTEM, "jobs")}


async def test_metrics_count_the_items_a_bound_queues_filter_kept_out(ops: Ops) -> None:
    """Issue 21's counter: ``xmpp_queue_filtered_total`` per bound queue, summed from
    the ledger's ``filtered`` rows (one per committed batch, with a count)."""
    svc = ops.service
    await svc.create_node(OWNER, "billing", {})
    await svc.set_node_affiliations(OWNER, "billing", [(PUB.bare, Affiliation.PUBLISHER)])
    await _queue(svc, "eu", topic="billing", filter='attributes.region = "eu"')
    for n, region in enumerate(["eu", "us", "us", "ap", "eu"]):
        await svc.publish(PUB, "billing", f"e{n}", "<x/>", 4, attributes={"region": region})
    _, text = await ops.get("/metrics")
    assert value(text, "xmpp_queue_filtered_total", node="eu") == 3
    assert value(text, "xmpp_queue_published_total", node="eu") == 2
