"""The dashboard's push-subscription actions: ``push-add`` and ``push-remove``.

What they call: the same registry (``push/registry.py``) the XEP-0050 "Add a push
subscription" and "Remove a push subscription" commands call, as the system actor
(an admin), handed in by the composition root. So an endpoint goes through the same
``[push]`` host and address rules (the refusal names the rule), is stored in the
same one commit, routed to its sink in the outbox at once, and its removal returns
the items it holds through the outbox as the command's does. The HTTP listener and
the pusher are sibling layers: this module knows the registry only by
:class:`PushManager`.

The form (JSON): ``{node, url, auth, secret, max_in_flight}`` with ``auth`` one of
``none``, ``bearer`` (``secret`` is the token sent as ``Authorization: Bearer``) or
``hmac`` (``secret`` is the HMAC-SHA256 key of the signature header). Everything is
checked before the registry is called, so a bad form stores nothing. The secret is
never echoed: the answer carries the registry's masked view, and nothing here logs
the body (``actions.py`` logs the action, the node and a count).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from xmpp_queue.core.model import SYSTEM, Actor

AUTH_CHOICES = ("none", "bearer", "hmac")
MAX_IN_FLIGHT = 1000  # the registry's own bound; checked here too for a clear message
MAX_URL = 2048
MAX_SECRET = 1024


class PushManager(Protocol):
    """What the dashboard needs of ``push/registry.py``'s ``PushSubscriptions``."""

    async def add(
        self,
        actor: Actor,
        node: str,
        url: str,
        *,
        bearer: str | None = None,
        secret: str | None = None,
        max_in_flight: int = 8,
    ) -> Any: ...

    async def remove(self, actor: Actor, node: str, push_id: str) -> Any: ...

    async def list(self, actor: Actor, node: str) -> Sequence[Any]: ...


class BadForm(ValueError):
    """The form is incomplete or wrong; the text says which field and why."""


def _field(body: dict[str, Any], key: str, label: str, most: int) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadForm(f"{label} must be text")
    value = value.strip()
    if len(value) > most:
        raise BadForm(f"{label} is longer than {most} characters")
    return value or None


def _count(value: object) -> int:
    if value is None or value == "":
        return 8
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadForm("max in flight must be a whole number")
    if not 1 <= value <= MAX_IN_FLIGHT:
        raise BadForm(f"max in flight must be 1 to {MAX_IN_FLIGHT}")
    return value


async def add_push(pushes: PushManager, node: str, body: dict[str, Any]) -> tuple[str, str]:
    """Check the form, then add; returns (push id, a message without secrets)."""
    url = _field(body, "url", "the endpoint URL", MAX_URL)
    if url is None:
        raise BadForm("the endpoint URL is required")
    auth = body.get("auth", "none") or "none"
    if auth not in AUTH_CHOICES:
        raise BadForm(f"auth must be one of {', '.join(AUTH_CHOICES)}")
    secret = _field(body, "secret", "the secret", MAX_SECRET)
    if auth != "none" and secret is None:
        what = "bearer token" if auth == "bearer" else "HMAC secret"
        raise BadForm(f"auth {auth} needs a {what}")
    if auth == "none" and secret is not None:
        raise BadForm("a secret was given with auth none: choose bearer or hmac")
    most = _count(body.get("max_in_flight"))
    push = await pushes.add(
        SYSTEM,
        node,
        url,
        bearer=secret if auth == "bearer" else None,
        secret=secret if auth == "hmac" else None,
        max_in_flight=most,
    )
    view = push.view()
    return str(push.push_id), f"added push subscription {push.push_id} to {view['url']}"


async def remove_push(pushes: PushManager, node: str, body: dict[str, Any]) -> str:
    """Remove push subscription ``id`` of *node*; the items it holds go back at once."""
    push_id = _field(body, "id", "the push subscription id", 64)
    if push_id is None:
        raise BadForm("the push subscription id is required")
    await pushes.remove(SYSTEM, node, push_id)
    return f"removed push subscription {push_id}"
