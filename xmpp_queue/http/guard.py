"""Which requests the operations listener serves at all: a Host and Origin check.

Why: the listener binds a loopback address, but a browser on the same machine
is a way in. A page from anywhere can make its own host name resolve to
127.0.0.1 (DNS rebinding) and then read ``/api/queues`` (queue names, worker
JIDs) as a same-origin page, or post to the actions. What gives it away is the
Host header: the browser sends the attacker's name. So every request must name
this listener: its configured ``listen`` address, the loopback names
(``localhost``, ``127.0.0.1``, ``::1``), or a name in ``[http] allowed_hosts``
(a reverse proxy that keeps the public name). Anything else is answered 421
(Misdirected Request) before any route runs.

Actions (POST) are also checked for ``Origin``: a browser sends it on every
cross-origin POST, and it must name an allowed host too (a missing Origin is a
non-browser client such as curl, which the token already guards). The token
stays the actions' authentication; these checks keep a foreign page from using
a browser's network position.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def host_name(value: str) -> str:
    """The name of a Host header value or URL authority: no port, no brackets, lower case."""
    text = value.strip().lower()
    if text.startswith("["):
        return text[1:].partition("]")[0]
    if text.count(":") == 1:
        return text.partition(":")[0]
    return text  # a bare name, or an IPv6 address without brackets


class HostGuard:
    """The allowed names and the middleware that enforces them."""

    def __init__(self, listen_host: str, allowed: Iterable[str] = ()) -> None:
        names = {*LOOPBACK_NAMES, listen_host, *allowed}
        self.allowed = frozenset(host_name(n) for n in names if n)

    def host_allowed(self, host: str | None) -> bool:
        return bool(host) and host_name(host or "") in self.allowed

    def origin_allowed(self, origin: str | None) -> bool:
        if origin is None:
            return True  # not a browser (a browser's cross-origin POST always has one)
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and self.host_allowed(parts.netloc)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if not self.host_allowed(request.headers.get("Host")):
            return web.json_response(
                {"error": "host not allowed: see [http] allowed_hosts"}, status=421
            )
        if request.method == "POST" and not self.origin_allowed(request.headers.get("Origin")):
            return web.json_response({"error": "origin not allowed"}, status=403)
        response: web.StreamResponse = await handler(request)
        return response
