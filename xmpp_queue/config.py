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
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from xmpp_queue.core.limits import Limits
from xmpp_queue.core.model import AccessModel, NodeConfig
from xmpp_queue.core.service_access import (
    ADMINS_ONLY,
    EVERYONE,
    JidSet,
    ServiceAccess,
    parent_domain,
)

DEFAULT_DATABASE_URL = "sqlite:///xmpp-queue.sqlite"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")
DEFAULT_HTTP_PORT = 9347
MIN_TOKEN_LENGTH = 16
_URL_SCHEME = re.compile(r"^(?P<backend>[a-z][a-z0-9]*)(\+[a-z0-9_]+)?://", re.IGNORECASE)
_BACKENDS = ("sqlite", "postgresql", "postgres")

# What the component sends in one stanza (docs/operations.md, "Size and paging limits").
# Prosody closes a component stream that sends a stanza over component_stanza_size_limit
# (default 512 KiB); ejabberd_service's max_stanza_size defaults to infinity. 384 KiB
# leaves room under Prosody's default and holds a default-size item (256 KiB).
DEFAULT_MAX_STANZA_SIZE = 384 * 1024
STANZA_ENVELOPE = 32 * 1024
"""Bytes kept for what surrounds one item in a stanza: JIDs (up to 3 KiB each), node
and item ids (up to 1023 characters each, escaped), SHIM headers."""
DEFAULT_ITEMS_PAGE_SIZE = 100


class ConfigError(ValueError):
    """A bad configuration. ``key`` is the dotted key at fault ("" for the file itself),
    ``source`` the file (set by :func:`load_config`); ``str()`` is "key: problem"."""

    def __init__(self, key: str, problem: str, source: Path | None = None) -> None:
        super().__init__(f"{key}: {problem}" if key else problem)
        self.key = key
        self.problem = problem
        self.source = source

    def one_line(self) -> str:
        """The line the CLI prints: ``FILE: key: problem``."""
        return f"{self.source}: {self}" if self.source is not None else str(self)


# --- the settings ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ComponentSettings:
    """``[component]``: who the component is and where its XMPP server listens.

    ``jid`` is the component's domain (``queue.example.org``) as declared on the
    server; ``secret`` the shared XEP-0114 secret; ``server_host``/``server_port``
    the server's component listener. ``max_stanza_size``: no stanza the component
    sends is larger (bytes); ``items_page_size``: the most items one retrieval answers.
    """

    jid: str
    secret: str
    server_host: str = "127.0.0.1"
    server_port: int = 5347
    max_stanza_size: int = DEFAULT_MAX_STANZA_SIZE
    items_page_size: int = DEFAULT_ITEMS_PAGE_SIZE

    @property
    def max_payload_ceiling(self) -> int:
        """The largest item payload that still fits in one stanza with its envelope."""
        return self.max_stanza_size - STANZA_ENVELOPE


@dataclass(frozen=True, slots=True)
class DatabaseSettings:
    """``[database]``: a SQLAlchemy URL (``sqlite:///path`` or ``postgresql://...``).

    A relative SQLite path is relative to the working directory of the process.
    ``lease_seconds`` (PostgreSQL): the term of the leader lease; a hung active
    process is replaced this long after its last renewal (a dead one at once).
    """

    url: str = DEFAULT_DATABASE_URL
    lease_seconds: int = 5


@dataclass(frozen=True, slots=True)
class AdminSettings:
    """``[admins]``: bare JIDs that own every node and may run the admin commands."""

    jids: frozenset[str] = frozenset()


_CORE = NodeConfig()
_LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """``[queue]``: defaults of new nodes (owners may change them per node).

    The delivery limit and retry delay default to the core's safe values: a
    poison item is dead-lettered after 10 deliveries, offered again after 1 s,
    2 s, 4 s ... (at most ``default_retry_delay_max``), never dropped and never
    spinning; ``default_retry_delay = 0`` is XEP-0254's immediate hand-over.
    """

    default_lock_timeout: int = _CORE.queue_lock_timeout
    default_max_deliveries: int = _CORE.queue_max_deliveries
    default_retry_delay: int = _CORE.queue_retry_delay
    default_retry_delay_max: int = _CORE.queue_retry_delay_max
    max_payload_size: int = _CORE.max_payload_size

    def node_config(self) -> NodeConfig:
        """The configuration a new node starts from (before the creator's form)."""
        return dataclasses.replace(
            NodeConfig(),
            queue_lock_timeout=self.default_lock_timeout,
            queue_max_deliveries=self.default_max_deliveries,
            queue_retry_delay=self.default_retry_delay,
            queue_retry_delay_max=self.default_retry_delay_max,
            max_payload_size=self.max_payload_size,
        )


