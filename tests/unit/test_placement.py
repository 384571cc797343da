"""Placement by hash, the xmpp: URI of a node, and the client's following of redirects."""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xmpp_queue.client import placement
from xmpp_queue.client.errors import StanzaError
from xmpp_queue.client.placement import Placements, on_node, redirect_target, routed
from xmpp_queue.client.wire import parse_error
from xmpp_queue.core.placement import family, node_uri, parse_node_uri, pick_shard

SHARDS = ("p0.q.example.org", "p1.q.example.org", "p2.q.example.org")
PUBLIC = "q.example.org"
STANZAS = "urn:ietf:params:xml:ns:xmpp-stanzas"


def test_a_node_and_its_helpers_land_on_one_shard_every_time() -> None:
    assert family("jobs/dead-letter") == "jobs"
    assert pick_shard("jobs", SHARDS) == pick_shard("jobs/dead-letter", SHARDS)
    assert pick_shard("jobs", SHARDS) == pick_shard("jobs", list(SHARDS))
    spread = Counter(pick_shard(f"queue-{n}", SHARDS) for n in range(3000))
    assert set(spread) == set(SHARDS) and min(spread.values()) > 800


@given(st.text(min_size=1).filter(lambda t: "\x00" not in t))
def test_a_node_uri_reads_back_as_written(node: str) -> None:
    assert parse_node_uri(node_uri(SHARDS[1], node)) == (SHARDS[1], node)


def test_uris_in_the_xep_0060_form_and_refusals() -> None:
    assert node_uri("pubsub.shakespeare.lit", "princely_musings") == (
        "xmpp:pubsub.shakespeare.lit?;node=princely_musings"
    )
    assert parse_node_uri("xmpp:p1.q.example.org") == ("p1.q.example.org", None)
    for bad in ("http://x", "xmpp:user@host?;node=a", "xmpp:"):
        try:
            parse_node_uri(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad} accepted")


def redirect_error(uri: str, with_text: bool = False) -> StanzaError:
    text = f"<text xmlns='{STANZAS}'>{uri}</text>" if with_text else ""
    return parse_error(
        ET.fromstring(
            f"<iq xmlns='jabber:client' type='error'><error type='modify'>"
            f"<redirect xmlns='{STANZAS}'>{uri}</redirect>{text}</error></iq>"
        )
    )


def test_a_redirect_is_read_from_the_condition_element_or_the_text() -> None:
    uri = node_uri(SHARDS[2], "jobs")
    for exc in (redirect_error(uri), redirect_error(uri, with_text=True)):
        assert (exc.condition, exc.etype) == ("redirect", "modify")
        assert redirect_target(exc) == (SHARDS[2], "jobs")
    assert redirect_target(StanzaError("item-not-found", uri)) is None
    assert redirect_target(StanzaError("redirect", "not a uri")) is None


class Directory:
    """A stream whose every node query is answered by the public name (its redirects)."""

    def __init__(self, homes: dict[str, str]) -> None:
        self.homes = homes
        self.calls: list[tuple[str, str]] = []

    async def call(
        self, to: str, body: str, iq_type: str = "set", reply_timeout: float | None = 30.0
    ) -> ET.Element:
        await asyncio.sleep(0)
        node = ET.fromstring(body).get("node", "")
        self.calls.append((to, node))
        if node in self.homes:
            raise redirect_error(node_uri(self.homes[node], node))
        if node.startswith("missing"):
            raise StanzaError("item-not-found", f"no node {node}")
        return ET.Element("iq")


async def test_the_client_asks_once_per_node_and_shares_the_question() -> None:
    stream = Directory({"jobs": SHARDS[1]})
    places = Placements(PUBLIC)
    found = await asyncio.gather(*(places.resolve(stream, "jobs") for _ in range(5)))
    assert found == [SHARDS[1]] * 5
    assert await places.resolve(stream, "jobs") == SHARDS[1]
    assert await places.resolve(stream, "plain") == PUBLIC  # answered by the service itself
    assert stream.calls == [(PUBLIC, "jobs"), (PUBLIC, "plain")]
    assert places.lookups == 2
    # A node that does not exist (yet) is sent to the public name and not remembered:
    # once it is created on a shard, the next request asks again.
    assert await places.resolve(stream, "missing") == PUBLIC
    assert places.known("missing") is None
    stream.homes["missing"] = SHARDS[2]
    assert await places.resolve(stream, "missing") == SHARDS[2]


async def test_a_request_redirected_later_is_sent_again_to_the_new_shard() -> None:
    stream = Directory({"jobs": SHARDS[0]})
    places = Placements(PUBLIC)
    sent: list[str] = []

    async def submit(service: str) -> asyncio.Future[str]:
        sent.append(service)
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        if service == SHARDS[0]:  # the node moved on: the old shard redirects
            answer.set_exception(redirect_error(node_uri(SHARDS[2], "jobs")))
        else:
            answer.set_result(f"stored on {service}")
        return answer

    async def current() -> Directory:
        return stream

    result = await (await routed(places, "jobs", current, submit))
    assert result == f"stored on {SHARDS[2]}"
    assert sent == [SHARDS[0], SHARDS[2]]
    assert places.known("jobs") == SHARDS[2]
    assert await (await routed(places, "jobs", current, submit)) == result
    assert sent[-1] == SHARDS[2] and places.lookups == 1


class View:
    """A link's view toward one service (``PubSubLink.via``)."""

    def __init__(self, stream: Directory, service: str = PUBLIC) -> None:
        self.stream = stream
        self.service = service

    def via(self, service: str) -> View:
        return View(self.stream, service)


async def test_a_node_verb_follows_the_redirect_and_waits_out_a_takeover(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(placement, "WAIT_RETRIES", (0.0, 0.0, 0.0))
    places = Placements(PUBLIC)
    answers = [
        redirect_error(node_uri(SHARDS[1], "jobs")),  # the directory places it
        StanzaError("remote-server-timeout", "Component unavailable", "wait"),  # taking over
        StanzaError("remote-server-timeout", "Component unavailable", "wait"),
    ]
    seen: list[str] = []

    async def create(at: View) -> bool:
        seen.append(at.service)
        if answers:
            raise answers.pop(0)
        return True

    link = View(Directory({}))
    assert await on_node(places, link, "jobs", create, ask_first=False) is True
    assert seen == [PUBLIC, SHARDS[1], SHARDS[1], SHARDS[1]]
    refused = StanzaError("forbidden", "no", "auth")

    async def forbidden(at: View) -> bool:
        raise refused

    with pytest.raises(StanzaError) as caught:
        await on_node(places, link, "jobs", forbidden)  # the shard answers: a refusal
    assert caught.value is refused


class Pinged(View):
    """A view whose service does not answer a ping while *down* is above zero."""

    down = 1

    def via(self, service: str) -> Pinged:
        return Pinged(self.stream, service)

    async def ping_service(self) -> None:
        if Pinged.down > 0:
            Pinged.down -= 1
            raise StanzaError("forbidden", "Access denied by service policy", "auth")


async def test_ejabberds_forbidden_for_a_missing_shard_is_waited_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(placement, "WAIT_RETRIES", (0.0, 0.0))
    places = Placements(PUBLIC)
    places.learn("jobs", SHARDS[0])
    tries: list[str] = []

    async def items(at: View) -> str:
        tries.append(at.service)
        if len(tries) == 1:  # ejabberd, while no process is connected for the shard
            raise StanzaError("forbidden", "Access denied by service policy", "auth")
        return "items"

    assert await on_node(places, Pinged(Directory({})), "jobs", items) == "items"
    assert tries == [SHARDS[0], SHARDS[0]]
