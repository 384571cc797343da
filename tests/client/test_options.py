"""Login options of the client programs, filled from the demo's connection.json."""

from __future__ import annotations

import argparse
import json
import sys

import pytest

from xmpp_queue.client.options import add_login_options, parse_login_args

DEMO = {
    "host": "127.0.0.1",
    "port": 15222,
    "service": "queue.localhost",
    "node": "jobs",
    "accounts": {"worker": {"jid": "bee@localhost", "password": "pw-w"}},
}


def _parse(monkeypatch: pytest.MonkeyPatch, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="worker")
    add_login_options(parser, "worker")
    monkeypatch.setattr(sys, "argv", ["worker", *argv])
    return parse_login_args(parser, "worker")


def test_connection_file_fills_the_login_and_allows_plain(tmp_path, monkeypatch):
    path = tmp_path / "connection.json"
    path.write_text(json.dumps(DEMO))
    args = _parse(monkeypatch, "--connection", str(path))
    assert (args.jid, args.password, args.service, args.node) == (
        "bee@localhost",
        "pw-w",
        "queue.localhost",
        "jobs",
    )
    assert (args.host, args.port, args.allow_plain) == ("127.0.0.1", 15222, True)


def test_explicit_options_win_over_the_file(tmp_path, monkeypatch):
    path = tmp_path / "connection.json"
    path.write_text(json.dumps(DEMO))
    args = _parse(monkeypatch, "--connection", str(path), "-n", "other", "--port", "5223")
    assert (args.node, args.port, args.jid) == ("other", 5223, "bee@localhost")


def test_without_a_file_the_missing_options_are_named(monkeypatch, capsys):
    with pytest.raises(SystemExit) as exc:
        _parse(monkeypatch, "-j", "bee@example.org")
    assert exc.value.code == 2
    assert "--password, --service, --node" in capsys.readouterr().err


def test_without_a_file_the_defaults_are_loopback_and_no_plain_login(monkeypatch):
    args = _parse(monkeypatch, "-j", "a@b", "-p", "x", "-s", "q.b", "-n", "jobs")
    assert (args.host, args.port, args.allow_plain) == ("127.0.0.1", 5222, False)


def test_server_host_port_and_plain_are_the_shared_spelling(monkeypatch):
    args = _parse(
        monkeypatch, "-j", "a@b", "-p", "x", "-s", "q.b", "-n", "jobs", "--server", "xmpp.b:5223"
    )
    assert (args.host, args.port, args.allow_plain) == ("xmpp.b", 5223, False)
    args = _parse(
        monkeypatch, "-j", "a@b", "-p", "x", "-s", "q.b", "-n", "jobs", "--server", "xmpp.b"
    )
    assert (args.host, args.port) == ("xmpp.b", 5222)
    args = _parse(monkeypatch, "-j", "a@b", "-p", "x", "-s", "q.b", "-n", "jobs", "--plain")
    assert args.allow_plain is True
    assert (
        _parse(monkeypatch, "-j", "a@b", "-p", "x", "-s", "q.b", "-n", "n", "--name", "w7").name
        == "w7"
    )
