"""One Account for every client: built from keywords, a config section or the demo's
connection.json, and taken by the worker, the publisher, the pipeline's publisher
and the admin CLI (issue 25 point 6). No network: nothing here logs in."""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path

import pytest

from xmpp_queue.admin_cli import _normalise, build_parser, login_account
from xmpp_queue.client import Account, AccountError, Job, Publisher, Worker
from xmpp_queue.client.options import account_from_args, add_login_options, parse_login_args
from xmpp_queue.pipeline.settings import PipelineSettings

DEMO = {
    "host": "127.0.0.1",
    "port": 15222,
    "service": "queue.localhost",
    "node": "jobs",
    "accounts": {
        "worker": {"jid": "bee@localhost", "password": "pw-w"},
        "publisher": {"jid": "app@localhost", "password": "pw-p"},
        "admin": {"jid": "ops@localhost", "password": "pw-a"},
    },
}
BEE = Account(
    jid="bee@localhost", password="pw-w", service="queue.localhost", port=15222, allow_plain=True
)


async def handle(job: Job) -> None:
    return None


# --- keywords ---------------------------------------------------------------------------


def test_keywords_build_a_frozen_account_whose_repr_hides_the_password() -> None:
    account = Account(jid="bee@example.org", password="s3cret", service="queue.example.org")
    assert (account.host, account.port, account.allow_plain, account.reply_timeout) == (
        "127.0.0.1",
        5222,
        False,
        30.0,
    )
    assert "s3cret" not in repr(account)
    with pytest.raises(AttributeError):
        account.port = 1  # type: ignore[misc]
    assert account.replace(port=5223).port == 5223 and account.port == 5222


def test_without_a_host_the_jid_s_domain_is_the_address() -> None:
    account = Account(jid="bee@example.org/w1", password="pw", service="q.example.org", host=None)
    assert account.address == ("example.org", 5222)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"jid": ""}, "jid must be a non-empty string"),
        ({"service": ""}, "service must be a non-empty string"),
        ({"port": 0}, "port must be a positive integer"),
        ({"port": True}, "port must be a positive integer"),
        ({"reply_timeout": 0}, "reply_timeout must be a positive"),
    ],
)
def test_a_bad_keyword_is_refused_by_name(changes: dict[str, object], message: str) -> None:
    values: dict[str, object] = {"jid": "a@b", "password": "pw", "service": "q.b", **changes}
    with pytest.raises(AccountError, match=message):
        Account(**values)  # type: ignore[arg-type]


# --- a config section -------------------------------------------------------------------


def test_a_toml_section_with_server_plain_and_a_password_file(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("from-the-file\n")
    text = f"""
    [account]
    jid = "loader@example.org"
    password_file = "{tmp_path / "pw"}"
    service = "queue.example.org"
    server = "xmpp.example.org:5269"
    plain = true
    reply_timeout = 5
    """
    account = Account.from_mapping(tomllib.loads(text)["account"])
    assert account == Account(
        jid="loader@example.org",
        password="from-the-file",
        service="queue.example.org",
        host="xmpp.example.org",
        port=5269,
        allow_plain=True,
        reply_timeout=5.0,
    )


def test_a_section_takes_defaults_for_what_it_leaves_out() -> None:
    section = {"jid": "ops@example.org", "password": "pw", "server": "xmpp.example.org"}
    account = Account.from_mapping(section, service="queue.example.org")
    assert (account.service, account.host, account.port) == (
        "queue.example.org",
        "xmpp.example.org",
        5222,
    )


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"jid": "a@b", "password": "pw", "service": "q", "hots": "x"}, r"\[x\] hots: unknown"),
        ({"jid": "a@b", "password": "pw", "service": "q", "port": "5222"}, "port must be an int"),
        ({"jid": "a@b", "password": "pw", "service": "q", "plain": 1}, "plain must be true or"),
        ({"jid": "a@b", "service": "q"}, r"\[x\] needs password"),
        ({"jid": "a@b", "password": "pw", "service": "q", "port": -1}, r"\[x\] port must be"),
    ],
)
def test_a_bad_section_is_one_error_naming_the_key(section: dict[str, object], message: str):
    with pytest.raises(AccountError, match=message):
        Account.from_mapping(section, where="[x]")


# --- the demo's connection.json ----------------------------------------------------------


