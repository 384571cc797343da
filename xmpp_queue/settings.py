"""The settings of one component, as typed, frozen values with safe defaults.

Why a module of their own: the composition root, the CLI and the tests build
and read settings without caring how a file becomes them (``config.py``, the
loader, and ``config_schema.py``, the per-key checks). Each dataclass is one
table of config.toml; the constants are the defaults an operator may leave out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from xmpp_queue.core.limits import Limits
from xmpp_queue.core.model import AccessModel, NodeConfig
from xmpp_queue.core.service_access import ADMINS_ONLY, JidSet, ServiceAccess

DEFAULT_DATABASE_URL = "sqlite:///xmpp-queue.sqlite"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")
DEFAULT_HTTP_PORT = 9347

# What the component sends in one stanza (docs/operations.md, "Size and paging limits").
# Prosody closes a component stream that sends a stanza over component_stanza_size_limit
# (default 512 KiB); ejabberd_service's max_stanza_size defaults to infinity. 384 KiB
# leaves room under Prosody's default and holds a default-size item (256 KiB).
DEFAULT_MAX_STANZA_SIZE = 384 * 1024
STANZA_ENVELOPE = 32 * 1024
"""Bytes kept for what surrounds one item in a stanza: JIDs (up to 3 KiB each), node
and item ids (up to 1023 characters each, escaped), SHIM headers."""
DEFAULT_ITEMS_PAGE_SIZE = 100


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
    ``backlog_memory_mb``: memory for waiting items kept whole; beyond it a
    waiting item keeps only its place in line in memory (about 10 bytes) and is
    read back from the database when handed out (``storage/backlog.py``).
    """

    url: str = DEFAULT_DATABASE_URL
    lease_seconds: int = 5
    backlog_memory_mb: int = 128


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
