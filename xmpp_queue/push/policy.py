"""Where push endpoints may live: the ``[push]`` rules, checked when added and at send time.

A push subscription makes the service send HTTP requests wherever its owner says,
so without rules it is a server-side request forgery tool: an owner could make the
component POST to the database, the metadata service or an admin port on its own
network. The operator's rules (``[push]`` in the config file):

- **Hosts.** The URL's host must be listed in ``allowed_hosts``: exactly
  (``hooks.example.com``) or as a suffix (``.example.com``: any name under it);
  ``*`` allows any host name. An empty list (the default) allows no push at all.
- **Addresses.** Every address the host resolves to must be global (not loopback,
  private, link-local, multicast, reserved or unspecified) unless it lies in one of
  ``allowed_networks`` (``127.0.0.0/8`` for a receiver on the same machine). All
  addresses are checked, not the first: a name with one public and one private
  address is refused.
- **Scheme.** ``https`` (TLS verified by the client); ``http`` only with
  ``allow_http = true``. No user info in the URL (it would be a secret in plain
  sight).

The check runs when a subscription is added (the refusal names the rule) and again
for every connection: :class:`GuardedResolver` is the HTTP client's resolver, so
the addresses actually connected to are the ones checked (DNS can change after the
subscription was added, and a check before connecting would race with it).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from xmpp_queue.core.errors import PubSubError

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class EndpointRefused(PubSubError):
    """The push endpoint breaks a ``[push]`` rule; the text names the rule."""


class RefusedAddress(OSError):
    """Raised inside the HTTP client at connect time: the request fails (a nack)."""


@dataclass(frozen=True, slots=True)
class PushPolicy:
    allowed_hosts: tuple[str, ...] = ()
    allowed_networks: tuple[IPNetwork, ...] = ()
    allow_http: bool = False
    request_timeout: float = 30.0  # seconds; the node's lock timeout also ends a POST
    max_connections: int = 64  # the HTTP client's bound over all push subscriptions

    @classmethod
    def from_settings(cls, push: Any) -> PushPolicy:
        """From config.py's ``PushSettings`` (``[push]``)."""
        return cls(
            allowed_hosts=tuple(push.allowed_hosts),
            allowed_networks=tuple(ipaddress.ip_network(n) for n in push.allowed_networks),
            allow_http=push.allow_http,
            request_timeout=float(push.request_timeout),
            max_connections=push.max_connections,
        )

    def host_allowed(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        for rule in self.allowed_hosts:
            rule = rule.lower().rstrip(".")
            if rule == "*" or host == rule.strip("[]"):
                return True
            if rule.startswith(".") and host.endswith(rule):
                return True
        return False

    def check_url(self, url: str) -> str:
        """The URL's host if scheme, form and host are allowed; else EndpointRefused."""
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises on a bad port
        except ValueError as exc:
            raise EndpointRefused(f"not a usable URL: {exc}") from None
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise EndpointRefused("the endpoint must be an https:// URL with a host")
        if parts.scheme == "http" and not self.allow_http:
            raise EndpointRefused("plain http is refused: use https ([push] allow_http is off)")
        if parts.username or parts.password:
            raise EndpointRefused("no user or password in the URL: use the bearer token")
        host = parts.hostname
        if not self.host_allowed(host):
            raise EndpointRefused(f"host {host!r} is not in [push] allowed_hosts")
        literal = _ip(host)
        if literal is not None:
            self.check_address(host, literal)
        return host

    def check_address(self, host: str, address: IPAddress) -> None:
        if address.is_global and not address.is_multicast:
            return
        if any(address in net for net in self.allowed_networks):
            return
        raise EndpointRefused(
            f"host {host!r} resolves to {address}, a loopback/private/reserved address "
            "not in [push] allowed_networks"
        )

    def check_addresses(self, host: str, addresses: Sequence[str]) -> None:
        if not addresses:
            raise EndpointRefused(f"host {host!r} resolves to no address")
        for text in addresses:
            address = _ip(text)
            if address is None:
                raise EndpointRefused(f"host {host!r} resolves to {text!r}, not an IP address")
            self.check_address(host, address)

    async def check_endpoint(self, url: str) -> None:
        """Every rule, resolving the host now (when a subscription is added)."""
        host = self.check_url(url)
        if _ip(host) is not None:
            return
        port = urlsplit(url).port or 443
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except OSError as exc:
            raise EndpointRefused(
                f"host {host!r} does not resolve: {exc.strerror or exc}"
            ) from None
        self.check_addresses(host, [str(info[4][0]) for info in infos])


def _ip(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


class GuardedResolver(AbstractResolver):
    """The HTTP client's resolver: the system's answers, refused unless the policy
    allows the host and every address (the send-time check; see the module docstring)."""

    def __init__(self, policy: PushPolicy, inner: AbstractResolver | None = None) -> None:
        self._policy = policy
        self._inner = inner if inner is not None else ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        try:
            if not self._policy.host_allowed(host):
                raise EndpointRefused(f"host {host!r} is not in [push] allowed_hosts")
            self._policy.check_addresses(host, [r["host"] for r in results])
        except EndpointRefused as exc:
            raise RefusedAddress(str(exc)) from None
        return results

    async def close(self) -> None:
        await self._inner.close()


def client_session(policy: PushPolicy) -> Any:
    """The one aiohttp session of all push sinks: bounded connections, the guarded
    resolver, TLS verified (aiohttp's default; never turned off here)."""
    import aiohttp

    connector = aiohttp.TCPConnector(
        limit=policy.max_connections, resolver=GuardedResolver(policy), ssl=True
    )
    return aiohttp.ClientSession(connector=connector)
