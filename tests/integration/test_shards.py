"""Shards behind a real Prosody and a real ejabberd, on one PostgreSQL.

A sharded deployment as an operator runs it: one config with ``[shards]``
(three shard domains, the public name a directory), several
``python -m xmpp_queue run`` processes, each serving one shard (``per_process =
1``), the rest standing by. User code names only the public name:

- placement: nodes created through the public name land on the shard their
  name hashes to; the directory's disco#items lists each with its shard JID;
  ``xmpp-queue status`` names who serves what;
- node-less lists: all my subscriptions and affiliations, asked of the public
  name, come back from every shard in one answer;
- redirects: the directory and a wrong shard answer a node request with
  ``<redirect/>`` and the node's xmpp: URI; Worker and Publisher follow it, at
  the cost of one lookup per node (first contact only);
- a kill under load: the process of one shard is killed while publishers and
  workers run on every shard; a standby takes the shard over and every item
  whose publish was answered is processed (nothing lost).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from tests.integration.queue_helpers import unique, wait_until
from tests.integration.test_dashboard_browser import (  # noqa: F401  (the browser fixture)
    browser,
    off_loop,
    screenshot,
    wait_for,
)
from tests.kit.integration import SHARD_JIDS, SHARDED_JID, xmpp_queue_cli
from tests.kit.shards import ShardedCluster, close_clients
from xmpp_queue.client import Account, Job, Publisher, StanzaError, Worker, json_payload
from xmpp_queue.client.link import PubSubLink
from xmpp_queue.client.wire import get_items
from xmpp_queue.core.placement import node_uri, pick_shard

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

TIMEOUT = 60.0
PUBSUB = "http://jabber.org/protocol/pubsub"


def names_on_every_shard(prefix: str) -> list[str]:
    """Node names whose hashes land on each of the three shards (one per shard)."""
    found: dict[str, str] = {}
    n = 0
    while len(found) < len(SHARD_JIDS):
        name = f"{prefix}-{n}"
        found.setdefault(pick_shard(name, SHARD_JIDS), name)
        n += 1
    return [found[s] for s in SHARD_JIDS]


async def account_lists(
    who: Account,
) -> tuple[list[tuple[str | None, str | None]], list[tuple[str | None, str | None]]]:
    """(node, jid) of each of *who*'s subscriptions and (node, affiliation) of each of
    its affiliations, as the public name answers them (node-less requests)."""
    link = await PubSubLink.connect(who)
    try:
        subs = await link.call(f"<pubsub xmlns='{PUBSUB}'><subscriptions/></pubsub>", "get")
        affs = await link.call(f"<pubsub xmlns='{PUBSUB}'><affiliations/></pubsub>", "get")
    finally:
        await link.close()
    return (
        [(e.get("node"), e.get("jid")) for e in subs.iter(f"{{{PUBSUB}}}subscription")],
        [(e.get("node"), e.get("affiliation")) for e in affs.iter(f"{{{PUBSUB}}}affiliation")],
    )


def account(server: Any, accounts: Any, user: str) -> Account:
    return Account(
        jid=f"{user}@{server.domain}",
        password=accounts.password,
        service=SHARDED_JID,
        host=server.host,
        port=server.c2s_port,
        allow_plain=True,
        reply_timeout=10.0,
    )


async def test_placement_directory_and_redirects_the_client_follows(
    sharded: ShardedCluster, xmpp_server: Any, accounts: Any
) -> None:
    for _ in range(4):  # three shards and one standby
        sharded.add()
    served = await sharded.wait_all_served()
    assert len({id(served[s]) for s in SHARD_JIDS}) == 3, "one shard per process"

    nodes = names_on_every_shard(unique("jobs"))
    got: Counter[str] = Counter()
    done = asyncio.Event()

    async def handle(job: Job) -> None:
        got[job.item_id] += 1
        if len(got) == 3 * len(nodes):
            done.set()

    pub = Publisher(account(xmpp_server, accounts, "pub"), window=8)
    workers = [Worker(account(xmpp_server, accounts, "w1"), n, handle) for n in nodes]
    await pub.connect()
    try:
        for node in nodes:
            assert await pub.create_queue(node, lock_timeout=60) is True
        for w in workers:
            await w.start()
        for node in nodes:
            for i in range(3):
                await pub.publish(node, json_payload({"i": i}), f"{node}-{i}")
        await asyncio.wait_for(done.wait(), TIMEOUT)
        assert set(got.values()) == {1}

        # Each node lives on the shard its name hashes to, and the clients went there.
        for node, worker in zip(nodes, workers, strict=True):
            assert pub.placements.known(node) == pick_shard(node, SHARD_JIDS)
            assert worker.service_jid == pick_shard(node, SHARD_JIDS)
        # One lookup per node on first contact, none for the following publishes.
        assert pub.placements.lookups <= len(nodes)

        link = await PubSubLink.connect(account(xmpp_server, accounts, "alice"))
        try:
            # The directory lists every node with its shard (XEP-0060 items: jid + node).
            listing = await link.call(
                "<query xmlns='http://jabber.org/protocol/disco#items'/>", "get"
            )
            items = {
                i.get("node"): i.get("jid")
                for i in listing.iter("{http://jabber.org/protocol/disco#items}item")
            }
            for node in nodes:
                assert items[node] == pick_shard(node, SHARD_JIDS)
            # All my subscriptions / affiliations, asked of the public name: one answer
            # over the three shards, read from the shared database (XEP-0060 5.6, 5.7).
            w1_subs, w1_affs = await account_lists(account(xmpp_server, accounts, "w1"))
            assert sorted(w1_subs) == sorted((w.node, w.jid) for w in workers)
            assert w1_affs == []
            _, pub_affs = await account_lists(account(xmpp_server, accounts, "pub"))
            assert sorted(pub_affs) == sorted((n, "owner") for n in nodes)
            # A node asked for on the wrong shard: a redirect to the right one.
            home = pick_shard(nodes[0], SHARD_JIDS)
            wrong = next(s for s in SHARD_JIDS if s != home)
            for asked in (SHARDED_JID, wrong):
                with pytest.raises(StanzaError) as refused:
                    await link.via(asked).call(get_items(nodes[0]), "get")
                assert refused.value.condition == "redirect"
                assert refused.value.etype == "modify"
                assert refused.value.text == node_uri(home, nodes[0])
        finally:
            await link.close()
    finally:
        for w in workers:
            await asyncio.wait_for(w.stop(grace=1), 20)
        await asyncio.wait_for(pub.close(), 20)

    # The admin CLI names the public service too, and reaches the node's shard.
    config = sharded.base.config_path
    admin = config.with_name("admin.toml")
    admin.write_text(
        config.read_text() + f'\n[admin]\njid = "{accounts.admin_jid}"\n'
        f'password = "{accounts.password}"\n'
        f'server = "{xmpp_server.host}:{xmpp_server.c2s_port}"\nplain = true\n'
    )
    made = unique("ops")
    created = await asyncio.to_thread(
        xmpp_queue_cli, "admin", "-c", str(admin), "create-node", made
    )
    assert created.returncode == 0, created.stdout + created.stderr
    for node in (*nodes, made):
        shown = await asyncio.to_thread(
            xmpp_queue_cli, "admin", "-c", str(admin), "--json", "details", node
        )
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert node in shown.stdout
    listed = await asyncio.to_thread(xmpp_queue_cli, "admin", "-c", str(admin), "list")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    for shard in SHARD_JIDS:
        assert f"== {shard}" in listed.stdout
    for node in (*nodes, made):
        assert node in listed.stdout, listed.stdout
    link = await PubSubLink.connect(account(xmpp_server, accounts, "alice"))
    try:  # the admin's node is where the directory placed it
        with pytest.raises(StanzaError) as refused:
            await link.call(get_items(made), "get")
        assert refused.value.text == node_uri(pick_shard(made, SHARD_JIDS), made)
    finally:
        await link.close()

    status = xmpp_queue_cli("status", "-c", str(sharded.base.config_path))
    assert status.returncode == 0, status.stdout + status.stderr
    for name in (SHARDED_JID, *SHARD_JIDS):
        assert f"{name} (" in status.stdout and "active" in status.stdout
    assert "standbys: 1" in status.stdout, status.stdout


async def test_a_killed_shard_process_is_replaced_under_load_and_nothing_is_lost(
    sharded: ShardedCluster, xmpp_server: Any, accounts: Any
) -> None:
    for _ in range(5):  # three shards and two standbys
        sharded.add()
    served = await sharded.wait_all_served()
    nodes = names_on_every_shard(unique("load"))
    victim_shard = pick_shard(nodes[1], SHARD_JIDS)
    victim = served[victim_shard]

    got: Counter[str] = Counter()

    async def handle(job: Job) -> None:
        got[job.item_id] += 1

    pub = Publisher(account(xmpp_server, accounts, "pub"), window=16)
    workers = [
        Worker(account(xmpp_server, accounts, user), n, handle, queue_requests=4)
        for n in nodes
        for user in ("w1", "w2")
    ]
    answered: set[str] = set()
    refused: list[str] = []
    await pub.connect()
    try:
        for node in nodes:
            await pub.create_queue(node, lock_timeout=30)
        for w in workers:
            await w.start()

        async def keep_publishing(node: str, count: int) -> None:
            for i in range(count):
                item_id = f"{node}-{i}"
                try:
                    await pub.publish(node, json_payload({"i": i}), item_id)
                    answered.add(item_id)
                except StanzaError as exc:  # kept for the assertion below
                    refused.append(f"{item_id}: {exc}")
                await asyncio.sleep(0.01)

        load = [asyncio.ensure_future(keep_publishing(n, 150)) for n in nodes]
        await asyncio.sleep(1.0)
        victim.kill()
        # A standby takes the shard over (a new term on the same shard name).
        while victim_shard not in sharded.serving():  # noqa: ASYNC110
            await asyncio.sleep(0.1)
        await asyncio.wait_for(asyncio.gather(*load), TIMEOUT)
        async with asyncio.timeout(TIMEOUT):
            while not answered <= set(got):  # noqa: ASYNC110
                await asyncio.sleep(0.1)
    finally:
        await close_clients(workers, pub, grace=1)
    # The shard's publishes during the takeover wait for it (the publisher asks the
    # shard, not the public name, whether it is away) instead of failing.
    assert refused == [], refused[:5]
    assert len(answered) == 3 * 150
    assert answered <= set(got), "every answered publish was processed"
    assert sharded.serving()[victim_shard] is not victim


def placed_rows(driver: Any) -> dict[str, tuple[str, bool]]:
    """The page's "Every shard" table: node -> (its shard, linked to its page)."""
    from selenium.webdriver.common.by import By

    found = {}
    for tr in driver.find_elements(By.CSS_SELECTOR, "#deployment-queues tbody tr[data-node]"):
        shard = tr.find_element(By.CSS_SELECTOR, "td.shard").text
        linked = bool(tr.find_elements(By.CSS_SELECTOR, "td.node a"))
        found[str(tr.get_attribute("data-node"))] = (str(shard), linked)
    return found


