"""``xmpp-queue admin push-add / push-list / push-remove`` through a real Prosody and
the component as operators run it (issue 22 point 3): secrets from a file or the
environment (never argv), never printed back; the receiver gets signed POSTs; the
listing masks them; removing ends the POSTs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.queue_helpers import create_queue, publish
from tests.integration.test_admin_cli_items import admin, admin_json, admin_section
from tests.integration.test_push_wire import PUSH
from tests.kit.integration import ClientFactory, ComponentFactory
from tests.kit.push import Receiver
from xmpp_queue.push.sink import SIGNATURE_HEADER, signature

pytestmark = pytest.mark.integration

BEARER, SECRET = "cli-bearer-7f3e", "cli-hmac-91c2"


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rec = await Receiver().start()
    yield rec
    await rec.stop()


async def test_push_subscription_from_the_command_line(
    component: ComponentFactory,
    client: ClientFactory,
    receiver: Receiver,
    prosody: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proc = await component(push=PUSH)
    config = proc.config_path
    config.write_text(config.read_text() + admin_section(prosody))  # type: ignore[arg-type]
    owner = await client("alice")
    node = await create_queue(owner, queue_retry_delay=0)
    bearer_file = tmp_path / "bearer"
    bearer_file.write_text(BEARER + "\n")

    code, _, err = await admin(config, "push-add", node, receiver.url, "--bearer-file", "nope")
    assert code == 2 and "--bearer-file nope" in err  # a usage error, nothing sent
    code, _, err = await admin(config, "push-add", node, "http://10.9.8.7/x")
    assert code == 1 and "not in [push] allowed_hosts" in err

    monkeypatch.setenv("XMPP_QUEUE_PUSH_SECRET", SECRET)  # the admin subprocess inherits it
    code, out, err = await admin(
        config,
        "push-add",
        node,
        receiver.url,
        "--bearer-file",
        str(bearer_file),
        "--max-in-flight",
        "2",
    )
    assert code == 0, err
    assert BEARER not in out + err and SECRET not in out + err
    assert "added" in out

    listed = await admin_json(config, "push-list", node)
    [row] = listed["tables"]["push"]
    assert row["url"] == receiver.url and row["auth"] == "bearer ****, hmac ****"
    assert row["max_in_flight"] in (2, "2")
    assert BEARER not in str(listed) and SECRET not in str(listed)

    await publish(owner, node, "c1")
    await receiver.until(lambda seen: receiver.acked() == {"c1"})
    headers, body = receiver.headers[0], receiver.bodies[0]
    assert headers["Authorization"] == f"Bearer {BEARER}"
    stamp = int(headers[SIGNATURE_HEADER].split(",")[0].removeprefix("t="))
    assert headers[SIGNATURE_HEADER] == signature(SECRET.encode(), stamp, body)

    code, out, err = await admin(config, "push-remove", node, str(row["id"]))
    assert code == 0, err
    assert (await admin_json(config, "push-list", node))["tables"].get("push", []) == []
    code, out, err = await admin(config, "push-remove", node, str(row["id"]))
    assert code == 0 and "has no push subscriptions" in out  # a warning: nothing to do
