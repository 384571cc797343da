"""The error table: every row on the wire, nothing unmapped, the right logging."""

from __future__ import annotations

import inspect
import logging
import xml.etree.ElementTree as ET

import pytest
from slixmpp import Iq

from tests.kit.stanzas import ALICE, NS, OWNER, SERVICE, Stream, error_of, find, pubsub
from xmpp_queue.core import errors as core_errors
from xmpp_queue.core.errors import (
    FeatureNotImplemented,
    InvalidNodeConfig,
    InvalidOptions,
    ItemLockedByOther,
    ItemNotFound,
    NodeExists,
    NodeNotFound,
    NotAQueue,
    NotLockHolder,
    NotSubscribed,
    PayloadTooBig,
    PreconditionNotMet,
    PubSubError,
    QueueConfigurationRequired,
)
from xmpp_queue.xmpp import errors
from xmpp_queue.xmpp.errors import ERROR_TABLE, INTERNAL_ERROR_TEXT, reply_for_exception, row_for


def instance(cls: type[PubSubError]) -> PubSubError:
    """An instance of any core error, whatever its constructor wants."""
    args = {
        "node": "n",
        "item_id": "i",
        "jid": "a@example.org",
        "field": "pubsub#x",
        "reason": "bad",
        "fields": ("pubsub#queue_requests",),
        "action": "publish",
        "feature": "retrieve-items",
        "size": 10,
        "limit": 5,
        "rate": 10.0,
        "retry_after": 0.5,
        "modify": False,
        "text": "",
        "name": "Urgency",
        "limit_field": "pubsub#attributes_max",
        "actual": 40,
    }
    params = inspect.signature(cls.__init__).parameters
    return cls(**{k: args[k] for k in params if k != "self" and k in args})


CORE_ERRORS = [
    cls
    for _, cls in inspect.getmembers(core_errors, inspect.isclass)
    if issubclass(cls, PubSubError) and cls is not PubSubError
]


def test_every_core_error_has_a_row() -> None:
    assert CORE_ERRORS, "no core errors found"
    unmapped = [c.__name__ for c in CORE_ERRORS if row_for(instance(c)) is None]
    assert unmapped == []


def request_iq(stream: Stream) -> Iq:
    xml = ET.fromstring(
        f"<iq xmlns='jabber:component:accept' type='set' id='e1' from='{ALICE}' to='{SERVICE}'>"
        "<pubsub xmlns='http://jabber.org/protocol/pubsub'><retract node='n'><item id='i'/>"
        "</retract></pubsub></iq>"
    )
    return Iq(stream=stream.comp, xml=xml)


def as_received(reply: Iq) -> ET.Element:
    return ET.fromstring(str(reply))


@pytest.mark.parametrize(
    "cls", sorted(ERROR_TABLE, key=lambda c: c.__name__), ids=lambda c: c.__name__
)
async def test_each_row_renders_type_condition_and_pubsub_child(
    stream: Stream, cls: type[PubSubError]
) -> None:
    exc = instance(cls)
    row = ERROR_TABLE[cls]
    reply = as_received(reply_for_exception(request_iq(stream), exc))
    assert reply.get("id") == "e1" and reply.get("to") == ALICE and reply.get("from") == SERVICE
    assert error_of(reply) == (row.type, row.condition, row.pubsub)
    if cls is not QueueConfigurationRequired:
        assert find(reply, "{*}error/st:text").text == str(exc)


