"""Issue 27 point 7, on the wire: what non-members and strangers may learn by disco.

XEP-0060 §5.1/§5.4 let a service hide nodes from entities not allowed to subscribe:
a whitelisted queue (every new queue) is absent from a non-member's disco#items and
answered item-not-found to its disco#info (no creator, title or config leaks); an
open node stays listed. A stranger (outside ``[access] users``) gets
service-unavailable for every disco query, the XEP-0050 commands node included
(README, "Who may use it").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from slixmpp import ClientXMPP
from slixmpp.exceptions import IqError

from tests.integration.queue_helpers import (
    SERVICE,
    create_node,
    error_info,
    module_component,
    set_affiliations,
    unique,
)
from tests.kit.integration import ComponentProcess, XmppServer, make_component

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

COMMANDS_NODE = "http://jabber.org/protocol/commands"


@pytest.fixture(scope="module", params=["prosody", "ejabberd"])
def service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ComponentProcess]:
    """Everyone of the server's domain but bob may use the service."""
    server: XmppServer = request.getfixturevalue(request.param)
    users = [f"{u}@{server.domain}" for u in ("pub", "w1", "w2", "alice", "admin")]
    workdir = tmp_path_factory.mktemp(f"exposure-{request.param}")
    proc = module_component(make_component, server, workdir, access={"users": users})
    yield proc
    proc.stop()


async def _error(request: Awaitable[Any]) -> tuple[str, str]:
    with pytest.raises(IqError) as err:
        await request
    info = error_info(err.value.iq)
    return info.condition, info.type


def _listed(reply: Any) -> set[str]:
    return {node for _, node, _ in reply["disco_items"]["items"]}


async def test_whitelisted_queues_are_invisible_to_non_members(
    service: ComponentProcess, connect: Callable[..., Awaitable[ClientXMPP]]
) -> None:
    owner, member, other = await connect("pub"), await connect("w1"), await connect("w2")
    queue, news = unique("secret-queue"), unique("open-news")
    await create_node(owner, queue, queue=True, title="Payroll runs")  # whitelisted
    await create_node(owner, news)  # open
    await set_affiliations(owner, queue, [(member.boundjid.bare, "member")])
    disco = {c: c.plugin["xep_0030"] for c in (owner, member, other)}

    assert {queue, news} <= _listed(await disco[owner].get_items(jid=SERVICE, timeout=10))
    assert {queue, news} <= _listed(await disco[member].get_items(jid=SERVICE, timeout=10))
    seen = _listed(await disco[other].get_items(jid=SERVICE, timeout=10))
    assert news in seen and queue not in seen

    info = await disco[member].get_info(jid=SERVICE, node=queue, timeout=10)
    assert "Payroll runs" in str(info)
    hidden = ("item-not-found", "cancel")
    assert await _error(disco[other].get_info(jid=SERVICE, node=queue, timeout=10)) == hidden
    assert await _error(disco[other].get_items(jid=SERVICE, node=queue, timeout=10)) == hidden
    await disco[other].get_info(jid=SERVICE, node=news, timeout=10)  # open: described


async def test_a_stranger_gets_service_unavailable_for_the_commands_node_too(
    service: ComponentProcess, connect: Callable[..., Awaitable[ClientXMPP]]
) -> None:
    stranger, user = await connect("bob"), await connect("w1")
    unavailable = ("service-unavailable", "cancel")
    disco = stranger.plugin["xep_0030"]
    for request in (
        disco.get_items(jid=SERVICE, node=COMMANDS_NODE, timeout=10),
        disco.get_info(jid=SERVICE, node=COMMANDS_NODE, timeout=10),
        disco.get_items(jid=SERVICE, timeout=10),
        disco.get_info(jid=SERVICE, timeout=10),
    ):
        assert await _error(request) == unavailable
    # A user of the service is answered (the list of commands it may see).
    await user.plugin["xep_0030"].get_items(jid=SERVICE, node=COMMANDS_NODE, timeout=10)
