"""Reading submitted forms and writing times and URLs: the small pure parts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from slixmpp.plugins.xep_0004 import Form

from xmpp_queue.admin.errors import BadPayload
from xmpp_queue.admin.forms import Submitted
from xmpp_queue.admin.humanize import ago, duration, instant, redacted_url, until


def submitted(**fields: str | list[str]) -> Submitted:
    form = Form()
    form["type"] = "submit"
    for var, value in fields.items():
        form.add_field(
            var=var, ftype="text-multi" if isinstance(value, list) else None, value=value
        )
    return Submitted.from_payload([form])


def test_reads_the_first_form_of_a_payload_and_treats_none_as_empty() -> None:
    assert submitted(node="jobs").values == {"node": ("jobs",)}
    assert Submitted.from_payload([]).values == {}
    assert Submitted.from_payload(None).values == {}


def test_text_trims_and_requires() -> None:
    form = submitted(node="  jobs ", empty="")
    assert form.text("node", "Node") == "jobs"
    assert form.text("empty", "Empty") is None
    assert form.text("absent", "Absent") is None
    with pytest.raises(BadPayload, match="Absent is required"):
        form.text("absent", "Absent", required=True)
    with pytest.raises(BadPayload, match="expected one value, got 2"):
        submitted(node=["a", "b"]).text("node", "Node")


def test_flag_reads_xep_0004_booleans() -> None:
    assert submitted(a="1", b="true", c="0", d="false").flag("a", "A")
    form = submitted(b="true", c="0", d="false")
    assert form.flag("b", "B") and not form.flag("c", "C") and not form.flag("d", "D")
    assert form.flag("absent", "Absent", default=True)
    with pytest.raises(BadPayload, match="'yes' is not a boolean"):
        submitted(a="yes").flag("a", "A")


def test_jid_is_validated_and_normalised() -> None:
    assert submitted(j="Bob@Example.ORG/Res").jid("j", "J") == "bob@example.org/Res"
    assert submitted(j="bob@example.org").jid("j", "J") == "bob@example.org"
    for bad in ("bob@@example.org", "@example.org", "bob@", "a b@example.org"):
        with pytest.raises(BadPayload, match="is not a valid JID"):
            submitted(j=bad).jid("j", "Holder")


def test_count_is_a_whole_number_above_a_minimum() -> None:
    assert submitted(n="5").count("n", "N", minimum=1) == 5
    assert submitted(n="").count("n", "N") is None
    with pytest.raises(BadPayload, match="N: must not be negative \\(got -2\\)"):
        submitted(n="-2").count("n", "N", minimum=1)
    with pytest.raises(BadPayload, match="N: must be at least 1 \\(got 0\\)"):
        submitted(n="0").count("n", "N", minimum=1)
    with pytest.raises(BadPayload, match=r"'1\.5' is not a whole number"):
        submitted(n="1.5").count("n", "N")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("sqlite+aiosqlite:///var/lib/q.db", "sqlite+aiosqlite:///var/lib/q.db"),
        ("sqlite:////abs/q.db", "sqlite:////abs/q.db"),
        (
            "postgresql+asyncpg://queue:s3cr:et@db:5432/queue",
            "postgresql+asyncpg://queue:***@db:5432/queue",
        ),
        ("postgresql+asyncpg://queue@db/queue", "postgresql+asyncpg://queue@db/queue"),
        (
            "postgresql://u:p%40ss@h/d?sslmode=require&password=x",
            "postgresql://u:***@h/d?sslmode=require&password=***",
        ),
    ],
)
def test_database_url_loses_its_password(url: str, shown: str) -> None:
    assert redacted_url(url) == shown


def test_durations_and_instants() -> None:
    assert [duration(s) for s in (0, 45, 192, 7380, 100800)] == [
        "0s",
        "45s",
        "3m 12s",
        "2h 03m",
        "1d 04h",
    ]
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert ago(now - timedelta(seconds=90), now) == "1m 30s ago"
    assert ago(None, now) == "never"
    assert until(now + timedelta(seconds=30), now) == "in 30s"
    assert until(now - timedelta(seconds=5), now) == "overdue by 5s"
    assert until(None, now) == "no deadline"
    assert instant(now) == "2026-01-01T12:00:00Z"
