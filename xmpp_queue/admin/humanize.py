"""Times and URLs as an operator reads them in a chat window."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode, urlsplit

from xmpp_queue.core.attributes import RESERVED

_SECRET_PARAMS = frozenset({"password", "passwd", "pwd", "secret", "token"})


def duration(seconds: float) -> str:
    """A compact duration: 45s, 3m 12s, 2h 03m, 1d 04h."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def ago(then: datetime | None, now: datetime) -> str:
    if then is None:
        return "never"
    return f"{duration((now - then).total_seconds())} ago"


def until(deadline: datetime | None, now: datetime) -> str:
    if deadline is None:
        return "no deadline"
    left = (deadline - now).total_seconds()
    if left < 0:
        return f"overdue by {duration(-left)}"
    return f"in {duration(left)}"


def instant(moment: datetime) -> str:
    """XEP-0082 date-time in UTC, to the second."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def redacted_url(url: str) -> str:
    """A database URL with its password (and password-like query values) masked.

    Admins see which database the service uses; the secret stays in config.toml.
    """
    parts = urlsplit(url)
    redacted = url
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        masked_netloc = f"{userinfo.split(':', 1)[0]}:***@{hostport}"
        redacted = redacted.replace(parts.netloc, masked_netloc, 1)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if any(k.lower() in _SECRET_PARAMS for k, _ in pairs):
        masked = [(k, "***" if k.lower() in _SECRET_PARAMS else v) for k, v in pairs]
        redacted = redacted.replace(f"?{parts.query}", f"?{urlencode(masked, safe='*/:')}", 1)
    # Rebuilt by replacement, not urlunsplit: that would turn sqlite:///x.db into
    # sqlite:/x.db for schemes it does not know.
    return redacted


def attributes_text(headers: Mapping[str, str]) -> str:
    """An item's attributes, as its publisher gave them, on one line: ``k=v, k=v``
    (``-`` for none); the service's own headers (``delivery-attempt``...) left out."""
    pairs = [f"{k}={v}" for k, v in headers.items() if k not in RESERVED]
    return ", ".join(pairs) or "-"


def attributes_of(headers: Mapping[str, str]) -> dict[str, str]:
    """An item's attributes as its publisher gave them (the service's own headers,
    ``delivery-attempt``..., left out)."""
    return {k: v for k, v in headers.items() if k not in RESERVED}
