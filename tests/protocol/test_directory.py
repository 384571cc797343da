"""The directory on the public name, and a shard's redirects: stanza in, stanza out.

The directory's answers come from ``Directory.answer`` (request element in,
reply text out) over an in-memory placement table; a shard's redirects from the
real ``QueueComponent`` with a placement guard. The placement table's SQL runs in
tests/storage/test_shard_store.py and the integration tests.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator

import pytest

from tests.kit.placements import MemoryPlacements
from tests.kit.stanzas import ADMIN, ALICE, NS, OWNER, SERVICE, Stream, error_of, find
from tests.kit.stanzas import pubsub as ps
from xmpp_queue.core.account_lists import AccountLists
from xmpp_queue.core.model import AccessModel, Affiliation, NodeConfig
from xmpp_queue.core.placement import node_uri, parse_node_uri, pick_shard
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.xmpp.directory import Directory
from xmpp_queue.xmpp.redirect import NodeElsewhere, PlacementGuard, redirect_reply

PUBLIC = "queue.example.org"
SHARDS = ("p0.queue.example.org", "p1.queue.example.org", "p2.queue.example.org")
STANZAS = NS["st"]
DISCO_ITEMS = "http://jabber.org/protocol/disco#items"
DISCO_INFO = "http://jabber.org/protocol/disco#info"


def request(itype: str, sender: str, body: str, to: str = PUBLIC) -> ET.Element:
    return ET.fromstring(
        f"<iq xmlns='jabber:component:accept' type='{itype}' id='r1' from='{sender}' "
        f"to='{to}'>{body}</iq>"
    )


def redirect_of(reply: ET.Element) -> str:
    """The URI of a redirect error (checked: type modify, URI also as the text)."""
    assert error_of(reply)[:2] == ("modify", "redirect"), ET.tostring(reply).decode()
    uri = find(reply, "c:error/st:redirect").text or ""
    assert find(reply, "c:error/st:text").text == uri
    return uri


@pytest.fixture
def placements() -> MemoryPlacements:
    return MemoryPlacements()


@pytest.fixture
def directory(placements: MemoryPlacements) -> Directory:
    return Directory(
        PUBLIC,
        SHARDS,
        placements,
        ServiceAccess.for_domain("example.org"),
        frozenset({"admin@example.org"}),
        lists=AccountLists(placements),
    )


async def ask(directory: Directory, itype: str, sender: str, body: str) -> ET.Element:
    text = await directory.answer(request(itype, sender, body))
    assert text is not None
    reply = ET.fromstring(f"<s xmlns='jabber:component:accept'>{text}</s>")[0]
    assert (reply.get("from"), reply.get("to"), reply.get("id")) == (PUBLIC, sender, "r1")
    return reply


async def test_the_directory_says_it_is_a_pubsub_service(directory: Directory) -> None:
    reply = await ask(directory, "get", ALICE, f"<query xmlns='{DISCO_INFO}'/>")
    identity = find(reply, "di:query/di:identity")
    assert (identity.get("category"), identity.get("type")) == ("pubsub", "service")
    features = {f.get("var") for f in reply.iter(f"{{{DISCO_INFO}}}feature")}
    assert {NS["ps"], DISCO_ITEMS, "urn:xmpp:pubsub:queueing:0"} <= features


async def test_disco_items_list_each_visible_node_with_its_shard(
    directory: Directory, placements: MemoryPlacements
) -> None:
    placements.node("news", SHARDS[0])
    placements.node("jobs", SHARDS[2], NodeConfig(access_model=AccessModel.WHITELIST))
    placements.node("banned", SHARDS[1])
    placements.placed["claimed"] = SHARDS[1]  # placed, not created yet: not listed
    placements.affiliations[("banned", "alice@example.org")] = Affiliation.OUTCAST

    def items(reply: ET.Element) -> dict[str | None, str | None]:
        return {i.get("node"): i.get("jid") for i in reply.iter(f"{{{DISCO_ITEMS}}}item")}

    query = f"<query xmlns='{DISCO_ITEMS}'/>"
    assert items(await ask(directory, "get", ALICE, query)) == {"news": SHARDS[0]}
    placements.affiliations[("jobs", "alice@example.org")] = Affiliation.MEMBER
    assert items(await ask(directory, "get", ALICE, query)) == {
        "news": SHARDS[0],
        "jobs": SHARDS[2],
    }
    assert items(await ask(directory, "get", ADMIN, query)) == {
        "news": SHARDS[0],
        "jobs": SHARDS[2],
        "banned": SHARDS[1],
    }


async def test_create_places_the_node_by_hash_and_redirects_the_creator(
    directory: Directory, placements: MemoryPlacements
) -> None:
    create = ps("<create node='orders'/><configure/>")
    reply = await ask(directory, "set", OWNER, create)
    home = pick_shard("orders", SHARDS)
    assert redirect_of(reply) == f"xmpp:{home}?;node=orders"
    assert placements.placed == {"orders": home}
    placements.placed["orders"] = SHARDS[0]  # placed before (say, by an earlier hash)
    assert redirect_of(await ask(directory, "set", OWNER, create)) == node_uri(SHARDS[0], "orders")
    # A node's helpers share its shard: a dead-letter node lands beside its queue.
    assert pick_shard("orders/dead-letter", SHARDS) == home


async def test_an_instant_node_is_sent_to_the_shards_in_turn(directory: Directory) -> None:
    seen = [redirect_of(await ask(directory, "set", OWNER, ps("<create/>"))) for _ in SHARDS]
    assert sorted(seen) == sorted(f"xmpp:{s}" for s in SHARDS)


async def test_every_request_for_a_placed_node_is_redirected(
    directory: Directory, placements: MemoryPlacements
) -> None:
    placements.node("jobs", SHARDS[1])
    uri = node_uri(SHARDS[1], "jobs")
    requests = [
        ("set", ps("<publish node='jobs'><item><x xmlns='urn:t'/></item></publish>")),
        ("set", ps(f"<subscribe node='jobs' jid='{ALICE}'/>")),
        ("get", ps("<items node='jobs'/>")),
        ("set", ps("<retract node='jobs'><item id='1'/></retract>")),
        ("set", ps("<purge node='jobs'/>", NS["o"])),
        ("get", f"<query xmlns='{DISCO_INFO}' node='jobs'/>"),
        ("get", f"<query xmlns='{DISCO_ITEMS}' node='jobs'/>"),
    ]
    for itype, body in requests:
        assert redirect_of(await ask(directory, itype, ALICE, body)) == uri, body


async def test_a_node_placed_nowhere_is_not_found_and_node_less_owner_requests_are_refused(
    directory: Directory,
) -> None:
    reply = await ask(directory, "get", ALICE, ps("<items node='ghost'/>"))
    assert error_of(reply)[:2] == ("cancel", "item-not-found")
    reply = await ask(directory, "get", ALICE, ps("<subscriptions/>", NS["o"]))
    assert error_of(reply)[:2] == ("cancel", "feature-not-implemented")
    reply = await ask(directory, "get", ALICE, ps(""))
    assert error_of(reply)[:2] == ("modify", "bad-request")


async def test_a_stranger_is_refused_and_learns_no_placement(
    directory: Directory, placements: MemoryPlacements
) -> None:
    placements.node("jobs", SHARDS[1])
    stranger = "mallory@elsewhere.net/x"
    reply = await ask(directory, "get", stranger, ps("<items node='jobs'/>"))
    assert error_of(reply)[:2] == ("cancel", "forbidden")
    reply = await ask(directory, "get", stranger, f"<query xmlns='{DISCO_ITEMS}'/>")
    assert error_of(reply)[:2] == ("cancel", "service-unavailable")
    assert placements.reads == 0


async def test_answers_and_errors_addressed_to_the_directory_get_no_reply(
    directory: Directory,
) -> None:
    assert await directory.answer(request("result", ALICE, "")) is None
    assert await directory.answer(request("error", ALICE, "")) is None


def test_the_redirect_carries_the_uri_as_text_and_escapes_the_node() -> None:
    iq = request("get", "a&apos;b@example.org/r", ps("<items node='x'/>"), to=SHARDS[0])
    text = redirect_reply(iq, NodeElsewhere("a&b <c>/d;e", SHARDS[2]))
    reply = ET.fromstring(text)  # written as text: its quoting must hold
    assert (reply.get("type"), reply.get("to"), reply.get("from")) == (
        "error",
        "a'b@example.org/r",
        SHARDS[0],
    )
    error = reply.find("error")
    assert error is not None and error.get("type") == "modify"
    uri = error.findtext(f"{{{STANZAS}}}redirect")
    assert uri == error.findtext(f"{{{STANZAS}}}text") == node_uri(SHARDS[2], "a&b <c>/d;e")
    assert parse_node_uri(uri) == (SHARDS[2], "a&b <c>/d;e")


# --- a shard: the real component with its placement guard -----------------------------


@pytest.fixture
async def shard(stream: Stream, placements: MemoryPlacements) -> AsyncIterator[Stream]:
    """The protocol suite's component as a shard named SERVICE among two others."""
    stream.comp.requests.guard = PlacementGuard(
        SERVICE,
        lambda node: node in placements.configs and placements.placed.get(node) == SERVICE,
        placements.owner,
        placements.claim,
    )
    yield stream


