"""Issue 27, point 1: behind a Prosody with its default component stanza limit
(512 KiB), and behind an ejabberd whose component listener has the shipped
example's ``max_stanza_size`` (512 KiB; ejabberd's own default is none), the
largest items the service accepts go through every path (items retrieval, single
and batched notifications, redelivery after unlock, dead letters; on SQLite, and on
PostgreSQL behind Prosody) and the component stays connected: no reconnect in its
log, and a bystander's publishes, made all along, are all answered.

Issue 27, point 5, through the real server: Prosody passes a stanza nested 950
levels deep (its parser has no depth limit) and the component answers it with
bad-request + invalid-payload.
"""

from __future__ import annotations

import asyncio
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest
from slixmpp.exceptions import IqError

from tests.integration.queue_helpers import (
    PUBSUB,
    RSM,
    SERVICE,
    SUBSCRIBE_OPTIONS,
    Inbox,
    create_node,
    create_queue,
    error_info,
    form_xml,
    iq,
    match,
    publish,
    send,
    unique,
    unlock_iq,
)
from tests.kit.integration import COMPONENTS, PASSWORD, USERS, _start
from xmpp_queue.servers import PrivateProsody
from xmpp_queue.settings import DEFAULT_MAX_STANZA_SIZE, STANZA_ENVELOPE

PROSODY_DEFAULT = 512 * 1024  # mod_component's component_stanza_size_limit default
CEILING = DEFAULT_MAX_STANZA_SIZE - STANZA_ENVELOPE  # the largest payload allowed
NS = "urn:xmpp:example"


@pytest.fixture(scope="module")
def default_prosody() -> Iterator[PrivateProsody]:
    """Prosody with its default component limit; clients may still send big items
    (c2s stays at 4 MiB: the publishers are not what is tested)."""
    server = PrivateProsody(
        COMPONENTS,
        dict.fromkeys(USERS, PASSWORD),
        extra_config=f"component_stanza_size_limit = {PROSODY_DEFAULT}",
    )
    _start(server, "prosody")
    yield server
    server.stop()


def big(item: str, size: int = CEILING) -> ET.Element:
    """A payload whose canonical form is exactly *size* bytes."""
    shell = f'<job xmlns="{NS}"></job>'
    el = ET.Element(f"{{{NS}}}job")
    el.text = (item + "-" + "x" * size)[: size - len(shell)]
    return el


async def publish_big(client, node: str, item: str, size: int = CEILING) -> None:  # type: ignore[no-untyped-def]
    await client.plugin["xep_0060"].publish(
        SERVICE, node, id=item, payload=big(item, size), timeout=30
    )


async def items_page(client, node: str, after: str | None = None) -> ET.Element:  # type: ignore[no-untyped-def]
    rsm = f"<set xmlns='{RSM}'><after>{after}</after></set>" if after else ""
    reply = await send(
        iq(client, f"<pubsub xmlns='{PUBSUB}'><items node='{node}'/>{rsm}</pubsub>", "get"), 30
    )
    return reply.xml


def page_ids(reply: ET.Element) -> tuple[list[str], str | None, str | None]:
    items = reply.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}items")
    assert items is not None
    last = reply.find(f"{{{PUBSUB}}}pubsub/{{{RSM}}}set/{{{RSM}}}last")
    count = reply.find(f"{{{PUBSUB}}}pubsub/{{{RSM}}}set/{{{RSM}}}count")
    return (
        [i.get("id", "") for i in items],
        last.text if last is not None else None,
        count.text if count is not None else None,
    )


async def all_items(client, node: str) -> list[str]:  # type: ignore[no-untyped-def]
    got, after = [], None
    for _ in range(20):
        ids, last, _count = page_ids(await items_page(client, node, after))
        got += ids
        if last is None or not ids:
            break
        after = last
    return got