@dataclass(frozen=True, slots=True)
class AccessSettings:
    """``[access]``: who may use the service, who may create nodes, access models.

    ``users`` and ``create`` hold domains, bare JIDs or ``"*"``; ``create`` may
    also be ``"admins"`` (admins only) or ``"users"`` (everyone in ``users``).
    Left out, both are the component's parent domain (``queue.example.org`` ->
    ``example.org``), filled in by :func:`parse_config`.
    """

    users: tuple[str, ...] = ()
    create: tuple[str, ...] | str = ()
    queue_access_model: AccessModel = AccessModel.WHITELIST
    node_access_model: AccessModel = _CORE.access_model
    expose_publishers: bool = False

    def policy(self) -> ServiceAccess:
        """The core's :class:`ServiceAccess` for these settings."""
        if self.create == "users":
            creators: JidSet | None = None
        elif self.create == ADMINS_ONLY:
            creators = JidSet()
        else:
            creators = JidSet.of(self.create)
        return ServiceAccess(JidSet.of(self.users), creators)


@dataclass(frozen=True, slots=True)
class LimitsSettings:
    """``[limits]``: what one JID may do (0 = no limit); see ``core/limits.py``."""

    max_nodes_per_jid: int = _LIMITS.max_nodes_per_jid
    max_queue_items: int = _LIMITS.max_queue_items
    publish_rate: int = int(_LIMITS.publish_rate)
    publish_burst: int = _LIMITS.publish_burst
    rate_exempt: frozenset[str] = frozenset()

    def limits(self) -> Limits:
        return Limits(
            self.max_nodes_per_jid,
            self.max_queue_items,
            float(self.publish_rate),
            self.publish_burst,
            self.rate_exempt,
        )


@dataclass(frozen=True, slots=True)
class LoggingSettings:
    """``[logging]``: the level, a file to append to (None: standard error), and the
    line format: ``text`` (key=value) or ``json`` (one JSON object per line)."""

    level: str = "INFO"
    file: Path | None = None
    format: str = "text"


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """``[http]``: the operations listener (metrics, health checks, dashboard).

    Off unless the table is present (so a second component on the same machine
    never fights over a port). ``host`` must be a loopback address: the listener
    has no TLS, so remote access goes through a reverse proxy that adds it.
    ``port`` 0 picks a free port (logged as ``event=http_listening``).
    ``admin_token`` unlocks the dashboard's actions (None: read-only for all);
    ``max_nodes`` bounds the per-node label values of the metrics.
    ``allowed_hosts``: names a request's Host header may give besides the listen
    address and the loopback names (a reverse proxy's public name); others get
    421 (``http/guard.py``: DNS rebinding).
    """

    host: str = "127.0.0.1"
    port: int = DEFAULT_HTTP_PORT
    admin_token: str | None = dataclasses.field(default=None, repr=False)
    max_nodes: int = 100
    allowed_hosts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PushSettings:
    """``[push]``: where push subscriptions may send (``push/policy.py`` has the rules).

    ``allowed_hosts``: exact names, ``.suffix`` names or ``"*"``; empty (the
    default) refuses every endpoint. ``allowed_networks``: CIDR blocks whose
    loopback/private addresses are allowed (others are always refused).
    ``allow_http``: plain http besides https. ``request_timeout`` seconds per POST;
    ``max_connections`` bounds the HTTP client over all push subscriptions.
    """

    allowed_hosts: tuple[str, ...] = ()
    allowed_networks: tuple[str, ...] = ()
    allow_http: bool = False
    request_timeout: int = 30
    max_connections: int = 64


