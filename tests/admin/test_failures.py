"""When the service fails under a command: an XEP-0050 error, never a crash or a
silent session, and the admin can retry (XEP-0050 §4.4)."""

from __future__ import annotations

import logging

import pytest

from tests.kit.admin import (
    ALICE,
    Transcript,
    assert_bad_payload,
    error_of,
    make_queue,
    make_worker,
    note,
    publish,
)
from xmpp_queue.core.errors import Forbidden, StorageUnavailable
from xmpp_queue.core.service import PubSubService


async def test_an_unexpected_failure_is_internal_server_error_with_one_trace(
    transcript: Transcript,
    service: PubSubService,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken(*args: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(service, "queue_overview", broken)
    with caplog.at_level(logging.ERROR, logger="xmpp_queue.admin"):
        reply = await transcript.execute("xmpp-queue#overview")
    etype, condition, specific, text = error_of(reply)
    assert (etype, condition, specific) == ("wait", "internal-server-error", None)
    assert "disk on fire" not in text and "service log" in text
    (record,) = caplog.records
    assert "event=admin_command_failed" in record.getMessage() and record.exc_info


async def test_storage_unavailable_says_so_and_asks_to_wait(
    transcript: Transcript, service: PubSubService, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def down(*args: object) -> None:
        raise StorageUnavailable("the database cannot be reached")

    monkeypatch.setattr(service, "status", down)
    etype, condition, _, text = error_of(await transcript.execute("xmpp-queue#status"))
    assert (etype, condition) == ("wait", "internal-server-error")
    assert text == "the database cannot be reached"


async def test_a_refusal_of_the_service_is_forbidden(
    transcript: Transcript, service: PubSubService, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refuse(*args: object) -> None:
        raise Forbidden("administer the service")

    monkeypatch.setattr(service, "status", refuse)
    assert error_of(await transcript.execute("xmpp-queue#status"))[:2] == ("cancel", "forbidden")


async def test_a_failed_complete_keeps_the_session_for_a_corrected_form(
    transcript: Transcript, service: PubSubService
) -> None:
    await make_queue(service, max_deliveries="1")
    await make_worker(service, ALICE, 1)
    await publish(service, "jobs", "i1")
    await service.unlock(ALICE, "jobs", "i1")  # dead-lettered
    first = await transcript.execute("xmpp-queue#redrive")
    bad = await transcript.step(
        first, action="complete", fields={"node": "jobs/dead-letter", "count": "-4"}
    )
    assert_bad_payload(bad, "must not be negative")
    done = await transcript.step(
        first, action="complete", fields={"node": "jobs/dead-letter", "count": "1"}
    )
    assert done["command"]["status"] == "completed"
    assert note(done) == "Moved 1 item(s) from 'jobs/dead-letter' back to their queue."
    assert transcript.component.plugin["xep_0050"].sessions == {}