@pytest.mark.parametrize(
    ("server_fixture", "database_url"),
    [
        ("default_prosody", "sqlite"),
        pytest.param("default_prosody", "postgresql", marks=pytest.mark.postgres),
        ("ejabberd", "sqlite"),
    ],
    indirect=["database_url"],
)
async def test_largest_items_through_every_path_keep_the_component_connected(
    server_fixture: str,
    database_url: str,
    request: pytest.FixtureRequest,
    component,
    client,  # type: ignore[no-untyped-def]
) -> None:
    server = request.getfixturevalue(server_fixture)
    proc = await component(server=server)
    owner = await client("pub", server=server)
    worker = await client("w1", server=server)
    bystander = await client("bob", server=server)
    inbox = Inbox(worker)

    # a bystander publishes small items all along; every one must be answered
    side = await create_node(bystander, unique("side"), max_items="max")
    answered: list[str] = []
    stop = asyncio.Event()

    async def chatter() -> None:
        n = 0
        while not stop.is_set():
            answered.append(await publish(bystander, side, f"s{n}", within=15))
            n += 1
            await asyncio.sleep(0.05)

    background = asyncio.create_task(chatter())

    # a node may not be set to accept items that could not be sent
    with pytest.raises(IqError) as refused:
        await create_queue(owner, unique("q"), max_payload_size=CEILING + 1)
    assert error_info(refused.value.iq).condition == "not-acceptable"
    assert str(CEILING) in error_info(refused.value.iq).xml

    node = await create_queue(
        owner,
        unique("q"),
        max_payload_size=CEILING,
        queue_retry_delay=0,
        queue_max_deliveries=2,
    )
    with pytest.raises(IqError) as too_big:
        await publish_big(owner, node, "over", CEILING + 1)
    assert error_info(too_big.value.iq).pubsub == "payload-too-big"
    ids = [f"i{n}" for n in range(4)]
    for item in ids:
        await publish_big(owner, node, item)

    # items retrieval: one item per answer, paged with RSM, every item reached
    assert await all_items(owner, node) == ids

    # a batched worker: three of the largest items come as three messages
    form = form_xml(SUBSCRIBE_OPTIONS, {"pubsub#queue_requests": 3, "pubsub#queue_max_batch": 3})
    sub = iq(
        worker,
        f"<pubsub xmlns='{PUBSUB}'><subscribe node='{node}' jid='{worker.boundjid}'/>"
        "<options/></pubsub>",
    )
    sub.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}options").append(form)  # type: ignore[union-attr]
    await send(sub)
    first = await inbox.collect(3, match("item", node), within=30)
    assert sorted(e.item_id or "" for e in first) == ids[:3]
    assert len({id(e.message) for e in first}) == 3  # split: one message each

    # redelivery after unlock (twice: the second unlock dead-letters it)
    await send(unlock_iq(worker, node, "i0"))
    again = await inbox.next(match("item", node, "i0"), within=30)
    assert again.payload is not None and len(ET.tostring(again.payload)) >= CEILING - 100
    await send(unlock_iq(worker, node, "i0"))
    # the dead-letter node holds it, whole, and its items are retrievable
    dead = f"{node}/dead-letter"
    for _ in range(100):
        dead_ids = await all_items(owner, dead) if await _exists(owner, dead) else []
        if dead_ids:
            break
        await asyncio.sleep(0.1)
    assert dead_ids == ["i0"]
    # the rest is delivered and acked (single notices)
    for item in ("i1", "i2"):
        await send(
            iq(
                worker,
                f"<pubsub xmlns='{PUBSUB}'><retract node='{node}'>"
                f"<item id='{item}'/></retract></pubsub>",
            )
        )
    last = await inbox.next(match("item", node, "i3"), within=30)
    assert last.payload is not None

    # the bystander keeps publishing until it has been answered at least ten times, so the
    # check below does not depend on how fast the large-item paths above happened to run
    for _ in range(300):
        if len(answered) >= 10:
            break
        await asyncio.sleep(0.05)
    stop.set()
    await background
    log = proc.log_text()
    assert log.count("event=connected") == 1, log[-3000:]
    for sign in ("connection_lost", "reconnect_scheduled", "stream_error", "stanza_dropped"):
        assert sign not in log, sign
    assert len(answered) >= 10 and answered == [f"s{n}" for n in range(len(answered))]


async def _exists(client, node: str) -> bool:  # type: ignore[no-untyped-def]
    try:
        await items_page(client, node)
    except IqError:
        return False
    return True


async def test_deep_nesting_passes_prosody_and_gets_bad_request(
    default_prosody: PrivateProsody,
    component,
    client,  # type: ignore[no-untyped-def]
) -> None:
    proc = await component(server=default_prosody)
    owner = await client("pub", server=default_prosody)
    node = await create_node(owner, unique("deep"))
    deep = "<a xmlns='urn:a'>" * 950 + "</a>" * 950
    stanza = iq(
        owner, f"<pubsub xmlns='{PUBSUB}'><publish node='{node}'><item id='d'/></publish></pubsub>"
    )
    item = stanza.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}publish/{{{PUBSUB}}}item")
    assert item is not None
    item.append(ET.fromstring(deep))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)  # slixmpp serialises what the client sends recursively
    try:
        with pytest.raises(IqError) as refused:
            await send(stanza, 15)
    finally:
        sys.setrecursionlimit(limit)
    info = error_info(refused.value.iq)
    assert (info.condition, info.pubsub) == ("bad-request", "invalid-payload")
    assert await publish(owner, node, "fine") == "fine"
    assert "event=connected" in proc.log_text() and "connection_lost" not in proc.log_text()
