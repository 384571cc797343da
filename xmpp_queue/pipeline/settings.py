"""Settings of the Spark pipeline, built from a plain dict (the ``[pipeline]`` table).

Why a dict: the pipeline must not depend on how ``xmpp_queue.config`` models the
whole file; ``cli/extensions.py`` hands over the ``[pipeline]`` table (plus the storage URL)
and this module validates it. Credentials live here and only here: the pipeline
never takes a password on the command line, where ``ps`` and shell history would
keep it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from xmpp_queue.client.account import Account
from xmpp_queue.core.model import NodeConfig
from xmpp_queue.core.subscribe_options import MAX_BATCH_ITEMS

DEFAULT_MAX_PAYLOAD = NodeConfig().max_payload_size
DEFAULT_PUBLISH_BATCH = 16
"""Rows per publish request (XEP-0060 §13.11 batch) in ``pipeline enqueue``."""


class PipelineSettingsError(ValueError):
    """A bad key or value in the ``[pipeline]`` settings, named in the message."""


@dataclass(frozen=True, slots=True)
class PipelineSettings:
    """Everything the pipeline jobs need that is not a per-run option.

    ``database_url`` is the service's SQLAlchemy URL (``[database] url``): the
    report and export read the ledger from it through Spark JDBC. The publisher
    fields are the XMPP account that ``enqueue`` publishes as (a publisher of the
    target nodes) and where to reach the server and the component;
    ``allow_plain`` permits SASL PLAIN without TLS (a private loopback server).
    """

    database_url: str = ""
    master: str = "local[*]"
    jars: tuple[str, ...] = ()
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    publisher_jid: str = ""
    publisher_password: str = ""
    service_jid: str = ""
    xmpp_host: str = "127.0.0.1"
    xmpp_port: int = 5222
    window: int = 32
    publish_batch: int = DEFAULT_PUBLISH_BATCH
    allow_plain: bool = False
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD
    attribute_columns: tuple[str, ...] = ()
    """Input columns ``enqueue`` sends as item attributes (``--attribute-columns``)."""

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> PipelineSettings:
        """Validate *values*; an unknown key or a wrong type is one error naming it."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise PipelineSettingsError(f"[pipeline] unknown key: {', '.join(unknown)}")
        clean: dict[str, Any] = {}
        for key, value in values.items():
            clean[key] = _check(key, value)
        return cls(**clean)

    def publisher_config(self) -> PublisherConfig:
        """The enqueue connection settings, checked to be complete."""
        missing = [
            name
            for name in ("publisher_jid", "publisher_password", "service_jid")
            if not getattr(self, name)
        ]
        if missing:
            raise PipelineSettingsError(
                f"[pipeline] enqueue needs {', '.join(missing)} in the config file"
            )
        return PublisherConfig(self.publisher_account(), self.window, self.publish_batch)

    def publisher_account(self) -> Account:
        """The ``[pipeline]`` publisher keys as the client's :class:`Account`."""
        return Account(
            jid=self.publisher_jid,
            password=self.publisher_password,
            service=self.service_jid,
            host=self.xmpp_host,
            port=self.xmpp_port,
            allow_plain=self.allow_plain,
        )


@dataclass(frozen=True, slots=True)
class PublisherConfig:
    """What one Spark partition needs to open its publisher connection (picklable):
    the account (the client's own login value) and the publishing options."""

    account: Account
    window: int = 32
    batch: int = DEFAULT_PUBLISH_BATCH
    """Rows per publish request; 1 sends one publish per row."""

    @property
    def jid(self) -> str:
        return self.account.jid

    @property
    def where(self) -> str:
        """The service and the server, for messages."""
        host, port = self.account.address
        return f"{self.account.service} via {host}:{port}"


_STR_KEYS = {
    "database_url",
    "master",
    "publisher_jid",
    "publisher_password",
    "service_jid",
    "xmpp_host",
}
_POSITIVE_INT_KEYS = {"xmpp_port", "window", "publish_batch", "max_payload_bytes"}


def _check(key: str, value: Any) -> Any:
    if key in _STR_KEYS:
        if not isinstance(value, str):
            raise PipelineSettingsError(f"[pipeline] {key} must be a string")
        return value
    if key in _POSITIVE_INT_KEYS:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise PipelineSettingsError(f"[pipeline] {key} must be a positive integer")
        if key == "publish_batch" and value > MAX_BATCH_ITEMS:
            raise PipelineSettingsError(
                f"[pipeline] publish_batch must be at most {MAX_BATCH_ITEMS} (the service's limit)"
            )
        return value
    if key == "allow_plain":
        if not isinstance(value, bool):
            raise PipelineSettingsError("[pipeline] allow_plain must be true or false")
        return value
    if key == "attribute_columns":
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
            raise PipelineSettingsError(
                "[pipeline] attribute_columns must be a list of column names"
            )
        return tuple(value)
    if key == "jars":
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise PipelineSettingsError("[pipeline] jars must be a list of paths")
        return tuple(value)
    if key == "spark_conf":
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str | int | float | bool) for k, v in value.items()
        ):
            raise PipelineSettingsError("[pipeline] spark_conf must be a table of key = value")
        return {k: _conf_value(v) for k, v in value.items()}
    raise PipelineSettingsError(f"[pipeline] unknown key: {key}")  # pragma: no cover


def _conf_value(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