def test_the_demo_s_connection_file_gives_each_role_its_account(tmp_path: Path) -> None:
    path = tmp_path / "connection.json"
    path.write_text(json.dumps(DEMO))
    assert Account.from_connection_file(path, "worker") == BEE
    assert Account.from_connection_file(path, "admin").jid == "ops@localhost"
    with pytest.raises(AccountError, match="no 'reader' account"):
        Account.from_connection_file(path, "reader")


def test_the_examples_options_become_the_same_account(tmp_path, monkeypatch) -> None:
    path = tmp_path / "connection.json"
    path.write_text(json.dumps(DEMO))
    parser = argparse.ArgumentParser(prog="worker")
    add_login_options(parser, "worker")
    monkeypatch.setattr(sys, "argv", ["worker", "--connection", str(path)])
    assert account_from_args(parse_login_args(parser, "worker")) == BEE


# --- who takes it -------------------------------------------------------------------------


def test_worker_takes_an_account_or_the_older_keywords_and_both_agree() -> None:
    new = Worker(BEE, "jobs", handle, name="w1")
    old = Worker(
        "bee@localhost", "pw-w", "queue.localhost", "jobs", handle, name="w1", port=15222,
        allow_plain=True,
    )  # fmt: skip
    assert new.account == old.account == BEE.replace(jid="bee@localhost/w1")
    assert (new.node, new.jid, new.service_jid, new.port, new.allow_plain) == (
        "jobs",
        "bee@localhost/w1",
        "queue.localhost",
        15222,
        True,
    )
    assert old.node == "jobs" and old.handler is handle


def test_an_account_and_the_older_server_keywords_together_are_refused() -> None:
    with pytest.raises(TypeError, match="port: give them in the Account"):
        Worker(BEE, "jobs", handle, port=5222)
    with pytest.raises(TypeError, match="reply_timeout: give them in the Account"):
        Publisher(BEE, reply_timeout=3)
    with pytest.raises(TypeError, match="expected the Account and 2 more"):
        Worker(BEE, "jobs")  # the handler is missing


def test_publisher_takes_an_account_or_the_older_keywords_and_both_agree() -> None:
    new = Publisher(BEE.replace(reply_timeout=3.0), window=8)
    old = Publisher(
        "bee@localhost", "pw-w", "queue.localhost", port=15222, allow_plain=True, reply_timeout=3
    )
    assert new.account == old.account == BEE.replace(reply_timeout=3.0)
    assert (new.jid, new.service_jid, new.port, new.reply_timeout) == (
        "bee@localhost",
        "queue.localhost",
        15222,
        3.0,
    )


def test_the_pipeline_s_publisher_is_an_account_from_the_pipeline_table() -> None:
    settings = PipelineSettings.from_dict(
        {
            "publisher_jid": "loader@example.org",
            "publisher_password": "pw",
            "service_jid": "queue.example.org",
            "xmpp_host": "xmpp.example.org",
            "allow_plain": True,
        }
    )
    config = settings.publisher_config()
    assert config.account == Account(
        jid="loader@example.org",
        password="pw",
        service="queue.example.org",
        host="xmpp.example.org",
        allow_plain=True,
    )
    assert config.where == "queue.example.org via xmpp.example.org:5222"


def _admin_args(*argv: str) -> argparse.Namespace:
    args = build_parser().parse_args([*argv, "list"])
    _normalise(args)
    return args


def test_the_admin_cli_logs_in_with_the_account_of_its_flags() -> None:
    args = _admin_args("--jid", "ops@example.org", "-p", "pw", "--server", "xmpp.example.org")
    assert login_account(args) == Account(
        jid="ops@example.org", password="pw", service="queue.example.org", host="xmpp.example.org"
    )
    dns = login_account(_admin_args("--jid", "ops@example.org", "-p", "pw"))
    assert dns.host is None  # no server given: DNS finds it, as before


def test_the_admin_cli_account_from_a_config_file_and_from_connection_json(tmp_path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[component]\njid = "pubsub.example.org"\n'
        '[admin]\njid = "ops@example.org"\npassword = "pw"\nserver = "127.0.0.1:5299"\n'
        "plain = true\n"
    )
    assert login_account(_admin_args("-c", str(config))) == Account(
        jid="ops@example.org",
        password="pw",
        service="pubsub.example.org",
        host="127.0.0.1",
        port=5299,
        allow_plain=True,
    )
    path = tmp_path / "connection.json"
    path.write_text(json.dumps(DEMO))
    expected = Account.from_connection_file(path, "admin")
    assert login_account(_admin_args("--connection", str(path))) == expected
