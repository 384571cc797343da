"""``[shards]``: a sharded deployment's config, and what check-config says of it."""

from __future__ import annotations

from typing import Any

import pytest

from xmpp_queue.cli.check_config import summary
from xmpp_queue.config import ConfigError, parse_config

BASE: dict[str, Any] = {"component": {"jid": "queue.example.org", "secret": "s"}}


def config(**shards: Any) -> dict[str, Any]:
    return {**BASE, "shards": shards}


def test_a_sharded_config_names_its_shards_and_the_public_directory() -> None:
    settings = parse_config(
        config(domains=["p0.queue.example.org", "p1.queue.example.org"], per_process=2)
    )
    assert settings.shards is not None
    assert settings.shards.domains == ("p0.queue.example.org", "p1.queue.example.org")
    assert settings.shards.per_process == 2
    assert "p0.queue.example.org, p1.queue.example.org (per process: 2" in summary(settings)
    assert parse_config(BASE).shards is None


@pytest.mark.parametrize(
    ("shards", "key", "problem"),
    [
        ({}, "shards.domains", "missing"),
        ({"domains": []}, "shards.domains", "list of component domains"),
        ({"domains": "p0.queue.example.org"}, "shards.domains", "list of component domains"),
        ({"domains": ["a.example.org", "a.example.org"]}, "shards.domains", "twice"),
        ({"domains": ["queue.example.org"]}, "shards.domains", "public name"),
        ({"domains": ["user@a.example.org"]}, "shards.domains[0]", "domain JID"),
        ({"domains": ["a.example.org"], "per_process": 0}, "shards.per_process", ""),
        ({"domains": ["a.example.org"], "per_shard": 1}, "shards.per_shard", "unknown"),
    ],
)
def test_a_bad_shards_table_is_one_clear_line(
    shards: dict[str, Any], key: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(config(**shards))
    assert refused.value.key == key
    assert problem in refused.value.problem
