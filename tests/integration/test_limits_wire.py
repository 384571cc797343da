"""Limits that cannot be walked around (issue 27 point 6), through Prosody, on SQLite and
PostgreSQL: a batch publish needs a token per item, and the dead-letter node a queue
will make counts in its owner's ``max_nodes_per_jid``, so renaming it cannot make
nodes past the quota. The rules themselves are tested in
tests/unit/test_safe_defaults_and_limits.py and tests/protocol/test_limits.py; this
is what a client sees of them over a real server and database.
"""

from __future__ import annotations

from typing import Any

import pytest
from slixmpp.exceptions import IqError

from tests.integration.queue_helpers import (
    NODE_CONFIG,
    PUBSUB,
    PUBSUB_OWNER,
    Inbox,
    create_node,
    create_queue,
    error_info,
    form_xml,
    iq,
    match,
    publish,
    send,
    subscribe_queue,
    unique,
    unlock_iq,
)

pytestmark = pytest.mark.integration

LIMITS = {"publish_rate": 1, "publish_burst": 20, "max_nodes_per_jid": 3}


def batch(client: Any, node: str, first: int, n: int) -> Any:
    items = "".join(
        f"<item id='i{k}'><job xmlns='urn:example'/></item>" for k in range(first, first + n)
    )
    return iq(client, f"<pubsub xmlns='{PUBSUB}'><publish node='{node}'>{items}</publish></pubsub>")


async def refused(stanza: Any) -> tuple[str, str, str]:
    """(condition, type, the error reply as XML)."""
    with pytest.raises(IqError) as err:
        await send(stanza)
    info = error_info(err.value.iq)
    return info.condition, info.type, info.xml


async def test_batches_count_items_and_dead_letter_renames_count_nodes(
    component: Any, client: Any, database_url: str
) -> None:
    await component(database_url=database_url, limits=LIMITS)
    owner, worker = await client("pub"), await client("w1")
    # a queue (and its dead-letter node, reserved) and a node: 3 of 3
    jobs = await create_queue(owner, unique("jobs"), queue_max_deliveries=1, queue_retry_delay=0)
    await create_node(owner, unique("news"))
    condition, etype, _ = await refused(
        iq(owner, f"<pubsub xmlns='{PUBSUB}'><create node='{unique('more')}'/></pubsub>")
    )
    assert (condition, etype) == ("not-allowed", "cancel")

    # the dead-letter node is made on first use, within the quota it had reserved
    inbox = Inbox(worker)
    await subscribe_queue(worker, jobs, 1)
    await publish(owner, jobs, "poison")  # one token of the 20
    await inbox.next(match("item", jobs, "poison"))
    await send(unlock_iq(worker, jobs, "poison"))  # max deliveries 1: dead-lettered
    # renaming it now would make a fourth node: refused (issue 27 saw 15 more made)
    rename = form_xml(NODE_CONFIG, {"pubsub#queue_dead_letter": unique("elsewhere")})
    configure = iq(owner, f"<pubsub xmlns='{PUBSUB_OWNER}'><configure node='{jobs}'/></pubsub>")
    configure.xml[0][0].append(rename)
    condition, etype, text = await refused(configure)
    assert (condition, etype) == ("not-allowed", "cancel") and "dead-letter" in text

    await send(batch(owner, jobs, 0, 15))  # 15 of the 19 tokens left
    condition, etype, text = await refused(batch(owner, jobs, 15, 15))
    assert (condition, etype) == ("resource-constraint", "wait"), text
    await send(batch(owner, jobs, 15, 3))  # what is left (and refilled) fits
