"""Adding and removing push subscriptions from the dashboard (issue 22 point 3): the
``push-add`` and ``push-remove`` actions go through the push registry the admin
commands use (the ``[push]`` rules, one commit, a route in the outbox), behind the
same token and Host/Origin checks as every action; the secret never comes back in
an answer, the queue JSON, the page, or the log."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator

import pytest

from tests.kit import OWNER, PUB
from tests.kit.http import TOKEN, Ops
from tests.kit.push import Receiver
from xmpp_queue.core.model import SYSTEM, Affiliation

BEARER = "dash-bearer-7f3a9c"
HMAC = "dash-hmac-51be20"


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rec = await Receiver().start()
    yield rec
    await rec.stop()


async def _queue(ops: Ops, node: str = "jobs") -> None:
    await ops.service.create_node(
        OWNER, node, {"pubsub#queue": ["1"], "pubsub#queue_retry_delay": ["0"]}
    )
    await ops.service.set_node_affiliations(OWNER, node, [(PUB.bare, Affiliation.PUBLISHER)])


async def _listed(ops: Ops, node: str = "jobs") -> list[dict[str, str]]:
    status, body = await ops.get(f"/api/queue?node={node}")
    assert status == 200, body
    push: list[dict[str, str]] = json.loads(body)["push"]
    return push


async def test_add_list_and_remove_through_the_dashboard(
    ops: Ops, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    assert ops.pushes is not None
    await _queue(ops)
    await ops.service.publish(PUB, "jobs", "waiting-1", "<job/>", 6)
    form = {
        "node": "jobs",
        "url": receiver.url + "?key=url-key-93d1",
        "auth": "bearer",
        "secret": BEARER,
        "max_in_flight": "3",
    }
    status, reply = await ops.post("/api/actions/push-add", form, TOKEN)
    assert status == 200, reply
    [row] = await _listed(ops)
    assert row == {
        "id": row["id"],
        "node": "jobs",
        "url": receiver.url + "?****",
        "auth": "bearer ****",
        "max_in_flight": "3",
    }
    assert reply["message"] == f"added push subscription {row['id']} to {receiver.url}?****"
    # The same registry as the commands: stored as the queue subscription, routed at once.
    [stored] = await ops.pushes.list(SYSTEM, "jobs")
    assert (stored.push_id, stored.bearer, stored.max_in_flight) == (row["id"], BEARER, 3)
    await receiver.until(lambda seen: receiver.acked() == {"waiting-1"})
    for _ in range(100):  # the 204 is committed as the ack: the queue is empty
        if not (await ops.service.queue_details(SYSTEM, "jobs")).locks:
            break
        await asyncio.sleep(0.02)
    details = await ops.service.queue_details(SYSTEM, "jobs")
    assert (details.backlog, details.locks) == (0, ())
    assert receiver.headers[0]["Authorization"] == f"Bearer {BEARER}"

    # A second one with an HMAC secret and no max given (the commands' default, 8).
    second = {"node": "jobs", "url": receiver.url, "auth": "hmac", "secret": HMAC}
    status, reply = await ops.post("/api/actions/push-add", second, TOKEN)
    assert status == 200, reply
    rows = {r["auth"]: r for r in await _listed(ops)}
    assert set(rows) == {"bearer ****", "hmac ****"}
    assert rows["hmac ****"]["max_in_flight"] == "8"

    status, reply = await ops.post(
        "/api/actions/push-remove", {"node": "jobs", "id": row["id"]}, TOKEN
    )
    assert status == 200, reply
    assert reply["message"] == f"removed push subscription {row['id']}"
    assert [r["auth"] for r in await _listed(ops)] == ["hmac ****"]
    assert [p.push_id for p in await ops.pushes.list(SYSTEM, "jobs")] == [rows["hmac ****"]["id"]]
    status, reply = await ops.post(
        "/api/actions/push-remove", {"node": "jobs", "id": row["id"]}, TOKEN
    )
    assert status == 409 and "no push subscription" in str(reply["error"]), reply

    _, body = await ops.get("/api/queue?node=jobs")
    _, page = await ops.get("/queue?node=jobs")
    _, script = await ops.get("/static/app.js")
    for secret in (BEARER, HMAC, "url-key-93d1"):
        assert secret not in body and secret not in page and secret not in script
        # The service's own log (the receiver's access log in this process shows its URL).
        ours = [r.getMessage() for r in caplog.records if r.name.startswith("xmpp_queue")]
        assert not any(secret in line for line in ours)
    assert 'id="push-add"' in page and '"push-remove"' in script


async def test_an_endpoint_the_push_rules_refuse_is_named_and_not_stored(ops: Ops) -> None:
    await _queue(ops)
    for url, rule in (
        ("http://10.1.2.3/hook", "not in [push] allowed_hosts"),
        ("http://user:pw@127.0.0.1:9/hook", "no user or password in the URL"),
        ("ftp://127.0.0.1/hook", "must be an https:// URL"),
    ):
        body = {"node": "jobs", "url": url, "auth": "hmac", "secret": HMAC}
        status, reply = await ops.post("/api/actions/push-add", body, TOKEN)
        assert status == 409 and rule in str(reply["error"]), (url, reply)
        assert HMAC not in json.dumps(reply)
    assert await _listed(ops) == []


@pytest.mark.parametrize(
    ("form", "says"),
    [
        ({}, "the endpoint URL is required"),
        ({"url": "  "}, "the endpoint URL is required"),
        ({"url": 7}, "the endpoint URL must be text"),
        ({"url": "http://127.0.0.1:9/h", "auth": "basic"}, "auth must be one of"),
        ({"url": "http://127.0.0.1:9/h", "auth": "bearer"}, "needs a bearer token"),
        ({"url": "http://127.0.0.1:9/h", "auth": "hmac", "secret": ""}, "needs a HMAC secret"),
        ({"url": "http://127.0.0.1:9/h", "secret": BEARER}, "a secret was given with auth none"),
        ({"url": "http://127.0.0.1:9/h", "max_in_flight": "0"}, "max in flight must be 1 to"),
        ({"url": "http://127.0.0.1:9/h", "max_in_flight": "lots"}, "must be a whole number"),
        ({"url": "http://127.0.0.1:9/h", "max_in_flight": True}, "must be a whole number"),
        ({"url": "http://127.0.0.1:9/h", "max_in_flight": 1001}, "max in flight must be 1 to"),
    ],
)
async def test_a_bad_form_is_explained_and_stores_nothing(
    ops: Ops, form: dict[str, object], says: str
) -> None:
    await _queue(ops)
    status, reply = await ops.post("/api/actions/push-add", {"node": "jobs", **form}, TOKEN)
    assert status == 400 and says in str(reply["error"]), reply
    assert BEARER not in json.dumps(reply)
    assert await _listed(ops) == []


async def test_push_actions_need_the_token_and_the_dashboards_origin(ops: Ops) -> None:
    assert ops.pushes is not None
    await _queue(ops)
    form = {"node": "jobs", "url": "http://127.0.0.1:9/h", "auth": "none"}
    for token in (None, "wrong-token-wrong-token"):
        status, _ = await ops.post("/api/actions/push-add", form, token)
        assert status in (401, 403)
    headers = {"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"}
    async with ops.session.post(
        ops.base + "/api/actions/push-add", json=form, headers=headers
    ) as r:
        assert r.status == 403
    assert await _listed(ops) == []

    push = await ops.pushes.add(SYSTEM, "jobs", "http://127.0.0.1:9/h")
    gone = {"node": "jobs", "id": push.push_id}
    status, _ = await ops.post("/api/actions/push-remove", gone, None)
    assert status == 401
    async with ops.session.post(
        ops.base + "/api/actions/push-remove", json=gone, headers=headers
    ) as r:
        assert r.status == 403
    assert [r["id"] for r in await _listed(ops)] == [push.push_id]
    status, reply = await ops.post("/api/actions/push-remove", {"node": "jobs"}, TOKEN)
    assert status == 400 and "id is required" in str(reply["error"])


async def test_push_actions_are_for_queues_only(ops: Ops) -> None:
    await ops.service.create_node(OWNER, "news", {})
    form = {"node": "news", "url": "http://127.0.0.1:9/h"}
    status, reply = await ops.post("/api/actions/push-add", form, TOKEN)
    assert status in (404, 409) and "queue" in str(reply["error"]), reply
    status, reply = await ops.post("/api/actions/push-add", {**form, "node": "nope"}, TOKEN)
    assert status == 404, reply
