"""config.toml's [http] table and [logging] format (issue 12): defaults, loopback only,
the token kept out of reprs, one error naming the key."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from xmpp_queue.config import load_config, parse_config
from xmpp_queue.config_error import ConfigError
from xmpp_queue.logjson import JsonFormatter, fields_of
from xmpp_queue.settings import DEFAULT_HTTP_PORT, HttpSettings

REPO = Path(__file__).resolve().parents[2]
COMPONENT = '[component]\njid = "queue.example.org"\nsecret = "s"\n'


def parse(text: str):  # type: ignore[no-untyped-def]
    import tomllib

    return parse_config(tomllib.loads(COMPONENT + text))


def test_http_is_off_without_the_table_and_loopback_by_default() -> None:
    assert parse("").http is None
    http = parse("[http]\n").http
    assert http == HttpSettings(host="127.0.0.1", port=DEFAULT_HTTP_PORT)


@pytest.mark.parametrize(
    ("listen", "host", "port"),
    [
        ("127.0.0.1:0", "127.0.0.1", 0),
        ("[::1]:9000", "::1", 9000),
        ("localhost:80", "localhost", 80),
    ],
)
def test_loopback_addresses_are_accepted(listen: str, host: str, port: int) -> None:
    http = parse(f'[http]\nlisten = "{listen}"\n').http
    assert http is not None and (http.host, http.port) == (host, port)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('listen = "0.0.0.0:9347"', "loopback"),
        ('listen = "192.168.1.2:9347"', "loopback"),
        ('listen = "example.org:9347"', "loopback"),
        ('listen = "127.0.0.1"', "HOST:PORT"),
        ('listen = "127.0.0.1:99999"', "HOST:PORT"),
        ('admin_token = "short"', "at least 16"),
        ("max_nodes = 0", "1-10000"),
        ("port = 1", "unknown key"),
    ],
)
def test_a_bad_http_value_names_its_key(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(f"[http]\n{text}\n")
    assert caught.value.key.startswith("http.") and expected in str(caught.value)


def test_the_token_is_never_shown() -> None:
    token = "a-very-secret-token-value"
    settings = parse(f'[http]\nadmin_token = "{token}"\n')
    assert settings.http is not None and settings.http.admin_token == token
    assert token not in repr(settings)
    with pytest.raises(ConfigError) as caught:
        parse('[http]\nadmin_token = "short secret"\n')
    assert "short secret" not in str(caught.value)


def test_the_example_file_documents_http_and_json_logs() -> None:
    settings = load_config(REPO / "config.example.toml")
    assert settings.http == HttpSettings()
    assert settings.logging.format == "text"


def test_log_format() -> None:
    assert parse('[logging]\nformat = "JSON"\n').logging.format == "json"
    with pytest.raises(ConfigError, match=r"logging\.format"):
        parse('[logging]\nformat = "xml"\n')


def test_json_lines_carry_the_key_value_pairs() -> None:
    record = logging.LogRecord(
        "xmpp_queue.queue",
        logging.INFO,
        __file__,
        1,
        'event=lock_expired node=%s item=%s error="%s" level=x',
        ("jobs", "42", "a b"),
        None,
    )
    line = JsonFormatter().format(record)
    assert "\n" not in line
    data = json.loads(line)
    assert data["level"] == "INFO" and data["logger"] == "xmpp_queue.queue"
    assert data["event"] == "lock_expired" and data["node"] == "jobs" and data["item"] == "42"
    assert data["error"] == "a b" and data["field_level"] == "x"
    assert fields_of("no pairs here") == {}


def test_json_lines_keep_a_traceback_on_one_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "event=crashed", (), sys.exc_info()
        )
    data = json.loads(JsonFormatter().format(record))
    assert "ValueError: boom" in data["exception"]
