"""docs/scaling.md's deployment from scratch: its files say the same thing.

The config block is parsed by the real config reader; the Prosody and ejabberd
blocks must declare the public name and every shard of ``[shards]`` with the
config's secret, and keep the settings the shipped examples have (which the
integration tests run: ``kick_old`` in Prosody's global section, ejabberd's
listener options). The integration tests' servers declare their shards the same
way (``tests/kit/integration.py``).
"""

from __future__ import annotations

import re
import tomllib

import yaml

from tests.kit.integration import EJABBERD_EXAMPLE, PROSODY_EXAMPLE, REPO_ROOT
from xmpp_queue.config import parse_config
from xmpp_queue.servers.shipped import (
    parse_ejabberd_listener,
    parse_prosody_example,
    read_ejabberd_listener,
    read_prosody_example,
)

DOC = REPO_ROOT / "docs" / "scaling.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), re.DOTALL)


def test_the_config_block_is_a_valid_sharded_config() -> None:
    (text,) = blocks("toml")
    settings = parse_config(tomllib.loads(text))
    assert settings.shards is not None and len(settings.shards.domains) == 3
    assert settings.component.jid not in settings.shards.domains


def test_the_server_blocks_declare_every_name_with_the_configs_secret() -> None:
    settings = parse_config(tomllib.loads(blocks("toml")[0]))
    assert settings.shards is not None
    names = {settings.component.jid, *settings.shards.domains}
    secret = settings.component.secret

    (lua,) = blocks("lua")
    declared = dict(re.findall(r'Component "([^"]+)"\n\s*component_secret = "([^"]+)"', lua))
    assert declared == dict.fromkeys(names, secret)
    shipped = read_prosody_example(PROSODY_EXAMPLE).global_lua
    assert 'component_conflict_resolve = "kick_old"' in parse_prosody_example(lua).global_lua
    assert 'component_conflict_resolve = "kick_old"' in shipped

    (yml,) = blocks("yaml")
    listener = yaml.safe_load(yml)["listen"][0]
    assert listener["hosts"] == {n: {"password": secret} for n in names}
    options = parse_ejabberd_listener(yml)
    assert {k: v for k, v in options.items() if k != "hosts"} == {
        k: v for k, v in read_ejabberd_listener(EJABBERD_EXAMPLE).items() if k != "hosts"
    }


def test_the_units_it_starts_ship_and_run_its_config() -> None:
    """Step 3 starts ``xmpp-queue@N``: the template ships, and runs the one config that
    step 2 writes (every process the same file) without a probe that needs ``[http]``."""
    config = re.search(
        r"^\*\*2\. One config\*\* for every process \(`([^`]+)`\)", DOC.read_text(), re.M
    )
    assert config is not None
    (script,) = [b for b in blocks("sh") if "systemctl enable" in b]
    assert "xmpp-queue@$n.service" in script and f"migrate -c {config.group(1)}" in script
    unit = (REPO_ROOT / "packaging" / "systemd" / "xmpp-queue@.service").read_text()
    execs = [line for line in unit.splitlines() if line.startswith("Exec")]
    assert execs == [f"ExecStart=/opt/xmpp-queue/venv/bin/xmpp-queue run -c {config.group(1)}"]
