"""config.toml's schema: one check per key, each turning a TOML value into a typed one.

Why so strict: an operator's typo that passes silently is found hours later.
Every check raises ONE :class:`ConfigError` whose message starts with the dotted
key and says what is expected, e.g. ``component.server_port: expected an integer
1-65535, got "abc"``. The loader (``config.py``) walks :data:`SCHEMA` table by
table; the cross-key rules (retry delays, payload size against stanza size) are
its own.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from xmpp_queue.config_error import ConfigError
from xmpp_queue.core.model import AccessModel
from xmpp_queue.core.service_access import ADMINS_ONLY, EVERYONE
from xmpp_queue.settings import LOG_FORMATS, LOG_LEVELS

MIN_TOKEN_LENGTH = 16
_URL_SCHEME = re.compile(r"^(?P<backend>[a-z][a-z0-9]*)(\+[a-z0-9_]+)?://", re.IGNORECASE)
_BACKENDS = ("sqlite", "postgresql", "postgres")


def show(value: object) -> str:
    """A value as the operator wrote it: strings quoted, other TOML types as TOML."""
    if isinstance(value, str):
        return '"' + value.replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return str(value)


def _string(key: str, value: object, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise ConfigError(key, f"expected a string, got {show(value)}")
    if not empty and not value.strip():
        raise ConfigError(key, "expected a non-empty string")
    return value


def _integer(minimum: int, maximum: int, unit: str = "") -> Callable[[str, object], int]:
    def check(key: str, value: object) -> int:
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not (minimum <= value <= maximum)
        ):
            suffix = f" ({unit})" if unit else ""
            raise ConfigError(
                key, f"expected an integer {minimum}-{maximum}{suffix}, got {show(value)}"
            )
        return value

    return check


def _parse_jid(key: str, value: object) -> Any:
    from slixmpp.jid import JID, InvalidJID

    text = _string(key, value)
    try:
        return JID(text.strip())
    except InvalidJID as exc:
        raise ConfigError(key, f"not a valid JID ({exc}), got {show(value)}") from None


def _component_jid(key: str, value: object) -> str:
    jid = _parse_jid(key, value)
    if jid.user or jid.resource:
        raise ConfigError(
            key, f"expected a domain JID such as queue.example.org, got {show(value)}"
        )
    return str(jid.domain)


def _shard_domains(key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(key, f"expected a list of component domains, got {show(value)}")
    domains = tuple(_component_jid(f"{key}[{i}]", v) for i, v in enumerate(value))
    if len(set(domains)) != len(domains):
        raise ConfigError(key, "a domain is listed twice")
    return domains


def _bare_jid(key: str, value: object) -> str:
    jid = _parse_jid(key, value)
    if not jid.user or jid.resource:
        raise ConfigError(key, f"expected a bare JID such as admin@example.org, got {show(value)}")
    return str(jid.bare)


def _host(key: str, value: object) -> str:
    text = _string(key, value).strip()
    if any(c.isspace() for c in text) or "/" in text:
        raise ConfigError(key, f"expected a host name or IP address, got {show(value)}")
    return text


def _host_names(key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ConfigError(key, f"expected an array of host names, got {show(value)}")
    names = tuple(_host(f"{key}[{i}]", v) for i, v in enumerate(value))
    for i, name in enumerate(names):
        if ":" in name.strip("[]") and not name.startswith("[") and name.count(":") == 1:
            raise ConfigError(f"{key}[{i}]", f"expected a name without a port, got {name!r}")
    return names


def _push_hosts(key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ConfigError(key, f"expected an array of host names, got {show(value)}")
    return tuple(_host(f"{key}[{i}]", v).lower() for i, v in enumerate(value))


def _networks(key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ConfigError(key, f"expected an array of CIDR blocks, got {show(value)}")
    out = []
    for i, v in enumerate(value):
        text = _string(f"{key}[{i}]", v).strip()
        try:
            out.append(str(ipaddress.ip_network(text, strict=False)))
        except ValueError:
            raise ConfigError(f"{key}[{i}]", f"expected a CIDR block, got {show(v)}") from None
    return tuple(out)


def _database_url(key: str, value: object) -> str:
    text = _string(key, value).strip()
    match = _URL_SCHEME.match(text)
    if match is None or match["backend"].lower() not in _BACKENDS:
        # Never echo the URL: it may carry a password.
        shown = f'scheme "{match["backend"]}"' if match else "no scheme://"
        raise ConfigError(
            key, f"expected a sqlite:///PATH or postgresql://USER@HOST/DB URL, got {shown}"
        )
    rest = text[match.end() :]
    if match["backend"].lower() == "sqlite" and not rest.startswith("/"):
        # sqlite://x names a host, which SQLite has not: migrate would fail later.
        raise ConfigError(
            key, "a SQLite URL has three slashes: sqlite:///relative.db or sqlite:////abs/path.db"
        )
    try:
        urlsplit(text).port  # noqa: B018 (raises for a port that is no number up to 65535)
    except ValueError:
        # postgresql://u@h:notaport/db also failed only at migrate, with exit 1
        raise ConfigError(key, "the URL's port is not a number up to 65535") from None
    return text


def _admin_jids(key: str, value: object) -> frozenset[str]:
    if not isinstance(value, list):
        raise ConfigError(key, f"expected an array of bare JIDs, got {show(value)}")
    return frozenset(_bare_jid(f"{key}[{i}]", jid) for i, jid in enumerate(value))


def _jid_entry(key: str, value: object) -> str:
    """``"*"``, a domain (``example.org``) or a bare JID (``ops@example.org``)."""
    text = _string(key, value).strip()
    if text == EVERYONE:
        return text
    jid = _parse_jid(key, text)
    if jid.resource:
        raise ConfigError(
            key, f'expected a domain, a bare JID or "*", not a full JID, got {show(value)}'
        )
    return str(jid.bare)


def _jid_entries(key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ConfigError(key, f'expected an array of domains, bare JIDs or "*", got {show(value)}')
    return tuple(_jid_entry(f"{key}[{i}]", v) for i, v in enumerate(value))


def _creators(key: str, value: object) -> tuple[str, ...] | str:
    if isinstance(value, str):
        if value in (ADMINS_ONLY, "users"):
            return value
        raise ConfigError(
            key,
            f'expected "admins", "users" or an array of domains/bare JIDs, got {show(value)}',
        )
    return _jid_entries(key, value)


def _access_model(key: str, value: object) -> AccessModel:
    text = _string(key, value).strip()
    try:
        return AccessModel(text)
    except ValueError:
        allowed = ", ".join(m.value for m in AccessModel)
        raise ConfigError(key, f"expected one of {allowed}, got {show(value)}") from None


def _boolean(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(key, f"expected true or false, got {show(value)}")
    return value


def _log_level(key: str, value: object) -> str:
    text = _string(key, value).strip().upper()
    if text not in LOG_LEVELS:
        raise ConfigError(key, f"expected one of {', '.join(LOG_LEVELS)}, got {show(value)}")
    return text


def _log_file(key: str, value: object) -> Path:
    return Path(_string(key, value))


def _log_format(key: str, value: object) -> str:
    text = _string(key, value).strip().lower()
    if text not in LOG_FORMATS:
        raise ConfigError(key, f"expected one of {', '.join(LOG_FORMATS)}, got {show(value)}")
    return text


def _listen(key: str, value: object) -> tuple[str, int]:
    """``"HOST:PORT"`` (``"[::1]:PORT"`` for IPv6) on a loopback address."""
    text = _string(key, value).strip()
    host, sep, port_text = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ConfigError(key, f"expected HOST:PORT such as 127.0.0.1:9347, got {show(value)}")
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ConfigError(
                key,
                f"expected a loopback address (127.0.0.1, ::1 or localhost), got {show(value)};"
                " the listener has no TLS: put a reverse proxy in front for remote access",
            )
    return host, int(port_text)


def _token(key: str, value: object) -> str:
    text = _string(key, value)
    if len(text) < MIN_TOKEN_LENGTH or any(c.isspace() for c in text):
        raise ConfigError(
            key, f"expected at least {MIN_TOKEN_LENGTH} characters without spaces (not shown)"
        )
    return text


# --- the schema: one row per key -----------------------------------------------------

Check = Callable[[str, object], Any]
_SECONDS_WEEK = 7 * 86400

SCHEMA: dict[str, dict[str, Check]] = {
    "component": {
        "jid": _component_jid,
        "secret": lambda k, v: _string(k, v),
        "server_host": _host,
        "server_port": _integer(1, 65535),
        "max_stanza_size": _integer(64 * 1024, 64 * 1024 * 1024, "bytes"),
        "items_page_size": _integer(1, 10_000, "items"),
    },
    "database": {
        "url": _database_url,
        "lease_seconds": _integer(2, 300, "seconds"),
        "backlog_memory_mb": _integer(0, 1024 * 1024, "MiB"),
    },
    "admins": {"jids": _admin_jids},
    "queue": {
        "default_lock_timeout": _integer(1, _SECONDS_WEEK, "seconds"),
        "default_max_deliveries": _integer(0, 1_000_000, "0 = no limit"),
        "default_retry_delay": _integer(0, 86400, "seconds"),
        "default_retry_delay_max": _integer(0, _SECONDS_WEEK, "seconds"),
        "max_payload_size": _integer(1, 16 * 1024 * 1024, "bytes"),
    },
    "access": {
        "users": _jid_entries,
        "create": _creators,
        "queue_access_model": _access_model,
        "node_access_model": _access_model,
        "expose_publishers": _boolean,
    },
    "limits": {
        "max_nodes_per_jid": _integer(0, 1_000_000, "0 = no limit"),
        "max_queue_items": _integer(0, 1_000_000_000, "0 = no limit"),
        "publish_rate": _integer(0, 1_000_000, "items/s per JID, 0 = no limit"),
        "publish_burst": _integer(1, 10_000_000, "items"),
        "rate_exempt": _admin_jids,
    },
    "logging": {"level": _log_level, "file": _log_file, "format": _log_format},
    "http": {
        "listen": _listen,
        "admin_token": _token,
        "max_nodes": _integer(1, 10_000),
        "allowed_hosts": _host_names,
    },
    "push": {
        "allowed_hosts": _push_hosts,
        "allowed_networks": _networks,
        "allow_http": _boolean,
        "request_timeout": _integer(1, 3600, "seconds"),
        "max_connections": _integer(1, 10_000),
    },
    "shards": {"domains": _shard_domains, "per_process": _integer(1, 1000, "shards")},
}
REQUIRED = {"component": ("jid", "secret"), "shards": ("domains",)}
PASS_THROUGH = ("pipeline", "admin")  # validated by their own modules (admin: the CLI)
