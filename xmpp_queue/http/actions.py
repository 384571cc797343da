"""The dashboard's admin actions: unlock, purge, redrive, affiliation, delete-item and
move-item, behind a token.

Who may act: whoever sends ``Authorization: Bearer <[http] admin_token>``. The
token travels in a header (the page keeps it in the tab's sessionStorage), never
in a URL, so no access log, proxy log or browser history holds it; it is
compared with :func:`hmac.compare_digest` (constant time). No token configured:
the dashboard is read-only for everyone. The check runs before anything is
read or parsed further, so a refused request changes nothing.

What an action does: the same service call, as the system actor, that the
XEP-0050 "Unlock item(s)", "Purge queue" and "Redrive dead letters" commands
make (``force_unlock``, ``purge_node``, ``redrive``), with the same guards in
the service (a node that is no queue, an item that is not locked ...). Their
notifications leave through the component's ordered sender, like the admin
commands' do: a forced unlock tells the holder, and the item goes to the next
worker. ``affiliation`` ({node, jid, affiliation}; ``none`` removes) is the
XEP-0050 "Node affiliations" command's call (``set_node_affiliations``): how an
operator lets a worker account into a whitelisted queue. ``delete-item`` ({node,
item}) is the owner's retract that the "Delete item" command makes (a holder is
told); ``move-item`` ({node, item, target}) is the core's all-or-nothing
``move_item`` of the "Move item" command (a locked item is refused: unlock it
first). Either works on a dead-letter node too. ``push-add`` ({node, url, auth,
secret, max_in_flight}) and ``push-remove`` ({node, id}) are the push-subscription
commands' calls of the push registry (``push_actions.py``); the secret is never
echoed or logged.
"""

from __future__ import annotations

import hmac
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xmpp_queue.core.effects import Effect, Outcome
from xmpp_queue.core.errors import PubSubError
from xmpp_queue.core.model import SYSTEM, Affiliation
from xmpp_queue.core.queue.deadlines import dead_letter_node
from xmpp_queue.core.service import PubSubService
from xmpp_queue.http.push_actions import BadForm, PushManager, add_push, remove_push

log = logging.getLogger("xmpp_queue.http.actions")

EffectSender = Callable[[Sequence[Effect]], Any]
RedriveCounter = Callable[[str, int], None]


