"""config.toml → typed, validated, frozen settings.

Why so strict: an operator's typo (``sever_port``) that passes silently is
found hours later as "the component never connects". Every unknown section or
key, wrong type, bad JID or out-of-range number is therefore ONE
:class:`ConfigError` whose message starts with the dotted key and says what is
expected, e.g. ``component.server_port: expected an integer 1-65535, got "abc"``.
The CLI prints that one line and exits 2.

Only :func:`load_config` touches the file system; :func:`parse_config` takes
the parsed TOML table, so tests need no files. Nothing here connects anywhere.
The ``[pipeline]`` table is carried through as raw values: the pipeline
validates its own settings (``xmpp_queue.pipeline.settings``).

This module is the loader: the sections, the required keys and the rules that
relate keys of different tables. The values it builds are ``settings.py``'s;
the check of each single key is in ``config_schema.py``.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from xmpp_queue.config_error import ConfigError
from xmpp_queue.config_schema import PASS_THROUGH, REQUIRED, SCHEMA, show
from xmpp_queue.core.service_access import parent_domain
from xmpp_queue.settings import (
    DEFAULT_HTTP_PORT,
    STANZA_ENVELOPE,
    AccessSettings,
    AdminSettings,
    ComponentSettings,
    DatabaseSettings,
    HttpSettings,
    LimitsSettings,
    LoggingSettings,
    PushSettings,
    QueueSettings,
    Settings,
    ShardSettings,
)


def _unknown(key: str, known: list[str], what: str) -> ConfigError:
    close = difflib.get_close_matches(key.rsplit(".", 1)[-1], known, n=1)
    hint = f'did you mean "{close[0]}"? ' if close else ""
    return ConfigError(key, f"unknown {what} ({hint}expected one of: {', '.join(known)})")


def _section(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise ConfigError(name, f"expected a table [{name}], got {show(table)}")
    schema = SCHEMA[name]
    values: dict[str, Any] = {}
    for key, raw in table.items():
        if key not in schema:
            raise _unknown(f"{name}.{key}", list(schema), "key")
        values[key] = schema[key](f"{name}.{key}", raw)
    for key in REQUIRED.get(name, ()):
        if key not in values:
            raise ConfigError(f"{name}.{key}", "missing (required)")
    return values


def parse_config(data: Mapping[str, Any], source: Path | None = None) -> Settings:
    """Validate a parsed TOML document; the first problem found is raised."""
    sections = [*SCHEMA, *PASS_THROUGH]
    for name in data:
        if name not in sections:
            raise _unknown(name, sections, "section")
    if "component" not in data:
        raise ConfigError("component", "missing section [component] (jid and secret)")
    queue = QueueSettings(**_section(data, "queue"))
    if queue.default_retry_delay > queue.default_retry_delay_max > 0:
        raise ConfigError(
            "queue.default_retry_delay",
            f"must not exceed queue.default_retry_delay_max ({queue.default_retry_delay_max})",
        )
    pipeline = data.get("pipeline", {})
    if not isinstance(pipeline, dict):
        raise ConfigError("pipeline", f"expected a table [pipeline], got {show(pipeline)}")
    admins = _section(data, "admins")
    http = None
    if "http" in data:
        values = _section(data, "http")
        host, port = values.pop("listen", ("127.0.0.1", DEFAULT_HTTP_PORT))
        http = HttpSettings(host=host, port=port, **values)
    component = ComponentSettings(**_section(data, "component"))
    if queue.max_payload_size > component.max_payload_ceiling:
        raise ConfigError(
            "queue.max_payload_size",
            f"{queue.max_payload_size} bytes cannot be sent in one stanza: at most "
            f"{component.max_payload_ceiling} with component.max_stanza_size = "
            f"{component.max_stanza_size} ({STANZA_ENVELOPE} bytes are kept for the envelope)",
        )
    shards = ShardSettings(**_section(data, "shards")) if "shards" in data else None
    if shards is not None and component.jid in shards.domains:
        raise ConfigError("shards.domains", "the public name (component.jid) is not a shard")
    access = _section(data, "access")
    home = (parent_domain(component.jid),)
    access.setdefault("users", home)
    access.setdefault("create", home)
    return Settings(
        component=component,
        database=DatabaseSettings(**_section(data, "database")),
        admins=AdminSettings(jids=admins.get("jids", frozenset())),
        queue=queue,
        access=AccessSettings(**access),
        limits=LimitsSettings(**_section(data, "limits")),
        logging=LoggingSettings(**_section(data, "logging")),
        http=http,
        push=PushSettings(**_section(data, "push")),
        shards=shards,
        pipeline=MappingProxyType(dict(pipeline)),
        source=source,
    )


def load_config(path: str | Path) -> Settings:
    """Read and validate *path*. A missing file or bad TOML is a ConfigError too."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            "", "no such file (start from config.example.toml, or pass -c FILE)", path
        ) from None
    except OSError as exc:
        raise ConfigError("", f"cannot read: {exc.strerror}", path) from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError("", "not UTF-8 text", path) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("", f"not valid TOML: {exc}", path) from None
    try:
        return parse_config(data, source=path)
    except ConfigError as exc:
        exc.source = path
        raise