async def test_a_shard_redirects_a_node_of_another_shard(
    shard: Stream, placements: MemoryPlacements
) -> None:
    placements.node("elsewhere", SHARDS[1])
    for body in (
        ps("<items node='elsewhere'/>"),
        ps("<publish node='elsewhere'><item><x xmlns='urn:t'/></item></publish>"),
    ):
        reply, _ = await shard.iq("set" if "publish" in body else "get", ALICE, body)
        assert redirect_of(reply) == node_uri(SHARDS[1], "elsewhere")
    # A create of another shard's node is redirected too, and changes nothing here.
    reply, _ = await shard.iq("set", OWNER, ps("<create node='elsewhere'/>"))
    assert redirect_of(reply) == node_uri(SHARDS[1], "elsewhere")


async def test_a_shard_claims_a_new_node_and_serves_its_own(
    shard: Stream, placements: MemoryPlacements
) -> None:
    reply, _ = await shard.iq("set", OWNER, ps("<create node='fresh'/>"))
    assert reply.get("type") == "result", ET.tostring(reply).decode()
    assert placements.placed["fresh"] == SERVICE
    placements.configs["fresh"] = NodeConfig()  # it exists here now
    reply, _ = await shard.iq("get", OWNER, ps("<items node='fresh'/>"))
    assert reply.get("type") == "result", ET.tostring(reply).decode()
    # A node placed nowhere and unknown here: the service's own answer.
    reply, _ = await shard.iq("get", ALICE, ps("<items node='ghost'/>"))
    assert error_of(reply)[:2] == ("cancel", "item-not-found")