@dataclass(frozen=True, slots=True)
class ShardSettings:
    """``[shards]``: the component domains that serve the nodes (docs/scaling.md).

    ``[component] jid`` is then the public name, a directory that redirects to
    the shard of each node. ``domains``: the shards (each declared on the XMPP
    server with the component's secret); ``per_process``: how many shards one
    process serves at most (the others wait as standbys for any shard).
    """

    domains: tuple[str, ...]
    per_process: int = 1


@dataclass(frozen=True, slots=True)
class Settings:
    """The whole file. ``source`` is where it was read from (None when built in code)."""

    component: ComponentSettings
    database: DatabaseSettings = field(default_factory=DatabaseSettings)
    admins: AdminSettings = field(default_factory=AdminSettings)
    queue: QueueSettings = field(default_factory=QueueSettings)
    access: AccessSettings = field(default_factory=AccessSettings)
    limits: LimitsSettings = field(default_factory=LimitsSettings)
    logging: LoggingSettings = field(default_factory=LoggingSettings)
    http: HttpSettings | None = None
    push: PushSettings = field(default_factory=PushSettings)
    shards: ShardSettings | None = None
    pipeline: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    source: Path | None = None


# --- value checks --------------------------------------------------------------------


def _show(value: object) -> str:
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
        raise ConfigError(key, f"expected a string, got {_show(value)}")
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
                key, f"expected an integer {minimum}-{maximum}{suffix}, got {_show(value)}"
            )
        return value

    return check


def _parse_jid(key: str, value: object) -> Any:
    from slixmpp.jid import JID, InvalidJID

    text = _string(key, value)
    try:
        return JID(text.strip())
    except InvalidJID as exc:
        raise ConfigError(key, f"not a valid JID ({exc}), got {_show(value)}") from None


def _component_jid(key: str, value: object) -> str:
    jid = _parse_jid(key, value)
    if jid.user or jid.resource:
        raise ConfigError(
            key, f"expected a domain JID such as queue.example.org, got {_show(value)}"
        )
    return str(jid.domain)


