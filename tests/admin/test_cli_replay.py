"""``xmpp-queue admin seek|snapshot|snapshots|snapshot-delete``: the command line
becomes the answers to the service's one form (no connection: usage errors come
before any)."""

from __future__ import annotations

import pytest

from xmpp_queue.admin_cli import build_parser, plan
from xmpp_queue.admin_client import UsageError


def _plan(*argv: str) -> tuple[str, list[dict[str, str | list[str]]]]:
    return plan(build_parser().parse_args(["-j", "ops@example.org", *argv]))


def test_each_replay_subcommand_answers_its_form() -> None:
    assert _plan("seek", "jobs", "--snapshot", "s1") == (
        "xmpp-queue#seek",
        [{"node": "jobs", "snapshot": "s1"}],
    )
    assert _plan("seek", "jobs", "--to", "2024-05-01T12:00:00Z") == (
        "xmpp-queue#seek",
        [{"node": "jobs", "to": "2024-05-01T12:00:00+00:00"}],
    )
    assert _plan("snapshot", "jobs", "s1") == (
        "xmpp-queue#snapshot",
        [{"node": "jobs", "name": "s1"}],
    )
    assert _plan("snapshots", "jobs") == ("xmpp-queue#snapshots", [{"node": "jobs"}])
    assert _plan("snapshot-delete", "jobs", "s1") == (
        "xmpp-queue#snapshot-delete",
        [{"node": "jobs", "name": "s1"}],
    )


def test_a_seek_needs_one_target_and_a_time_with_its_zone() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["-j", "o@x", "seek", "jobs"])  # neither --to nor --snapshot
    with pytest.raises(UsageError, match="time zone"):
        _plan("seek", "jobs", "--to", "2024-05-01T12:00:00")
    with pytest.raises(UsageError, match="not a date-time"):
        _plan("seek", "jobs", "--to", "yesterday")
