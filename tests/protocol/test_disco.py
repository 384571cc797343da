"""XEP-0030 for the service, its nodes and their items (XEP-0060 §5)."""

from __future__ import annotations

from tests.kit.stanzas import (
    ALICE,
    NS,
    OWNER,
    SERVICE,
    Stream,
    error_of,
    find,
    make_node,
    make_queue,
    publish,
)
from xmpp_queue.xmpp.disco import service_features
from xmpp_queue.xmpp.handlers import ROUTES

INFO = "http://jabber.org/protocol/disco#info"
ITEMS = "http://jabber.org/protocol/disco#items"
P = "http://jabber.org/protocol/pubsub#"


def features(reply: object) -> set[str]:
    return {f.get("var") for f in find(reply, "di:query").findall("di:feature", NS)}


async def test_5_1_service_identity_and_derived_features(stream: Stream) -> None:
    reply, _ = await stream.iq("get", ALICE, f"<query xmlns='{INFO}'/>")
    identity = find(reply, "di:query/di:identity[@category='pubsub']")
    assert identity.get("type") == "service" and identity.get("name")
    got = features(reply)
    expected = {
        "http://jabber.org/protocol/pubsub",
        "urn:xmpp:pubsub:queueing:0",
        "urn:xmpp-queue:0",
        "http://jabber.org/protocol/commands",
        "http://jabber.org/protocol/rsm",
        *(
            P + f
            for f in (
                "create-nodes",
                "instant-nodes",
                "create-and-configure",
                "config-node",
                "retrieve-default",
                "retrieve-default-sub",
                "delete-nodes",
                "purge-nodes",
                "publish",
                "publish-options",
                "item-ids",
                "persistent-items",
                "delete-items",
                "retract-items",
                "retrieve-items",
                "subscribe",
                "subscription-options",
                "retrieve-subscriptions",
                "retrieve-affiliations",
                "manage-subscriptions",
                "modify-affiliations",
                "member-affiliation",
                "outcast-affiliation",
                "publisher-affiliation",
                "publish-only-affiliation",
                "access-open",
                "access-whitelist",
                "access-authorize",
                "meta-data",
                "rsm",
                "subscription-notifications",
                "last-published",
            )
        ),
    }
    assert expected <= got, expected - got
    for absent in ("multi-items", "collections", "get-pending", "presence-notifications"):
        assert P + absent not in got


def test_features_come_from_the_request_table() -> None:
    routed = {f for route in ROUTES.values() for f in route.features}
    assert routed <= set(service_features())


async def test_5_3_and_5_4_node_info_with_meta_data(stream: Stream) -> None:
    await make_node(stream, "news", pubsub__title="News")
    reply, _ = await stream.iq("get", ALICE, f"<query xmlns='{INFO}' node='news'/>")
    query = find(reply, "di:query[@node='news']")
    identity = find(query, "di:identity")
    assert (identity.get("category"), identity.get("type")) == ("pubsub", "leaf")
    assert "http://jabber.org/protocol/pubsub" in features(reply)
    assert "urn:xmpp:pubsub:queueing:0" not in features(reply)
    form = find(query, "x:x")
    assert form.get("type") == "result"
    values = {f.get("var"): [v.text for v in f.findall("x:value", NS)] for f in form}
    assert values["FORM_TYPE"] == ["http://jabber.org/protocol/pubsub#meta-data"]
    assert values["pubsub#title"] == ["News"]
    assert values["pubsub#creation_date"] == ["2026-01-01T12:00:00Z"]
    assert values["pubsub#creator"] == ["owner@example.org"]
    assert "pubsub#queue_lock_timeout" not in values


async def test_queue_node_info_advertises_queueing(stream: Stream) -> None:
    await make_queue(stream, "jobs")
    reply, _ = await stream.iq("get", ALICE, f"<query xmlns='{INFO}' node='jobs'/>")
    assert "urn:xmpp:pubsub:queueing:0" in features(reply)
    form = find(reply, "di:query/x:x")
    assert find(form, "x:field[@var='pubsub#queue']/x:value").text == "1"
    assert find(form, "x:field[@var='pubsub#queue_lock_timeout']/x:value").text == "300"


async def test_unknown_node_is_item_not_found(stream: Stream) -> None:
    for query in (f"<query xmlns='{INFO}' node='nope'/>", f"<query xmlns='{ITEMS}' node='nope'/>"):
        reply, _ = await stream.iq("get", ALICE, query)
        assert error_of(reply) == ("cancel", "item-not-found", None)


async def test_5_2_service_items_are_the_nodes(stream: Stream) -> None:
    await make_node(stream, "news", pubsub__title="News")
    await make_node(stream, "blog")
    reply, _ = await stream.iq("get", ALICE, f"<query xmlns='{ITEMS}'/>")
    items = {i.get("node"): i.attrib for i in find(reply, "dit:query")}
    assert items["news"] == {"jid": SERVICE, "node": "news", "name": "News"}
    assert items["blog"] == {"jid": SERVICE, "node": "blog"}


async def test_5_5_node_items_are_named_by_item_id(stream: Stream) -> None:
    await make_node(stream, "news")
    await publish(stream, "news", "first", who=OWNER)
    await publish(stream, "news", "second", who=OWNER)
    reply, _ = await stream.iq("get", ALICE, f"<query xmlns='{ITEMS}' node='news'/>")
    items = [i.attrib for i in find(reply, "dit:query[@node='news']")]
    assert items == [{"jid": SERVICE, "name": "first"}, {"jid": SERVICE, "name": "second"}]


async def test_command_list_stays_with_static_disco(stream: Stream) -> None:
    commands = "http://jabber.org/protocol/commands"
    reply, _ = await stream.iq("get", ALICE, f"<query xmlns='{ITEMS}' node='{commands}'/>")
    assert reply.get("type") == "result"


async def test_admin_commands_stay_listed_across_reconnects(stream: Stream) -> None:
    async def handler(iq: object, session: dict[str, object]) -> dict[str, object]:
        return session

    comp = stream.comp
    comp.plugin["xep_0050"].add_command(node="queues", name="Queue overview", handler=handler)
    await stream.settle()  # slixmpp stores the command in a task of its own
    comp.event("session_bind", comp.boundjid)  # what every (re)connection does
    commands = "http://jabber.org/protocol/commands"
    reply, _ = await stream.iq("get", ALICE, f"<query xmlns='{ITEMS}' node='{commands}'/>")
    items = [i.attrib for i in find(reply, "dit:query")]
    assert items == [{"jid": SERVICE, "node": "queues", "name": "Queue overview"}]
