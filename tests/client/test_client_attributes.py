"""Item attributes in the client (issue 19): publish keywords → SHIM headers in
the ``<item/>``, and the headers of every delivery path → ``job.attributes``.

The other side of the wire is the service's own code, not a copy of it: what the
client builds is read by ``xmpp.payloads.item_content`` (the publish parser), and
the notifications the client parses are written by ``xmpp.text_render`` (the text the
component sends for queue items, single and batched).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone
from xml.etree import ElementTree as ET

import pytest

from xmpp_queue.client import PublishItem, wire
from xmpp_queue.client.attributes import item_headers
from xmpp_queue.client.jobs import Job, JobRunner
from xmpp_queue.core.attributes import RESERVED, schedule
from xmpp_queue.core.effects import ItemNotice, NoticeItem
from xmpp_queue.core.model import NodeConfig, Urgency
from xmpp_queue.xmpp.iq_results import items_result
from xmpp_queue.xmpp.payloads import item_content
from xmpp_queue.xmpp.text_render import notice_text

P = "{http://jabber.org/protocol/pubsub}"
NOW = datetime(2026, 11, 25, 8, 0, 0, tzinfo=UTC)


def parse(xml: str) -> ET.Element:
    return ET.fromstring(f"<wrap xmlns='jabber:client'>{xml}</wrap>")[0]


def published_items(body: str) -> list[ET.Element]:
    return parse(body).findall(f"{P}publish/{P}item")


# --- building --------------------------------------------------------------------------


def test_keywords_become_registered_shim_headers() -> None:
    headers = item_headers(
        {"tenant": "acme", "kind": "invoice"},
        delay=timedelta(seconds=90),
        ttl=3600,
        priority="HIGH",
        now=NOW,
    )
    assert headers == {
        "tenant": "acme",
        "kind": "invoice",
        "Start": "2026-11-25T08:01:30Z",
        "TTL": "3600",
        "Urgency": "high",
    }
    # deliver_at in any zone is written in UTC with Z (XEP-0082); Urgency enum too
    plus2 = timezone(timedelta(hours=2))
    headers = item_headers(
        deliver_at=datetime(2026, 11, 25, 12, 0, tzinfo=plus2), priority=Urgency.LOW
    )
    assert headers == {"Start": "2026-11-25T10:00:00Z", "Urgency": "low"}
    assert item_headers(delay=1.5, now=NOW)["Start"] == "2026-11-25T08:00:01.500000Z"
    assert item_headers() == {}


def test_the_service_reads_the_headers_as_the_client_meant_them() -> None:
    """The core's schedule() of the client's headers: start, expiry and priority."""
    headers = item_headers({"k": "v"}, delay=30, ttl=60, priority="high", now=NOW)
    plan = schedule(headers, NodeConfig(queue=True), NOW)
    assert plan.available_at == NOW + timedelta(seconds=30)
    assert plan.expires_at == NOW + timedelta(seconds=60)
    assert plan.priority == Urgency.HIGH


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"delay": 5, "deliver_at": NOW}, "delay or deliver_at, not both"),
        ({"delay": -1}, "delay must not be negative"),
        ({"delay": "5"}, "delay must be seconds"),
        ({"delay": True}, "delay must be seconds"),
        ({"deliver_at": datetime(2026, 1, 1)}, "aware datetime"),
        ({"ttl": 0}, "ttl must be a whole number of seconds, at least 1"),
        ({"ttl": 1.5}, "ttl must be a whole number"),
        ({"priority": "urgent"}, "priority must be 'high', 'medium' or 'low'"),
        ({"attributes": {"delivery-attempt": "1"}}, "set by the service"),
        ({"attributes": {"reason": "x"}}, "set by the service"),
        ({"attributes": {"k": 1}}, "must be strings"),
        ({"attributes": {" k": "v"}}, "without outer spaces"),
        ({"attributes": {"k": "a\x01b"}}, "control characters"),
        ({"attributes": {"Urgency": "low"}, "priority": "high"}, "not both"),
        ({"attributes": {"Start": "2026-11-25T09:00:00Z"}, "delay": 1}, "not both"),
        ({"attributes": {"TTL": "5"}, "ttl": 5}, "not both"),
    ],
)
def test_client_side_refusals_are_clear_value_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        item_headers(**kwargs)


def test_the_client_refuses_every_name_the_service_reserves() -> None:
    for name in RESERVED:
        with pytest.raises(ValueError, match="set by the service"):
            item_headers({name: "x"})


def test_publish_puts_headers_after_the_payload_and_the_service_parses_them() -> None:
    headers = {"tenant": "a&b <c>", "quote'name": "v", "Urgency": "low"}
    (item,) = published_items(wire.publish("jobs", "<job xmlns='urn:x'/>", "i1", headers))
    assert [child.tag for child in item] == ["{urn:x}job", f"{{{wire.SHIM_NS}}}headers"]
    payload, size, attributes = item_content(item)
    assert payload is not None and "job" in payload and size > 0
    assert attributes == headers
    # without payload the headers stand alone; without either the item is empty
    (bare_item,) = published_items(wire.publish("jobs", None, "i2", {"k": "v"}))
    assert item_content(bare_item) == (None, 0, {"k": "v"})
    assert wire.publish("jobs", "<a/>", "i3", {}) == wire.publish("jobs", "<a/>", "i3")


def test_batch_entries_keep_their_own_headers_and_old_tuples_still_work() -> None:
    entries = [
        PublishItem("<a/>", "x", {"k": "1"}, priority="high"),
        PublishItem("<b/>", None, ttl=10),
    ]
    body = wire.publish_items(
        "jobs", [("<c/>", "y"), *[(e.payload, e.item_id, e.headers(NOW)) for e in entries]]
    )
    parsed = [item_content(i)[2] for i in published_items(body)]
    assert parsed == [{}, {"k": "1", "Urgency": "high"}, {"TTL": "10"}]


# --- reading: every delivery path gives job.attributes ---------------------------------


def notice(*items: NoticeItem) -> ET.Element:
    effect = ItemNotice("w@x/r", "jobs", tuple(items), subids=("sub-1",))
    text = notice_text(effect, "queue.x", "n1")
    assert text is not None
    return parse(text)


SENT = {"tenant": "acme", "Urgency": "high", "Start": "2026-11-25T08:00:01Z", "TTL": "60"}


def test_a_single_notification_carries_the_attributes_at_message_level() -> None:
    message = notice(
        NoticeItem("i1", "<a xmlns='urn:x'/>", None, {**SENT, "delivery-attempt": "2"})
    )
    assert message.find(f"{{{wire.SHIM_NS}}}headers") is not None  # where this path puts them
    (event,) = wire.parse_event(message)
    assert isinstance(event, wire.ItemEvent)
    assert event.headers["SubID"] == "sub-1" and event.headers["delivery-attempt"] == "2"
    assert event.attributes == SENT  # the service's own names left out
    assert event.priority == "high" and event.ttl == 60
    assert event.deliver_at == datetime(2026, 11, 25, 8, 0, 1, tzinfo=UTC)
    assert event.expires_at is None


def test_a_batched_notification_gives_each_item_its_own_attributes() -> None:
    message = notice(
        NoticeItem("i1", "<a xmlns='urn:x'/>", None, {"k": "1", "delivery-attempt": "1"}),
        NoticeItem("i2", "<a xmlns='urn:x'/>", None, {"k": "2", "Urgency": "low"}),
        NoticeItem("i3", "<a xmlns='urn:x'/>", None, {}),
    )
    events = wire.parse_event(message)
    assert [e.attributes for e in events if isinstance(e, wire.ItemEvent)] == [
        {"k": "1"},
        {"k": "2", "Urgency": "low"},
        {},
    ]
    assert [e.priority for e in events if isinstance(e, wire.ItemEvent)] == [
        "medium",
        "low",
        "medium",
    ]


def test_items_retrieval_reads_each_items_attributes() -> None:
    from slixmpp import Iq

    from xmpp_queue.core.model import Item, ItemPage

    def stored(item_id: str, headers: dict[str, str]) -> Item:
        return Item("dl", item_id, 1, "p@x", "<a xmlns='urn:x'/>", NOW, NOW, headers=headers)

    page = ItemPage(
        (
            stored("d1", {"tenant": "acme", "reason": "expired", "origin-node": "jobs"}),
            stored("d2", {}),
        ),
        2,
    )
    iq = items_result(Iq(stype="get", sfrom="p@x", sto="queue.x", sid="r1"), "dl", page)
    result = parse(str(iq))
    items = wire.result_items(result)
    assert [(i.item_id, i.attributes) for i in items] == [("d1", {"tenant": "acme"}), ("d2", {})]
    assert items[0].headers["reason"] == "expired"
    assert items[0].element is not None and items[0].element.tag == "{urn:x}a"


async def test_a_worker_job_gets_the_attributes() -> None:
    seen: list[Job] = []

    class Ops:
        async def retract(self, node: str, item_id: str) -> None:
            pass

    async def handler(job: Job) -> None:
        seen.append(job)

    runner = JobRunner(Ops(), handler, 1)  # type: ignore[arg-type]
    (event,) = wire.parse_event(
        notice(NoticeItem("i1", "<a xmlns='urn:x'/>", None, {**SENT, "delivery-attempt": "3"}))
    )
    assert isinstance(event, wire.ItemEvent)
    runner.offer(event)
    for _ in range(5):
        await asyncio.sleep(0)
    (job,) = seen
    assert job.attributes == SENT and job.delivery == 3 and job.priority == "high"
    assert job.ttl == 60 and job.deliver_at is not None


async def test_publisher_refuses_a_bad_combination_before_sending_anything() -> None:
    from xmpp_queue.client import Publisher

    publisher = Publisher("p@x", "pw", "queue.x")  # never connected: nothing may be sent
    with pytest.raises(ValueError, match="not both"):
        await publisher.publish("jobs", "<a/>", delay=1, deliver_at=NOW)
    with pytest.raises(ValueError, match="priority"):
        await publisher.submit_batch("jobs", [PublishItem("<a/>", "i", priority="urgent")])
    with pytest.raises(ValueError, match="PublishItem or a \\(payload, item_id\\) tuple"):
        await publisher.submit_batch("jobs", [("<a/>",)])  # type: ignore[list-item]


# --- ordering keys (issue 20) -------------------------------------------------------------


def test_ordering_key_is_a_keyword_the_service_reads() -> None:
    headers = item_headers({"tenant": "acme"}, ordering_key="customer-7", priority="low")
    assert headers == {"tenant": "acme", "Urgency": "low", "ordering-key": "customer-7"}
    plan = schedule(headers, NodeConfig(queue=True, queue_ordered=True), NOW)
    assert plan.ordering_key == "customer-7"
    entry = PublishItem("<a xmlns='urn:x'/>", "i1", ordering_key="k")
    assert entry.headers(NOW) == {"ordering-key": "k"}
    with pytest.raises(ValueError, match="ordering_key"):
        item_headers(ordering_key="")
    with pytest.raises(ValueError, match="not both"):
        item_headers({"ordering-key": "a"}, ordering_key="b")


def test_a_job_reads_its_ordering_key() -> None:
    (event,) = wire.parse_event(
        notice(NoticeItem("i1", "<a xmlns='urn:x'/>", None, {"ordering-key": "customer-7"}))
    )
    assert isinstance(event, wire.ItemEvent)
    assert event.ordering_key == "customer-7" and event.attributes == {"ordering-key": "customer-7"}
    (plain,) = wire.parse_event(notice(NoticeItem("i2", "<a xmlns='urn:x'/>", None, {})))
    assert isinstance(plain, wire.ItemEvent) and plain.ordering_key is None
