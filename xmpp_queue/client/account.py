"""Account: who logs in, where, and which service it talks to, as one frozen value.

Why one value: the login settings (JID, password, service, server host and port,
plain-text login, reply timeout) used to be written out as keyword arguments by
every program that opens a connection (the worker, the publisher, the pipeline's
publisher, the admin CLI, the examples). One object built once, from keywords, a
config section or the demo's ``connection.json``, is passed instead, the way rq
passes one connection object; each program keeps its own options (node, window,
queue_requests ...) beside it.

Three ways to build one::

    Account(jid="bee@example.org", password="...", service="queue.example.org",
            host="xmpp.example.org")
    Account.from_mapping(tomllib.load(f)["account"])          # a config section
    Account.from_connection_file("xmpp-queue-demo/connection.json", "worker")

The password is never shown by ``repr`` (it would end up in logs and tracebacks).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 5222
SECTION_KEYS = (
    "jid",
    "password",
    "password_file",
    "service",
    "server",
    "host",
    "port",
    "plain",
    "allow_plain",
    "reply_timeout",
)
"""The keys :meth:`Account.from_mapping` accepts (``plain`` = ``allow_plain``;
``server`` = ``"HOST[:PORT]"``, the spelling of ``[admin]`` and ``--server``)."""


class AccountError(ValueError):
    """A missing or malformed login setting, named in the message."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Account:
    """An XMPP account and the service it uses.

    *host* is the XMPP server to connect to (None: the JID's domain, or for the
    admin CLI a DNS SRV lookup); *port* its client port (STARTTLS; 5223 is
    direct TLS). *allow_plain* permits a plain-text connection and PLAIN
    authentication, for a private loopback server only. *reply_timeout* bounds
    the login and each request's wait for its answer.
    """

    jid: str
    password: str = field(repr=False)
    service: str
    host: str | None = DEFAULT_HOST
    port: int = DEFAULT_PORT
    allow_plain: bool = False
    reply_timeout: float = 30.0

    def __post_init__(self) -> None:
        for name in ("jid", "password", "service"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise AccountError(f"{name} must be a non-empty string")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or self.port <= 0:
            raise AccountError("port must be a positive integer")
        if self.reply_timeout <= 0:
            raise AccountError("reply_timeout must be a positive number of seconds")

    @property
    def address(self) -> tuple[str, int]:
        """Where to connect: *host* (else the JID's domain) and *port*."""
        return (self.host or self.jid.partition("@")[2].partition("/")[0], self.port)

    def replace(self, **changes: Any) -> Account:
        """A copy with *changes* (``account.replace(jid=f"{account.jid}/w1")``)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_mapping(
        cls, values: Mapping[str, Any], *, where: str = "[account]", **defaults: Any
    ) -> Account:
        """From a config section (a TOML table): the keys of :data:`SECTION_KEYS`.

        *defaults* fill what the section leaves out (``service=`` from
        ``[component] jid``, say); an unknown key or a wrong type is one
        :class:`AccountError` naming it with *where*."""
        unknown = sorted(set(values) - set(SECTION_KEYS))
        if unknown:
            raise AccountError(
                f"{where} {unknown[0]}: unknown key (expected {', '.join(SECTION_KEYS)})"
            )
        settings: dict[str, Any] = dict(defaults)
        for key in ("jid", "password", "service", "host"):
            if key in values:
                settings[key] = _typed(values, key, str, where)
        if "password_file" in values:
            path = Path(_typed(values, "password_file", str, where))
            try:
                settings["password"] = path.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise AccountError(f"{where} password_file: {exc.strerror or exc}") from None
        if "server" in values:
            settings["host"], port = split_server(_typed(values, "server", str, where))
            settings["port"] = port or settings.get("port", DEFAULT_PORT)
        if "port" in values:
            settings["port"] = _typed(values, "port", int, where)
        for key in ("plain", "allow_plain"):
            if key in values:
                settings["allow_plain"] = _typed(values, key, bool, where)
        if "reply_timeout" in values:
            settings["reply_timeout"] = float(_typed(values, "reply_timeout", (int, float), where))
        missing = [k for k in ("jid", "password", "service") if not settings.get(k)]
        if missing:
            raise AccountError(f"{where} needs {', '.join(missing)}")
        try:
            return cls(**settings)
        except AccountError as exc:
            raise AccountError(f"{where} {exc}") from None

    @classmethod
    def from_connection(cls, details: Mapping[str, Any], role: str) -> Account:
        """From the demo's connection details (``connection.json``): the account of
        *role* (``worker``, ``publisher`` or ``admin``). The demo's server listens on
        loopback without TLS, so the account allows a plain login."""
        accounts = details.get("accounts", {})
        if role not in accounts:
            raise AccountError(f"connection details name no {role!r} account")
        return cls(
            jid=accounts[role]["jid"],
            password=accounts[role]["password"],
            service=details["service"],
            host=details.get("host", DEFAULT_HOST),
            port=int(details.get("port", DEFAULT_PORT)),
            allow_plain=True,
        )

    @classmethod
    def from_connection_file(cls, path: str | Path, role: str) -> Account:
        """:meth:`from_connection` on the file the demo writes with ``--serve``."""
        return cls.from_connection(json.loads(Path(path).read_text(encoding="utf-8")), role)


def login_and_rest(
    first: Account | str,
    rest: tuple[Any, ...],
    wanted: int,
    **loose: Any,
) -> tuple[Account, tuple[Any, ...]]:
    """The :class:`Account` and the *wanted* other positional arguments of a
    constructor that takes either an Account first (``Worker(account, node,
    handler)``) or the older separate login (``Worker(jid, password, service,
    node, handler, host=, port=, allow_plain=)``).

    *loose* are the older keywords (None: not given). Mixing the two forms is
    refused: an Account carries its own server settings."""
    given = {key: value for key, value in loose.items() if value is not None}
    if isinstance(first, Account):
        if given:
            raise TypeError(f"{', '.join(sorted(given))}: give them in the Account, not both")
        if len(rest) != wanted:
            raise TypeError(f"expected the Account and {wanted} more positional arguments")
        return first, rest
    if len(rest) != wanted + 2:
        raise TypeError("expected an Account, or jid, password and service first")
    password, service = rest[0], rest[1]
    return Account(jid=first, password=password, service=service, **given), rest[2:]


def split_server(server: str) -> tuple[str, int | None]:
    """``"HOST[:PORT]"`` as (host, port or None)."""
    host, sep, port = server.rpartition(":")
    if sep and host and port.isdigit():
        return host, int(port)
    return server, None


def _typed(values: Mapping[str, Any], key: str, kind: Any, where: str) -> Any:
    value = values[key]
    wrong_bool = isinstance(value, bool) and kind is not bool
    if wrong_bool or not isinstance(value, kind):
        names = {str: "a string", int: "an integer", bool: "true or false"}
        raise AccountError(f"{where} {key} must be {names.get(kind, 'a number')}")
    return value
