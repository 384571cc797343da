"""The dashboard's queue page lists the queue's push subscriptions (issue 22 point 3),
masked as everywhere else: the token, the HMAC secret and the URL's query string
(which may carry a key) never reach the browser."""

from __future__ import annotations

import json

from tests.kit import OWNER
from tests.kit.http import Ops
from xmpp_queue.core.model import SYSTEM


async def test_queue_page_lists_push_subscriptions_masked(ops: Ops) -> None:
    assert ops.pushes is not None
    await ops.service.create_node(OWNER, "jobs", {"pubsub#queue": ["1"]})
    status, body = await ops.get("/api/queue?node=jobs")
    assert status == 200 and json.loads(body)["push"] == []

    push = await ops.pushes.add(
        SYSTEM,
        "jobs",
        "http://127.0.0.1:9/hook?key=s3cr3t-key",
        bearer="tok-dash-1",
        secret="hmac-dash-2",
        max_in_flight=3,
    )
    status, body = await ops.get("/api/queue?node=jobs")
    assert status == 200, body
    assert json.loads(body)["push"] == [
        {
            "id": push.push_id,
            "node": "jobs",
            "url": "http://127.0.0.1:9/hook?****",
            "auth": "bearer ****, hmac ****",
            "max_in_flight": "3",
        }
    ]
    for secret in ("s3cr3t-key", "tok-dash-1", "hmac-dash-2"):
        assert secret not in body

    status, page = await ops.get("/queue?node=jobs")
    assert status == 200 and '<table id="push">' in page
    status, script = await ops.get("/static/app.js")
    assert status == 200 and 'syncRows("#push"' in script
