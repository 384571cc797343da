"""Push subscriptions through a real Prosody (issue 22): added with the admin command,
items POSTed to an aiohttp receiver in the test process, acks by status, a refused
endpoint named by its rule, and SIGKILL with POSTs in flight losing nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from slixmpp.exceptions import IqError

from tests.integration.queue_helpers import create_queue, publish
from tests.integration.test_admin import answer, execute, result_forms
from tests.kit.integration import ClientFactory, ComponentFactory, XmppServer
from tests.kit.push import Receiver

pytestmark = [pytest.mark.integration]

PUSH = {
    "allowed_hosts": ["127.0.0.1"],
    "allowed_networks": ["127.0.0.0/8"],
    "allow_http": True,
    "request_timeout": 5,
}
BEARER, SECRET = "tok-wire-123", "hmac-wire-456"


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rec = await Receiver().start()
    yield rec
    await rec.stop()


async def _add_push(admin: Any, node: str, url: str) -> Any:
    first = await execute(admin, "xmpp-queue#push-add")
    form = await answer(admin, first, {"node": node})
    return await answer(
        admin, form, {"url": url, "bearer": BEARER, "secret": SECRET, "max_in_flight": "4"}
    )


async def test_push_added_by_command_acks_by_status(
    component: ComponentFactory,
    client: ClientFactory,
    receiver: Receiver,
    database_url: str,
    xmpp_server: XmppServer,
) -> None:
    """On SQLite and PostgreSQL, behind Prosody and ejabberd."""
    rec, url = receiver, receiver.url
    comp = await component(push=PUSH)
    owner, admin = await client("alice"), await client("admin")
    node = await create_queue(owner, queue_retry_delay=0)
    with pytest.raises(IqError) as refused:
        await _add_push(admin, node, "http://10.1.2.3/hook")
    assert "not in [push] allowed_hosts" in refused.value.iq["error"]["text"]
    done = await _add_push(admin, node, url)
    assert done["command"]["status"] == "completed", done
    assert BEARER not in str(done) and SECRET not in str(done)
    rec.statuses = [500]  # the first POST is a nack: pushed again, attempt 2
    for n in range(3):
        await publish(owner, node, f"i{n}")
    await rec.until(lambda seen: sum(1 for s in seen if s.status == 204) == 3)
    assert sorted((s.item, s.attempt) for s in rec.seen if s.status == 204) in (
        [("i0", 2), ("i1", 1), ("i2", 1)],
        [("i0", 1), ("i1", 1), ("i2", 2)],
        [("i0", 1), ("i1", 2), ("i2", 1)],
    )
    listing = await execute(admin, "xmpp-queue#push-list")
    listed = await answer(admin, listing, {"node": node})
    [table] = result_forms(listed)
    [row] = table.get_items()
    assert row["auth"] == "bearer ****, hmac ****" and row["url"] == url
    log = comp.log_path.read_text()
    assert BEARER not in log and SECRET not in log


async def test_a_queue_owner_adds_lists_and_removes_its_own_push_subscription(
    component: ComponentFactory, client: ClientFactory, receiver: Receiver
) -> None:
    """Not an admin: alice owns the queue, so the push commands act as her; bob, who
    owns another queue, is refused hers by the service's owner check."""
    await component(push=PUSH)
    alice, bob = await client("alice"), await client("bob")
    node = await create_queue(alice, queue_retry_delay=0)
    await create_queue(bob)
    done = await _add_push(alice, node, receiver.url)
    assert done["command"]["status"] == "completed", done
    await publish(alice, node, "o1")
    await receiver.until(lambda seen: receiver.acked() == {"o1"})

    picker = await execute(bob, "xmpp-queue#push-list")
    assert node not in str(picker)  # bob's picker offers only his own queue
    with pytest.raises(IqError) as refused:
        await answer(bob, picker, {"node": node})
    assert refused.value.iq["error"]["condition"] == "forbidden"

    listing = await answer(alice, await execute(alice, "xmpp-queue#push-list"), {"node": node})
    [row] = result_forms(listing)[0].get_items()
    removing = await answer(alice, await execute(alice, "xmpp-queue#push-remove"), {"node": node})
    removed = await answer(alice, removing, {"id": row["id"]})
    assert removed["command"]["status"] == "completed"
    listing = await answer(alice, await execute(alice, "xmpp-queue#push-list"), {"node": node})
    assert result_forms(listing)[0].get_items() == []


async def test_sigkill_with_pushes_in_flight_loses_nothing(
    component: ComponentFactory, client: ClientFactory, receiver: Receiver, database_url: str
) -> None:
    """On SQLite and PostgreSQL (the restart reads the push subscription back)."""
    rec, url = receiver, receiver.url
    comp = await component(push=PUSH)
    owner, admin = await client("alice"), await client("admin")
    node = await create_queue(owner, queue_retry_delay=0, queue_lock_timeout=3)
    await _add_push(admin, node, url)
    rec.hold = True  # the POSTs hang: no answer, nothing may count as acked
    for n in range(3):
        await publish(owner, node, f"k{n}")
    try:  # three POSTs (with window 1: one, then a redelivery after each timeout)
        await rec.until(lambda seen: len(seen) >= 3)
    except AssertionError as waited:
        raise AssertionError(f"{waited}\ncomponent log:\n{comp.log_text()[-4000:]}") from None
    comp.kill()
    rec.hold = False
    await comp.astart()  # same database: the push subscription is routed again
    # After the lock timeout every item comes back and is acked now.
    await rec.until(lambda seen: rec.acked() == {"k0", "k1", "k2"}, 40)
    assert all(s.attempt >= 2 for s in rec.seen if s.status == 204)


async def test_an_owner_manages_push_subscriptions_from_the_client_library(
    component: ComponentFactory, prosody: Any, accounts: Any, receiver: Receiver
) -> None:
    """``Publisher.add_push``/``push_subscriptions``/``remove_push``: the owner's own
    commands from code; a refused endpoint raises the error that names the rule."""
    from xmpp_queue.client import Publisher, json_payload
    from xmpp_queue.client.errors import StanzaError

    await component(push=PUSH, server=prosody)
    async with Publisher(
        f"pub@{prosody.domain}",
        accounts.password,
        accounts.component_jid,
        host=prosody.host,
        port=prosody.c2s_port,
        allow_plain=True,
    ) as pub:
        await pub.create_queue("hooked", retry_delay=0)
        with pytest.raises(StanzaError, match="not in \\[push\\] allowed_hosts"):
            await pub.add_push("hooked", "http://10.1.2.3/hook", secret=SECRET)
        assert await pub.push_subscriptions("hooked") == []
        push_id = await pub.add_push("hooked", receiver.url, bearer=BEARER, max_in_flight=2)
        [listed] = await pub.push_subscriptions("hooked")
        assert (listed["id"], listed["url"], listed["auth"]) == (
            push_id,
            receiver.url,
            "bearer ****",
        )
        await pub.publish("hooked", json_payload({"n": 1}), "h1")
        await receiver.until(lambda seen: receiver.acked() == {"h1"})
        assert receiver.headers[0]["Authorization"] == f"Bearer {BEARER}"
        await pub.remove_push("hooked", push_id)
        assert await pub.push_subscriptions("hooked") == []