@pytest.mark.parametrize(
    ("exc", "verb", "expected"),
    [
        (
            InvalidOptions("pubsub#deliver", "x"),
            "subscribe",
            ("modify", "not-acceptable", "invalid-options"),
        ),
        (
            InvalidOptions("pubsub#deliver", "x"),
            "options",
            ("modify", "bad-request", "invalid-options"),
        ),
        (
            NotSubscribed("n", "a@example.org"),
            "unsubscribe",
            ("cancel", "unexpected-request", "not-subscribed"),
        ),
        (
            NotSubscribed("n", "a@example.org", modify=True),
            "options",
            ("modify", "unexpected-request", "not-subscribed"),
        ),
        (ItemNotFound("n", "i"), "retract", ("cancel", "item-not-found", None)),
        (ItemLockedByOther("n", "i"), "unlock", ("cancel", "conflict", None)),
        (NotLockHolder("n", "i"), "retract", ("wait", "unexpected-request", None)),
        (NodeNotFound("n"), "items", ("cancel", "item-not-found", None)),
        (NodeExists("n"), "create", ("cancel", "conflict", None)),
        (InvalidNodeConfig("pubsub#x", "bad"), "configure", ("modify", "not-acceptable", None)),
        (PayloadTooBig(10, 5), "publish", ("modify", "not-acceptable", "payload-too-big")),
        (
            PreconditionNotMet("pubsub#access_model"),
            "publish",
            ("cancel", "conflict", "precondition-not-met"),
        ),
        (NotAQueue("n"), "unlock", ("modify", "bad-request", None)),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v),
)
async def test_rows_named_by_design(
    stream: Stream, exc: PubSubError, verb: str, expected: tuple[str, str, str | None]
) -> None:
    reply = as_received(reply_for_exception(request_iq(stream), exc, verb))
    assert error_of(reply) == expected


async def test_unsupported_feature_names_it(stream: Stream) -> None:
    reply = as_received(
        reply_for_exception(request_iq(stream), FeatureNotImplemented("retrieve-items"))
    )
    assert error_of(reply) == ("cancel", "feature-not-implemented", "unsupported")
    assert find(reply, "{*}error/pe:unsupported").get("feature") == "retrieve-items"


async def test_error_reply_echoes_the_request(stream: Stream) -> None:
    reply = as_received(reply_for_exception(request_iq(stream), ItemNotFound("n", "i")))
    assert find(reply, "ps:pubsub/ps:retract/ps:item").get("id") == "i"


class Unlisted(PubSubError):
    """A domain error someone forgot to put in the table."""


@pytest.mark.parametrize("exc", [RuntimeError("db exploded: password=hunter2"), Unlisted()])
async def test_unmapped_errors_are_internal_server_error_with_one_trace(
    stream: Stream, exc: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="xmpp_queue")
    reply = as_received(reply_for_exception(request_iq(stream), exc, "retract"))
    assert error_of(reply) == ("wait", "internal-server-error", None)
    assert find(reply, "{*}error/st:text").text == INTERNAL_ERROR_TEXT
    records = [r for r in caplog.records if r.name.startswith("xmpp_queue")]
    assert len(records) == 1
    assert records[0].levelno == logging.ERROR and records[0].exc_info is not None


async def test_refusals_are_one_info_line_without_trace(
    stream: Stream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="xmpp_queue")
    reply, _ = await stream.iq("get", ALICE, pubsub("<items node='nope'/>"))
    assert error_of(reply) == ("cancel", "item-not-found", None)
    records = [r for r in caplog.records if r.name == "xmpp_queue.xmpp.errors"]
    assert len(records) == 1
    assert records[0].levelno == logging.INFO and records[0].exc_info is None
    message = records[0].getMessage()
    assert "event=request_refused" in message and "verb=items" in message
    assert "error=NodeNotFound" in message and "condition=item-not-found" in message


async def test_a_failing_service_call_never_yields_slixmpps_default_reply(
    stream: Stream, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(stream.service, "own_subscriptions", broken)
    with caplog.at_level(logging.ERROR):
        reply, _ = await stream.iq("get", OWNER, pubsub("<subscriptions/>"))
    assert error_of(reply) == ("wait", "internal-server-error", None)
    text = find(reply, "{*}error/st:text").text or ""
    assert "Slixmpp" not in text and "boom" not in text
    traces = [r for r in caplog.records if r.exc_info]
    assert len(traces) == 1


def test_as_xmpp_error_uses_the_same_table() -> None:
    err = errors.as_xmpp_error(NodeNotFound("n"))
    assert (err.etype, err.condition) == ("cancel", "item-not-found")
    err = errors.as_xmpp_error(PayloadTooBig(2, 1))
    assert (err.condition, err.extension, err.extension_ns) == (
        "not-acceptable",
        "payload-too-big",
        NS["pe"],
    )