class Refused(Exception):
    """Not allowed or not understood; ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def check_token(configured: str | None, header: str | None) -> None:
    """Raise :class:`Refused` unless *header* is ``Bearer <configured>``."""
    if configured is None:
        raise Refused(403, "read-only: no [http] admin_token is configured")
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not given:
        raise Refused(401, "an admin token is required (Authorization: Bearer ...)")
    if not hmac.compare_digest(given.strip().encode(), configured.encode()):
        raise Refused(403, "wrong admin token")


@dataclass(frozen=True, slots=True)
class ActionResult:
    action: str
    node: str
    count: int
    message: str


def _text(body: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        if required:
            raise Refused(400, f"'{key}' is required")
        return None
    if not isinstance(value, str):
        raise Refused(400, f"'{key}' must be a string")
    return value


class DashboardActions:
    def __init__(
        self,
        service: PubSubService,
        send_effects: EffectSender,
        on_redrive: RedriveCounter | None = None,
        pushes: PushManager | None = None,
    ) -> None:
        self._service = service
        self._send_effects = send_effects
        self._on_redrive = on_redrive
        self._pushes = pushes

    async def run(self, action: str, body: dict[str, Any]) -> ActionResult:
        """Do *action* (already authorised); raise Refused or a PubSubError."""
        node = _text(body, "node", required=True)
        assert node is not None
        if action == "unlock":
            result = await self._unlock(node, _text(body, "item"), _text(body, "holder"))
        elif action == "purge":
            if body.get("confirm") is not True:
                raise Refused(400, 'a purge needs "confirm": true')
            removed = await self._apply(self._service.purge_node(SYSTEM, node))
            result = ActionResult(action, node, removed, f"purged {removed} item(s)")
        elif action == "redrive":
            result = await self._redrive(node, body.get("count"))
        elif action == "affiliation":
            result = await self._affiliation(node, body)
        elif action == "delete-item":
            item = _text(body, "item", required=True)
            assert item is not None
            await self._apply(_counted(await self._service.retract(SYSTEM, node, item, True)))
            result = ActionResult(action, node, 1, f"deleted item '{item}'")
        elif action == "move-item":
            result = await self._move(node, body)
        elif action in ("push-add", "push-remove"):
            result = await self._push(action, node, body)
        else:
            raise Refused(404, f"no action '{action}'")
        log.info("event=dashboard_action action=%s node=%s count=%d", action, node, result.count)
        return result

    async def _unlock(self, node: str, item: str | None, holder: str | None) -> ActionResult:
        if (item is None) == (holder is None):
            raise Refused(400, "give exactly one of 'item' and 'holder'")
        released = await self._apply(
            self._service.force_unlock(SYSTEM, node, item_id=item, holder=holder)
        )
        what = f"item '{item}'" if item is not None else f"the items of {holder}"
        if released:
            return ActionResult("unlock", node, released, f"unlocked {what}")
        return ActionResult("unlock", node, 0, f"{what}: nothing was locked")

    async def _redrive(self, node: str, count: object) -> ActionResult:
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
            raise Refused(400, "'count' must be a whole number")
        # The dashboard names the queue; its dead-letter node is where the items are.
        config = await self._service.get_config(SYSTEM, node)
        source = dead_letter_node(node, config) if config.queue else node
        moved = await self._apply(self._service.redrive(SYSTEM, source, count))
        if self._on_redrive is not None:
            self._on_redrive(node, moved)
        return ActionResult("redrive", node, moved, f"moved {moved} item(s) back from {source}")

    async def _affiliation(self, node: str, body: dict[str, Any]) -> ActionResult:
        jid = _text(body, "jid", required=True)
        raw = _text(body, "affiliation", required=True)
        assert jid is not None and raw is not None
        if "@" not in jid or "/" in jid or " " in jid:
            raise Refused(400, "'jid' must be a bare JID (user@domain)")
        try:
            affiliation = Affiliation(raw)
        except ValueError:
            choices = ", ".join(a.value for a in Affiliation)
            raise Refused(400, f"'affiliation' must be one of {choices}") from None
        outcome = await self._service.set_node_affiliations(SYSTEM, node, [(jid, affiliation)])
        await self._apply(_counted(outcome))
        return ActionResult("affiliation", node, 1, f"{jid} is now {affiliation.value}")

    async def _move(self, node: str, body: dict[str, Any]) -> ActionResult:
        item = _text(body, "item", required=True)
        target = _text(body, "target", required=True)
        assert item is not None and target is not None
        moved = await self._service.move_item(SYSTEM, node, item, target)
        await self._apply(_counted(moved))
        return ActionResult("move-item", node, 1, f"moved item '{item}' to {target}")

    async def _push(self, action: str, node: str, body: dict[str, Any]) -> ActionResult:
        if self._pushes is None:
            raise Refused(409, "push subscriptions are not enabled in this service")
        try:
            if action == "push-add":
                _, message = await add_push(self._pushes, node, body)
            else:
                message = await remove_push(self._pushes, node, body)
        except BadForm as exc:
            raise Refused(400, str(exc)) from None
        return ActionResult(action, node, 1, message)

    async def _apply(self, call: Any) -> int:
        outcome: Outcome[int] = await call
        if outcome.effects:
            sent = self._send_effects(outcome.effects)
            if inspect.isawaitable(sent):
                await sent
        return outcome.value


async def _counted(outcome: Outcome[Any]) -> Outcome[int]:
    return Outcome(1, outcome.effects)


__all__ = ["ActionResult", "DashboardActions", "PubSubError", "Refused", "check_token"]
