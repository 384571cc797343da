"""Who may do what, behind a real Prosody and a real ejabberd: roles x operations.

One component per server for the module (SQLite), with ``[access] users`` listing
every test account but bob: bob stands for a JID outside the allowed domains.
Every cell gets a fresh queue node (unique id) made by its owner, so cells never
see each other's state; a refused cell's node is then checked unchanged where the
operation could have changed it.

Roles on the node: owner (pub), publisher (w1), publish-only (w2), member (w3, a
subscribed worker that does NOT hold the item), holder (w4, the member whose lock
is tried), none (w5), outcast (alice), stranger (bob, outside ``[access] users``),
admin (admin, owner of every node). Expected outcomes follow XEP-0060 §4.1's
affiliation table, §4.5's whitelist model (new queues are whitelisted), docs/queueing.md's
XEP-0254 error order for locks (item-not-found, forbidden, conflict,
unexpected-request) and the access policy (a stranger is forbidden everything).

"retract own" exists only for roles that may publish (the others cannot own an
item); every other operation is tried by every role.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from slixmpp import ClientXMPP
from slixmpp.exceptions import IqError

from tests.integration.queue_helpers import (
    PUBSUB,
    PUBSUB_OWNER,
    SERVICE,
    create_node,
    error_info,
    extend_iq,
    iq,
    items,
    module_component,
    publish,
    retract_iq,
    send,
    set_affiliations,
    subscribe_queue,
    unique,
    unlock_iq,
)
from tests.kit.integration import ComponentProcess, XmppServer, make_component

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

ROLES = {
    "owner": "pub",
    "publisher": "w1",
    "publish-only": "w2",
    "member": "w3",
    "holder": "w4",
    "none": "w5",
    "outcast": "alice",
    "stranger": "bob",
    "admin": "admin",
}
OK = "ok"
FORBIDDEN = ("forbidden", "auth")
CLOSED = ("not-allowed", "cancel")  # §6.1.3.4 / §6.5.9.x closed-node
CONFLICT = ("conflict", "cancel")  # XEP-0254: locked by another subscriber
COMMAND_FORBIDDEN = ("forbidden", "cancel")  # XEP-0050's error table: type cancel
COMMANDS = ("overview", "details", "purge", "unlock", "redrive", "kick", "configure")
COMMANDS += ("create-node", "delete-node", "status")


def only(*allowed: str, others: Any = FORBIDDEN, **special: Any) -> dict[str, Any]:
    """Expected outcome per role: OK for *allowed*, *special* overrides, else *others*;
    the stranger is refused as *others* says (pubsub: by the access policy first)."""
    table = {role: (OK if role in allowed else others) for role in ROLES}
    table.update({k.replace("_", "-"): v for k, v in special.items()})
    table["stranger"] = others
    return table


EVERYONE = tuple(r for r in ROLES if r != "stranger")
OWNERS = ("owner", "admin")
READERS = ("owner", "publisher", "member", "holder", "admin")

EXPECTED: dict[str, dict[str, Any]] = {
    "create": only(*EVERYONE),
    "configure": only(*OWNERS),
    "delete": only(*OWNERS),
    "purge": only("owner", "publisher", "admin"),
    "publish": only("owner", "publisher", "publish-only", "admin"),
    "retract own": only("owner", "publisher", "publish-only", "admin"),
    "retract other": only("owner", "publisher", "admin"),
    "subscribe": only(*READERS, none=CLOSED),
    "items": only(*READERS, none=CLOSED),
    # A lock: only its holder acks, unlocks or extends it; another worker gets
    # conflict; publishers/owners may remove (retract) it but not act as holder.
    "ack (retract locked)": only("holder", "owner", "publisher", "admin", member=CONFLICT),
    "unlock": only("holder", member=CONFLICT, owner=CONFLICT, publisher=CONFLICT, admin=CONFLICT),
    "extend": only("holder", member=CONFLICT, owner=CONFLICT, publisher=CONFLICT, admin=CONFLICT),
    "affiliations get": only(*OWNERS),
    "affiliations set": only(*OWNERS),
    "subscriptions get": only(*OWNERS),
    "subscriptions set": only(*OWNERS),
}
# A stranger's disco is answered as if nothing lived here.
UNAVAILABLE = ("service-unavailable", "cancel")
# A whitelisted queue is invisible to whom may not subscribe (XEP-0060 §5.1/§5.4).
HIDDEN = ("item-not-found", "cancel")
EXPECTED["disco#info"] = only(*EVERYONE, none=HIDDEN, outcast=HIDDEN, others=UNAVAILABLE)
EXPECTED["disco#items"] = only(*EVERYONE, others=UNAVAILABLE)
for command in COMMANDS:
    EXPECTED[f"admin command {command}"] = only("admin", others=COMMAND_FORBIDDEN)


@pytest.fixture(scope="module", params=["prosody", "ejabberd"])
def service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ComponentProcess]:
    """This module's component (the conftest's ``pool``/``connect`` use it): every
    test account but bob may use it, every user may create nodes, retry delay 0, no
    node quota."""
    server: XmppServer = request.getfixturevalue(request.param)
    allowed = [f"{user}@{server.domain}" for role, user in ROLES.items() if role != "stranger"]
    workdir = tmp_path_factory.mktemp(f"matrix-{request.param}")
    proc = module_component(
        make_component,
        server,
        workdir,
        access={"users": allowed, "create": "users"},
        # The owner makes one node per cell (some 200): the node quota is not what
        # this module tests (tests/unit/test_safe_defaults_and_limits.py does).
        limits={"max_nodes_per_jid": 0},
        queue={"default_retry_delay": 0},
    )
    yield proc
    proc.stop()


class Cell:
    """One (role, operation): a fresh queue node set up by its owner."""

    def __init__(self, clients: dict[str, ClientXMPP], role: str) -> None:
        self.clients = clients
        self.role = role
        self.me = clients[role]
        self.owner = clients["owner"]
        self.node = unique("m")

    def jid(self, role: str) -> str:
        return self.clients[role].boundjid.bare

    async def setup(self, held: bool = False) -> None:
        await create_node(self.owner, self.node, queue=True)
        affiliations = [
            (self.jid("publisher"), "publisher"),
            (self.jid("publish-only"), "publish-only"),
            (self.jid("member"), "member"),
            (self.jid("holder"), "member"),
            (self.jid("outcast"), "outcast"),
        ]
        await set_affiliations(self.owner, self.node, affiliations)
        if held:  # the holder subscribes first and gets the item; the member has room
            await subscribe_queue(self.clients["holder"], self.node, 1)
            await publish(self.owner, self.node, "held")
            await subscribe_queue(self.clients["member"], self.node, 1)
        else:
            await publish(self.owner, self.node, "i1")

    def owner_iq(self, body: str, itype: str) -> Any:
        return iq(self.me, f"<pubsub xmlns='{PUBSUB_OWNER}'>{body}</pubsub>", itype)


async def _command(client: ClientXMPP, name: str) -> Any:
    return await client.plugin["xep_0050"].send_command(SERVICE, f"xmpp-queue#{name}", timeout=10)


def operations() -> dict[str, tuple[bool, Callable[[Cell], Awaitable[Any]]]]:
    """name -> (needs a held item, the request as the cell's role)."""
    ops: dict[str, tuple[bool, Callable[[Cell], Awaitable[Any]]]] = {
        "create": (False, lambda c: create_node(c.me, unique("own"))),
        "configure": (
            False,
            lambda c: c.me.plugin["xep_0060"].set_node_config(
                SERVICE, c.node, _title_form(), timeout=10
            ),
        ),
        "delete": (False, lambda c: send(c.owner_iq(f"<delete node='{c.node}'/>", "set"))),
        "purge": (False, lambda c: send(c.owner_iq(f"<purge node='{c.node}'/>", "set"))),
        "publish": (False, lambda c: publish(c.me, c.node, "new")),
        "retract own": (False, _retract_own),
        "retract other": (False, lambda c: send(retract_iq(c.me, c.node, "i1"))),
        "subscribe": (False, lambda c: subscribe_queue(c.me, c.node, 1)),
        "items": (False, lambda c: items(c.me, c.node)),
        "ack (retract locked)": (True, lambda c: send(retract_iq(c.me, c.node, "held"))),
        "unlock": (True, lambda c: send(unlock_iq(c.me, c.node, "held"))),
        "extend": (True, lambda c: send(extend_iq(c.me, c.node, "held", 60))),
        "affiliations get": (
            False,
            lambda c: send(c.owner_iq(f"<affiliations node='{c.node}'/>", "get")),
        ),
        "affiliations set": (
            False,
            lambda c: send(
                c.owner_iq(
                    f"<affiliations node='{c.node}'><affiliation jid='{c.jid('none')}' "
                    "affiliation='member'/></affiliations>",
                    "set",
                )
            ),
        ),
        "subscriptions get": (
            False,
            lambda c: send(c.owner_iq(f"<subscriptions node='{c.node}'/>", "get")),
        ),
        "subscriptions set": (
            False,
            lambda c: send(
                c.owner_iq(
                    f"<subscriptions node='{c.node}'><subscription jid='{c.jid('none')}' "
                    "subscription='none'/></subscriptions>",
                    "set",
                )
            ),
        ),
    }
    ops["disco#info"] = (
        False,
        lambda c: c.me.plugin["xep_0030"].get_info(jid=SERVICE, node=c.node, timeout=10),
    )
    ops["disco#items"] = (
        False,
        lambda c: c.me.plugin["xep_0030"].get_items(jid=SERVICE, timeout=10),
    )
    for name in COMMANDS:
        ops[f"admin command {name}"] = (False, lambda c, n=name: _command(c.me, n))
    return ops


def _title_form() -> Any:
    from tests.integration.queue_helpers import config_form

    return config_form(title="renamed")


async def _retract_own(cell: Cell) -> Any:
    await publish(cell.me, cell.node, "mine")
    return await send(retract_iq(cell.me, cell.node, "mine"))


async def _outcome(cell: Cell, request: Callable[[Cell], Awaitable[Any]]) -> Any:
    try:
        await request(cell)
    except IqError as exc:
        info = error_info(exc.iq)
        return (info.condition, info.type)
    return OK


async def test_authorization_matrix_behind_each_server(
    service: ComponentProcess, connect: Callable[..., Awaitable[ClientXMPP]]
) -> None:
    """XEP-0060 §4.1/§4.5 and the access policy, every role x every operation.

    ``service`` (this module's component, behind each server) backs ``connect``."""
    clients = {role: await connect(user) for role, user in ROLES.items()}
    ops = operations()
    assert set(ops) == set(EXPECTED)
    cells: list[tuple[str, str, Cell, Callable[[Cell], Awaitable[Any]]]] = []
    for op_name, (_held, request) in ops.items():
        for role in ROLES:
            if op_name == "retract own" and EXPECTED["publish"][role] != OK:
                continue  # cannot own an item: see the module docstring
            cell = Cell(clients, role)
            cells.append((op_name, role, cell, request))
    # Set up and run in batches: quick, yet no server is flooded.
    got: dict[tuple[str, str], Any] = {}
    for start in range(0, len(cells), 24):
        batch = cells[start : start + 24]
        await asyncio.gather(*(c.setup(held=ops[op][0]) for op, _, c, _ in batch))
        outcomes = await asyncio.gather(*(_outcome(c, req) for _, _, c, req in batch))
        for (op, role, _, _), outcome in zip(batch, outcomes, strict=True):
            got[(op, role)] = outcome
    wrong = {
        f"{op} as {role}": (outcome, EXPECTED[op][role])
        for (op, role), outcome in got.items()
        if outcome != EXPECTED[op][role]
    }
    assert wrong == {}, "(got, expected) per cell: " + repr(wrong)
    assert len(got) >= 16 * len(ROLES)


async def test_a_worker_never_releases_another_workers_lock_and_the_lock_survives(
    service: ComponentProcess, connect: Callable[..., Awaitable[ClientXMPP]]
) -> None:
    clients = {role: await connect(user) for role, user in ROLES.items()}
    cell = Cell(clients, "member")
    await cell.setup(held=True)
    for request in (
        retract_iq(cell.me, cell.node, "held"),
        unlock_iq(cell.me, cell.node, "held"),
        extend_iq(cell.me, cell.node, "held", 60),
    ):
        with pytest.raises(IqError) as err:
            await send(request)
        assert (error_info(err.value.iq).condition, error_info(err.value.iq).type) == CONFLICT
    # The holder still holds it: its ack is accepted.
    await send(retract_iq(clients["holder"], cell.node, "held"))
    reply = await items(clients["owner"], cell.node)
    assert reply.xml.find(f"{{{PUBSUB}}}pubsub/{{{PUBSUB}}}items/{{{PUBSUB}}}item") is None
