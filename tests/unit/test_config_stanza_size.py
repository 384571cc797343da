"""[component] max_stanza_size and items_page_size (issue 27): defaults below the
servers' limits, validated, and a default max_payload_size that cannot be sent
in one stanza refused (what check-config prints as one line)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from xmpp_queue.app.core_inputs import service_settings
from xmpp_queue.config import parse_config
from xmpp_queue.config_error import ConfigError
from xmpp_queue.settings import DEFAULT_MAX_STANZA_SIZE, STANZA_ENVELOPE

PROSODY_COMPONENT_DEFAULT = 512 * 1024  # mod_component: component_stanza_size_limit
BASE = '[component]\njid = "queue.example.org"\nsecret = "s"\n'


def load(extra: str = "", queue: str = "") -> object:
    text = BASE + extra + (f"\n[queue]\n{queue}\n" if queue else "")
    return parse_config(tomllib.loads(text))


def test_defaults_are_below_prosodys_and_hold_a_default_item() -> None:
    settings = load()
    c = settings.component  # type: ignore[attr-defined]
    assert c.max_stanza_size == DEFAULT_MAX_STANZA_SIZE < PROSODY_COMPONENT_DEFAULT
    assert c.items_page_size == 100
    assert settings.queue.max_payload_size <= c.max_stanza_size - STANZA_ENVELOPE  # type: ignore[attr-defined]
    core = service_settings(settings)  # type: ignore[arg-type]
    assert core.max_payload_ceiling == c.max_stanza_size - STANZA_ENVELOPE
    assert core.items_page_size == 100


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ("max_stanza_size = 1000\n", "component.max_stanza_size"),
        ('max_stanza_size = "big"\n', "component.max_stanza_size"),
        ("items_page_size = 0\n", "component.items_page_size"),
    ],
)
def test_bad_values_are_named(extra: str, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(extra)
    assert err.value.key == key


def test_a_default_payload_that_cannot_be_sent_in_one_stanza_is_refused() -> None:
    with pytest.raises(ConfigError) as err:
        load("max_stanza_size = 262144\n")  # the default 256 KiB payload + envelope > 256 KiB
    assert err.value.key == "queue.max_payload_size"
    assert str(262144 - STANZA_ENVELOPE) in str(err.value)
    ok = load("max_stanza_size = 262144\n", "max_payload_size = 200000")
    assert ok.component.max_stanza_size == 262144  # type: ignore[attr-defined]


def test_check_config_refuses_it_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(BASE + "max_stanza_size = 131072\n")
    done = subprocess.run(
        [sys.executable, "-m", "xmpp_queue", "check-config", "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "queue.max_payload_size" in done.stderr and "max_stanza_size" in done.stderr