def _shard_domains(key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(key, f"expected a list of component domains, got {_show(value)}")
    domains = tuple(_component_jid(f"{key}[{i}]", v) for i, v in enumerate(value))
    if len(set(domains)) != len(domains):
        raise ConfigError(key, "a domain is listed twice")
    return domains


def _bare_jid(key: str, value: object) -> str:
    jid = _parse_jid(key, value)
    if not jid.user or jid.resource:
        raise ConfigError(key, f"expected a bare JID such as admin@example.org, got {_show(value)}")
    return str(jid.bare)


def _host(key: str, value: object) -> str:
    text = _string(key, value).strip()
    if any(c.isspace() for c in text) or "/" in text:
        raise ConfigError(key, f"expected a host name or IP address, got {_show(value)}")
    return text


def _host_names(key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ConfigError(key, f"expected an array of host names, got {_show(value)}")
    names = tuple(_host(f"{key}[{i}]", v) for i, v in enumerate(value))
    for i, name in enumerate(names):
        if ":" in name.strip("[]") and not name.startswith("[") and name.count(":") == 1:
            raise ConfigError(f"{key}[{i}]", f"expected a name without a port, got {name!r}")
    return names


def _push_hosts(key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ConfigError(key, f"expected an array of host names, got {_show(value)}")
    return tuple(_host(f"{key}[{i}]", v).lower() for i, v in enumerate(value))


def _networks(key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ConfigError(key, f"expected an array of CIDR blocks, got {_show(value)}")
    out = []
    for i, v in enumerate(value):
        text = _string(f"{key}[{i}]", v).strip()
        try:
            out.append(str(ipaddress.ip_network(text, strict=False)))
        except ValueError:
            raise ConfigError(f"{key}[{i}]", f"expected a CIDR block, got {_show(v)}") from None
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
    return text


def _admin_jids(key: str, value: object) -> frozenset[str]:
    if not isinstance(value, list):
        raise ConfigError(key, f"expected an array of bare JIDs, got {_show(value)}")
    return frozenset(_bare_jid(f"{key}[{i}]", jid) for i, jid in enumerate(value))


def _jid_entry(key: str, value: object) -> str:
    """``"*"``, a domain (``example.org``) or a bare JID (``ops@example.org``)."""
    text = _string(key, value).strip()
    if text == EVERYONE:
        return text
    jid = _parse_jid(key, text)
    if jid.resource:
        raise ConfigError(
            key, f'expected a domain, a bare JID or "*", not a full JID, got {_show(value)}'
        )
    return str(jid.bare)


def _jid_entries(key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ConfigError(
            key, f'expected an array of domains, bare JIDs or "*", got {_show(value)}'
        )
    return tuple(_jid_entry(f"{key}[{i}]", v) for i, v in enumerate(value))


def _creators(key: str, value: object) -> tuple[str, ...] | str:
    if isinstance(value, str):
        if value in (ADMINS_ONLY, "users"):
            return value
        raise ConfigError(
            key,
            f'expected "admins", "users" or an array of domains/bare JIDs, got {_show(value)}',
        )
    return _jid_entries(key, value)


def _access_model(key: str, value: object) -> AccessModel:
    text = _string(key, value).strip()
    try:
        return AccessModel(text)
    except ValueError:
        allowed = ", ".join(m.value for m in AccessModel)
        raise ConfigError(key, f"expected one of {allowed}, got {_show(value)}") from None


def _boolean(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(key, f"expected true or false, got {_show(value)}")
    return value


def _log_level(key: str, value: object) -> str:
    text = _string(key, value).strip().upper()
    if text not in LOG_LEVELS:
        raise ConfigError(key, f"expected one of {', '.join(LOG_LEVELS)}, got {_show(value)}")
    return text


def _log_file(key: str, value: object) -> Path:
    return Path(_string(key, value))


def _log_format(key: str, value: object) -> str:
    text = _string(key, value).strip().lower()
    if text not in LOG_FORMATS:
        raise ConfigError(key, f"expected one of {', '.join(LOG_FORMATS)}, got {_show(value)}")
    return text


def _listen(key: str, value: object) -> tuple[str, int]:
    """``"HOST:PORT"`` (``"[::1]:PORT"`` for IPv6) on a loopback address."""
    text = _string(key, value).strip()
    host, sep, port_text = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ConfigError(key, f"expected HOST:PORT such as 127.0.0.1:9347, got {_show(value)}")
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ConfigError(
                key,
                f"expected a loopback address (127.0.0.1, ::1 or localhost), got {_show(value)};"
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

_SCHEMA: dict[str, dict[str, Check]] = {
    "component": {
        "jid": _component_jid,
        "secret": lambda k, v: _string(k, v),
        "server_host": _host,
        "server_port": _integer(1, 65535),
        "max_stanza_size": _integer(64 * 1024, 64 * 1024 * 1024, "bytes"),
        "items_page_size": _integer(1, 10_000, "items"),
    },
    "database": {"url": _database_url, "lease_seconds": _integer(2, 300, "seconds")},
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
_REQUIRED = {"component": ("jid", "secret"), "shards": ("domains",)}
_PASS_THROUGH = ("pipeline", "admin")  # validated by their own modules (admin: the CLI)


def _unknown(key: str, known: list[str], what: str) -> ConfigError:
    close = difflib.get_close_matches(key.rsplit(".", 1)[-1], known, n=1)
    hint = f'did you mean "{close[0]}"? ' if close else ""
    return ConfigError(key, f"unknown {what} ({hint}expected one of: {', '.join(known)})")


def _section(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise ConfigError(name, f"expected a table [{name}], got {_show(table)}")
    schema = _SCHEMA[name]
    values: dict[str, Any] = {}
    for key, raw in table.items():
        if key not in schema:
            raise _unknown(f"{name}.{key}", list(schema), "key")
        values[key] = schema[key](f"{name}.{key}", raw)
    for key in _REQUIRED.get(name, ()):
        if key not in values:
            raise ConfigError(f"{name}.{key}", "missing (required)")
    return values


def parse_config(data: Mapping[str, Any], source: Path | None = None) -> Settings:
    """Validate a parsed TOML document; the first problem found is raised."""
    sections = [*_SCHEMA, *_PASS_THROUGH]
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
        raise ConfigError("pipeline", f"expected a table [pipeline], got {_show(pipeline)}")
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