def all_shown(
    rows: dict[str, tuple[str, bool]], nodes: list[str]
) -> dict[str, tuple[str, bool]] | None:
    return rows if set(nodes) <= set(rows) else None


async def test_a_process_serving_no_shard_is_alive_but_not_ready(
    prosody: Any,
    accounts: Any,
    pg_database: str,
    tmp_path: Any,
    browser: Any,  # noqa: F811
) -> None:
    """With ``per_process = 1`` and ``[http]`` (port 0: one config for every process),
    a process serving no shard answers as a standby; a serving one is ready, and its
    dashboard lists every queue of every shard (``/api/deployment``, and the page in
    a real browser)."""
    import aiohttp

    cluster = ShardedCluster.make(prosody, pg_database, tmp_path, http={"listen": "127.0.0.1:0"})
    try:
        # Three processes take the three shards (one each) and the directory; a
        # fourth started with them could win the directory's lease, and then serve.
        for _ in SHARD_JIDS:
            cluster.add()
        served = await cluster.wait_all_served()
        standby = cluster.add()
        await wait_until(lambda: "event=http_listening" in standby.run_log(), 20, "listener")
        assert not cluster.serves(standby)
        nodes = names_on_every_shard(unique("seen"))
        pub = Publisher(account(prosody, accounts, "pub"), window=4)
        await pub.connect()
        try:
            for n, node in enumerate(nodes):
                assert await pub.create_queue(node) is True
                for i in range(n + 1):  # 1, 2, 3 items: each shard's own figure
                    await pub.publish(node, json_payload({"i": i}), f"{node}-{i}")
        finally:
            await asyncio.wait_for(pub.close(), 20)
        async with aiohttp.ClientSession() as http:

            async def get(proc: Any, path: str) -> tuple[int, dict[str, Any]]:
                async with http.get(proc.http_base() + path) as response:
                    return response.status, await response.json()

            assert (await get(standby, "/healthz"))[0] == 200
            status, body = await get(standby, "/readyz")
            assert status == 503 and body["role"] == "standby"
            here = served[SHARD_JIDS[0]]
            assert (await get(here, "/readyz"))[0] == 200
            # One shard's dashboard lists every shard's queues, each with its shard.
            status, body = await get(here, "/api/deployment")
            assert status == 200, body
            listed = {q["node"]: q for q in body["queues"]}
            for n, node in enumerate(nodes):
                row = listed[node]
                assert row["shard"] == pick_shard(node, SHARD_JIDS)
                assert row["here"] is (row["shard"] == SHARD_JIDS[0])
                assert (row["waiting"], row["in_flight"]) == (n + 1, 0), row
            # A queue of another shard: its page is on that shard's dashboard.
            status, body = await get(here, f"/api/queue?node={nodes[1]}")
            assert status == 404 and SHARD_JIDS[1] in body["error"], body
        # The page (Debian's chromium): the "Every shard" section, this shard's queue
        # linked to its page, the others named with their shard.
        await off_loop(browser.get, here.http_base() + "/")
        shown = await off_loop(
            wait_for,
            browser,
            lambda d: all_shown(placed_rows(d), nodes),
            "every shard's queues on the page",
        )
        for node in nodes:
            shard = pick_shard(node, SHARD_JIDS)
            assert shown[node] == (shard, shard == SHARD_JIDS[0]), (node, shown)
        await off_loop(screenshot, browser, tmp_path, "dashboard-shards.png")
    finally:
        await cluster.stop()
