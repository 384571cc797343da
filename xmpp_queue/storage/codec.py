"""The JSON columns to domain values and back, for the SQL backend.

Kept apart from the statements so each reads on its own. JSON columns hold
small open-ended maps (node config, subscribe options, item headers); their
formats are the storage layer's, and decoding is lenient about what a newer or
older version may have written: unknown config keys are ignored and missing
ones take the NodeConfig default, so adding a config field needs no migration.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import typing
from collections.abc import Mapping
from typing import Any

from xmpp_queue.core.json_text import ascii_map
from xmpp_queue.core.model import NodeConfig

_CONFIG_TYPES: dict[str, Any] = typing.get_type_hints(NodeConfig)


def encode_config(config: NodeConfig) -> str:
    # StrEnum members are str, so json writes their values.
    return json.dumps(dataclasses.asdict(config), sort_keys=True, separators=(",", ":"))


def decode_config(text: str) -> NodeConfig:
    raw = json.loads(text)
    values: dict[str, Any] = {}
    for key, value in raw.items():
        kind = _CONFIG_TYPES.get(key)
        if kind is None:
            continue  # a field this version does not know
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            value = kind(value)
        values[key] = value
    return NodeConfig(**values)


def encode_options(options: Mapping[str, tuple[str, ...]]) -> str | None:
    if not options:
        return None
    return json.dumps({k: list(v) for k, v in options.items()}, separators=(",", ":"))


def decode_options(text: str | None) -> dict[str, tuple[str, ...]]:
    if not text:
        return {}
    return {k: tuple(v) for k, v in json.loads(text).items()}


def encode_headers(headers: Mapping[str, str]) -> str | None:
    """None for no headers: almost every item has none, so store nothing. The text
    is ``json.dumps``'s, written without building an encoder per item (``ascii_map``)."""
    if not headers:
        return None
    return ascii_map(headers)


def decode_headers(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    decoded: dict[str, str] = json.loads(text)
    return decoded
