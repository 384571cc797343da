"""The shipped server examples, as the private test servers read them
(``xmpp_queue/servers/shipped.py``): what the integration tests run is the
examples' own text, so an example that breaks the component breaks the tests."""

from __future__ import annotations

from pathlib import Path

from xmpp_queue.servers import PrivateEjabberd, PrivateProsody
from xmpp_queue.servers.shipped import (
    parse_prosody_example,
    read_ejabberd_listener,
    read_ejabberd_stanza_limit,
    read_prosody_example,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_prosody_example_sets_kick_old_in_its_global_section() -> None:
    example = read_prosody_example(EXAMPLES / "prosody.cfg.lua")
    assert 'component_conflict_resolve = "kick_old"' in example.global_lua
    assert "component_secret" not in example.component_lua


def test_a_setting_written_under_a_virtualhost_reaches_no_component() -> None:
    misplaced = (
        "component_ports = { 5347 }\n"
        'VirtualHost "example.org"\n'
        'component_conflict_resolve = "kick_old"\n'
        'Component "queue.example.org"\n'
        '\tcomponent_secret = "change-me"\n'
        "\tmax_connections = 3\n"
    )
    example = parse_prosody_example(misplaced)
    assert "conflict" not in example.global_lua + example.component_lua
    assert "max_connections = 3" in example.component_lua


def test_the_private_prosody_config_runs_the_example_and_keeps_its_own_ports(
    tmp_path: Path,
) -> None:
    example = read_prosody_example(EXAMPLES / "prosody.cfg.lua")
    server = PrivateProsody({"q.localhost": "s"}, example=example)
    server.workdir, server.c2s_port, server.component_port = tmp_path, 40001, 40002
    text = server.config_text()
    assert text.index(example.global_lua) < text.index("component_ports = { 40002 }")
    assert text.count("component_conflict_resolve =") == 1  # the example's, not ours
    assert text.index("component_conflict_resolve =") < text.index("\nVirtualHost ")


def test_the_private_ejabberd_listener_takes_the_example_options(tmp_path: Path) -> None:
    options = read_ejabberd_listener(EXAMPLES / "ejabberd.yml")
    assert options == {"global_routes": False}
    server = PrivateEjabberd({"q.localhost": "s"}, service_options={"global_routes": True})
    server.workdir = tmp_path
    assert "    global_routes: true\n" in server.config_text()


def test_the_private_ejabberd_component_listener_can_take_the_example_stanza_limit(
    tmp_path: Path,
) -> None:
    """The session ejabberd of the integration tests runs the example's limit on what
    the component sends (tests/integration/test_stanza_size.py meets it)."""
    limit = read_ejabberd_stanza_limit(EXAMPLES / "ejabberd.yml")
    assert limit == 512 * 1024
    server = PrivateEjabberd({"q.localhost": "s"}, component_stanza_limit=limit)
    server.workdir = tmp_path
    listener = server.config_text().split("module: ejabberd_service", 1)[1]
    assert listener.split("\n")[1] == f"    max_stanza_size: {limit}"
