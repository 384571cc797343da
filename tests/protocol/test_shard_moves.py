"""A shard during a move, stanza by stanza: requests in flight and nodes moved here.

The real ``QueueComponent`` with a placement guard over an in-memory placement
table (the SQL of a move runs in tests/storage/test_shard_moves.py and the
integration tests).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.kit.placements import MemoryPlacements
from tests.kit.stanzas import ALICE, SERVICE, Stream, error_of, find
from tests.kit.stanzas import pubsub as ps
from xmpp_queue.core.placement import node_uri
from xmpp_queue.xmpp.redirect import PlacementGuard

OTHER = "p1.queue.example.org"
PUBLISH = ps("<publish node='jobs'><item id='a'><x xmlns='urn:t'/></item></publish>")


@pytest.fixture
def placements() -> MemoryPlacements:
    return MemoryPlacements()


def redirect_of(reply: ET.Element) -> str:
    assert error_of(reply)[:2] == ("modify", "redirect"), ET.tostring(reply).decode()
    return find(reply, "c:error/st:redirect").text or ""


async def test_a_request_whose_node_left_while_it_waited_is_redirected(
    stream: Stream, placements: MemoryPlacements
) -> None:
    """It passed the guard (the node was held), then the move took the node away
    before its turn: the service's item-not-found becomes the redirect."""
    checks: list[str] = []

    def holds(node: str) -> bool:
        checks.append(node)
        return len(checks) == 1  # held when the request came in, gone after

    placements.placed["jobs"] = OTHER
    stream.comp.requests.guard = PlacementGuard(SERVICE, holds, placements.owner, placements.claim)
    reply, _ = await stream.iq("set", ALICE, PUBLISH)
    assert redirect_of(reply) == node_uri(OTHER, "jobs")


async def test_a_request_for_a_node_moved_here_loads_it_first(
    stream: Stream, placements: MemoryPlacements
) -> None:
    """Placed on this shard but not held: moved here; the shard adopts before it answers."""
    adopted: list[bool] = []

    async def adopt() -> None:
        adopted.append(True)

    placements.placed["jobs"] = SERVICE
    stream.comp.requests.guard = PlacementGuard(
        SERVICE, lambda node: False, placements.owner, placements.claim, adopt
    )
    reply, _ = await stream.iq("get", ALICE, ps("<items node='jobs'/>"))
    assert adopted, "the node was loaded before the request ran"
    # Nothing was really moved in this test: the service's own answer stands.
    assert error_of(reply)[:2] == ("cancel", "item-not-found")
