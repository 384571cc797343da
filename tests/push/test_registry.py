"""Stored push subscriptions: added by an owner or admin, routed, durable, masked.

Real parts: the service over a migrated SQLite file (so a restart is a new store on
the same file), a real aiohttp receiver on a loopback port, the outbox.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from tests.kit import ADMIN, ALICE, OWNER, PUB, FakeClock, build_service
from xmpp_queue.core.errors import Forbidden, InvalidOptions, PubSubError
from xmpp_queue.core.model import NodeConfig
from xmpp_queue.core.service import PubSubService, ServiceSettings
from xmpp_queue.core.service_access import ServiceAccess
from xmpp_queue.push.policy import EndpointRefused, PushPolicy
from xmpp_queue.push.registry import SECRET, PushSubscriptions
from xmpp_queue.runtime.outbox import Outbox

DOMAIN = "queue.example.org"
QR = "pubsub#queue_requests"
LOOPBACK = PushPolicy(
    allowed_hosts=("127.0.0.1", "localhost"),
    allowed_networks=(ipaddress.ip_network("127.0.0.0/8"),),
    allow_http=True,
    request_timeout=5,
)


class Receiver:
    def __init__(self) -> None:
        self.bodies: list[dict[str, object]] = []
        self.status = 204
        self.answer = asyncio.Event()  # cleared: requests wait for it (a POST in flight)
        self.answer.set()

    async def handle(self, request: web.Request) -> web.Response:
        self.bodies.append(json.loads(await request.read()))
        await self.answer.wait()
        return web.Response(status=self.status)


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    rec = Receiver()
    app = web.Application()
    app.router.add_post("/hook", rec.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield rec, f"http://127.0.0.1:{port}/hook"
    rec.answer.set()  # a test that failed while holding answers back
    await runner.cleanup()


async def _open(url: str, clock: FakeClock) -> PubSubService:
    from xmpp_queue.storage.store import StateStore

    settings = ServiceSettings(
        default_config=NodeConfig(),
        admins=frozenset({ADMIN.bare}),
        access=dataclasses.replace(ServiceAccess.for_domain("example.org"), own_domain=DOMAIN),
    )
    svc = build_service(await StateStore.open(url), clock, settings=settings)
    await svc.start()
    return svc


@pytest.fixture
async def database(tmp_path: Path) -> str:
    from xmpp_queue.storage.migrations import upgrade

    url = f"sqlite:///{tmp_path / 'push.db'}"
    upgrade(url)
    return url


async def _queue(svc: PubSubService) -> None:
    """A queue that retries at once and never dead-letters: an endpoint answering 500
    keeps its item (locked, retried) however fast the retries come."""
    config = {
        "pubsub#queue": ["1"],
        "pubsub#queue_retry_delay": ["0"],
        "pubsub#queue_max_deliveries": ["0"],
    }
    await svc.create_node(OWNER, "jobs", config)
    await svc.set_node_affiliations(OWNER, "jobs", [(PUB.bare, _publisher())])


def _publisher() -> object:
    from xmpp_queue.core.model import Affiliation

    return Affiliation.PUBLISHER


async def _publish(svc: PubSubService, outbox: Outbox, item_id: str) -> None:
    outcome = await svc.publish(PUB, "jobs", item_id, "<job/>", 6)
    outbox.send(outcome.effects)


async def _wait(predicate: object, seconds: float = 5) -> None:
    for _ in range(int(seconds * 100)):
        if predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


async def test_added_by_the_owner_delivers_and_survives_a_restart(
    database: str, receiver: tuple[Receiver, str]
) -> None:
    rec, url = receiver
    clock = FakeClock()
    svc = await _open(database, clock)
    outbox = Outbox()
    pushes = PushSubscriptions(svc, outbox, LOOPBACK, DOMAIN)
    await pushes.start()
    await _queue(svc)
    push = await pushes.add(OWNER, "jobs", url, bearer="tok-1", secret="hmac-1", max_in_flight=2)
    assert push.jid == f"push+{push.push_id}@{DOMAIN}"
    await _publish(svc, outbox, "a")
    await _wait(lambda: len(rec.bodies) == 1)
    await _wait(lambda: not pushes.sinks[push.jid]._in_flight)
    await pushes.close()
    await svc.stop()

    # A new term on the same database: the subscription is routed again and delivers.
    svc = await _open(database, clock)
    outbox = Outbox()
    pushes = PushSubscriptions(svc, outbox, LOOPBACK, DOMAIN)
    assert await pushes.start() == 1
    [again] = await pushes.list(ADMIN, "jobs")
    assert (again.url, again.bearer, again.secret, again.max_in_flight) == (
        url,
        "tok-1",
        "hmac-1",
        2,
    )
    await _publish(svc, outbox, "b")
    await _wait(lambda: [b["id"] for b in rec.bodies] == ["a", "b"])
    await _wait(lambda: not pushes.sinks[push.jid]._in_flight)
    details = await svc.queue_details(ADMIN, "jobs")
    assert (details.backlog, details.locks) == (0, ())
    await pushes.close()
    await svc.stop()


async def test_removed_it_stops_and_its_items_return_at_once(
    database: str, receiver: tuple[Receiver, str]
) -> None:
    rec, url = receiver
    svc = await _open(database, FakeClock())
    outbox = Outbox()
    pushes = PushSubscriptions(svc, outbox, LOOPBACK, DOMAIN)
    await pushes.start()
    await _queue(svc)
    rec.status = 500  # never acked: the item stays with the endpoint (locked, retried)
    push = await pushes.add(OWNER, "jobs", url)
    await _publish(svc, outbox, "a")
    await _wait(lambda: len(rec.bodies) >= 2)  # failed once, handed out again
    rec.answer.clear()  # the next POST stays in flight: its item stays locked
    await _wait(lambda: len(rec.bodies) >= 3)
    held = await svc.queue_details(ADMIN, "jobs")
    assert (held.backlog, len(held.locks)) == (0, 1)
    await pushes.remove(OWNER, "jobs", push.push_id)
    assert await pushes.list(OWNER, "jobs") == []
    assert push.jid not in pushes.sinks and outbox.sink_for(push.jid) is not pushes
    details = await svc.queue_details(ADMIN, "jobs")
    assert (details.backlog, len(details.locks)) == (1, 0)  # back in the queue, unlocked
    rec.answer.set()
    count = len(rec.bodies)
    await _publish(svc, outbox, "b")
    await asyncio.sleep(0.2)
    assert len(rec.bodies) == count  # nothing pushed any more
    await pushes.close()
    await svc.stop()


async def test_only_owners_and_admins_and_secrets_are_masked(
    database: str, receiver: tuple[Receiver, str]
) -> None:
    _, url = receiver
    svc = await _open(database, FakeClock())
    pushes = PushSubscriptions(svc, Outbox(), LOOPBACK, DOMAIN)
    await pushes.start()
    await _queue(svc)
    with pytest.raises(Forbidden):
        await pushes.add(ALICE, "jobs", url)
    push = await pushes.add(ADMIN, "jobs", url + "?key=k1", bearer="tok-9", secret="hmac-9")
    view = (await pushes.list(OWNER, "jobs"))[0].view()
    assert view == {
        "id": push.push_id,
        "node": "jobs",
        "url": url + "?****",
        "auth": "bearer ****, hmac ****",
        "max_in_flight": "8",
    }
    for shown in (repr(push), repr(await pushes.list(OWNER, "jobs")), str(view)):
        assert "tok-9" not in shown and "hmac-9" not in shown and "k1" not in shown
    with pytest.raises(Forbidden):
        await pushes.list(ALICE, "jobs")
    await pushes.close()
    await svc.stop()


async def test_a_client_cannot_set_the_service_options(database: str) -> None:
    svc = await _open(database, FakeClock())
    await _queue(svc)
    await svc.set_node_affiliations(OWNER, "jobs", [(ALICE.bare, _member())])
    with pytest.raises(InvalidOptions):
        await svc.subscribe(ALICE, "jobs", ALICE.jid, {SECRET: ["x"], QR: ["1"]})
    await svc.subscribe(ALICE, "jobs", ALICE.jid, {QR: ["1"]})
    with pytest.raises(InvalidOptions):
        await svc.set_subscription_options(ALICE, "jobs", ALICE.jid, None, {SECRET: ["x"]})
    await svc.stop()


def _member() -> object:
    from xmpp_queue.core.model import Affiliation

    return Affiliation.MEMBER


@pytest.mark.parametrize(
    ("policy", "url", "rule"),
    [
        (PushPolicy(), "https://hooks.example.com/x", "allowed_hosts"),
        (PushPolicy(allowed_hosts=("*",)), "http://hooks.example.com/x", "allow_http"),
        (PushPolicy(allowed_hosts=("*",)), "https://u:p@hooks.example.com/x", "user"),
        (PushPolicy(allowed_hosts=(".example.com",)), "https://example.net/x", "allowed_hosts"),
        (PushPolicy(allowed_hosts=("*",)), "https://127.0.0.1/x", "allowed_networks"),
        (PushPolicy(allowed_hosts=("*",)), "https://[::1]/x", "allowed_networks"),
        (PushPolicy(allowed_hosts=("*",)), "https://10.1.2.3/x", "allowed_networks"),
        (PushPolicy(allowed_hosts=("*",)), "https://169.254.169.254/x", "allowed_networks"),
        (PushPolicy(allowed_hosts=("localhost",)), "https://localhost/x", "allowed_networks"),
    ],
)
async def test_refused_endpoints_name_the_rule(policy: PushPolicy, url: str, rule: str) -> None:
    with pytest.raises(EndpointRefused, match=rule):
        await policy.check_endpoint(url)


async def test_suffix_rules_and_listed_networks_allow() -> None:
    policy = PushPolicy(allowed_hosts=(".example.com",))
    assert policy.host_allowed("a.b.example.com") and not policy.host_allowed("badexample.com")
    await LOOPBACK.check_endpoint("http://localhost:9/x")  # resolves to loopback, listed


async def test_a_refusal_at_send_time_is_a_nack(
    database: str, receiver: tuple[Receiver, str]
) -> None:
    """DNS (here: the rules) may change after adding: every connection is re-checked."""
    rec, url = receiver
    svc = await _open(database, FakeClock())
    outbox = Outbox()
    pushes = PushSubscriptions(svc, outbox, LOOPBACK, DOMAIN)
    await pushes.start()
    await _queue(svc)
    localhost_url = url.replace("127.0.0.1", "localhost")
    push = await pushes.add(OWNER, "jobs", localhost_url)
    # The name now resolves (as far as the rules go) to a refused address.
    pushes.policy = LOOPBACK  # unchanged object for the registry; the sink's check:
    sink = pushes.sinks[push.jid]
    sink._policy = PushPolicy(allowed_hosts=("localhost",), allow_http=True)
    session = pushes._session
    session.connector._resolver._policy = sink._policy  # type: ignore[union-attr]
    await _publish(svc, outbox, "a")
    await _wait(lambda: sink.statuses.get("error", 0) >= 2)
    assert rec.bodies == []  # never connected
    await pushes.close()
    await svc.stop()


async def test_not_a_queue_is_refused(database: str, receiver: tuple[Receiver, str]) -> None:
    _, url = receiver
    svc = await _open(database, FakeClock())
    pushes = PushSubscriptions(svc, Outbox(), LOOPBACK, DOMAIN)
    await pushes.start()
    await svc.create_node(OWNER, "news", {})
    with pytest.raises(PubSubError, match="not a queue"):
        await pushes.add(OWNER, "news", url)
    await pushes.close()
    await svc.stop()


def test_push_config_section_reads_and_refuses_bad_values() -> None:
    from xmpp_queue.config import parse_config
    from xmpp_queue.config_error import ConfigError

    base = {"component": {"jid": "queue.example.org", "secret": "s"}}
    settings = parse_config(
        {
            **base,
            "push": {
                "allowed_hosts": ["Hooks.Example.com", ".example.net"],
                "allowed_networks": ["127.0.0.0/8"],
                "allow_http": True,
                "request_timeout": 5,
            },
        }
    )
    policy = PushPolicy.from_settings(settings.push)
    assert policy.allowed_hosts == ("hooks.example.com", ".example.net")
    assert policy.allowed_networks == (ipaddress.ip_network("127.0.0.0/8"),)
    assert (policy.allow_http, policy.request_timeout) == (True, 5.0)
    assert PushPolicy.from_settings(parse_config(base).push).allowed_hosts == ()
    with pytest.raises(ConfigError, match=r"push\.allowed_networks"):
        parse_config({**base, "push": {"allowed_networks": ["nonsense"]}})
    with pytest.raises(ConfigError, match=r"push\.allowed_host"):
        parse_config({**base, "push": {"allowed_host": ["x"]}})
