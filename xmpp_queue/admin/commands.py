"""The admin commands on the component: registration, access, and the session guard.

slixmpp's ``xep_0050`` plugin runs the XEP-0050 protocol but leaves access to the
provider and has a few gaps for a service that must not be steered by strangers.
:class:`AdminCommandSet` closes them in one place, in front of the plugin:

- **Who may see and run.** The command list (disco#items on the commands node) is
  built per requester: admins see every command, others only the commands a
  node's owner may run on their own nodes (``owners_may``: the push commands, and
  seek and snapshots in ``replay_levers.py``), where the core checks ownership.
  disco#info on any other command node answers ``forbidden`` to non-admins
  (XEP-0050 §2.2), and every request of every session is checked, so a non-admin
  gets ``forbidden`` before any step runs and nothing changes.
- **Whose session.** A session belongs to the full JID that started it and to its
  command; another requester, or another command node, gets ``bad-sessionid``.
  An unknown or finished session id gets ``session-expired`` (the plugin would
  silently start a new session instead). An action the current stage does not
  offer gets ``bad-action``; an unknown one ``malformed-action`` (XEP-0050 §4.4).
- **Session lifetime.** Finished sessions are dropped (the plugin keeps those
  completed through ``next``), and sessions idle for ``session_ttl`` seconds
  expire.
- **Default action.** Replies get the ``execute`` attribute on ``<actions/>``
  (§3.4: without it a final stage offering only ``complete`` is invalid).
- **Notifications.** Effects of the service calls a request made are sent after
  its reply, through the outbox (``runtime/outbox.py``).
- **Refusals** of the guard (forbidden, a bad session or action, a stranger's disco)
  go to ``refusals`` as every refused request does: counted by condition, and at
  most one line per JID a minute (the component passes ``xmpp/refusals.py``'s log),
  so a stranger knocking cannot fill the log.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from slixmpp import JID, ComponentXMPP, Iq
from slixmpp.exceptions import XMPPError
from slixmpp.plugins.xep_0030 import DiscoInfo, DiscoItems
from slixmpp.plugins.xep_0050 import Command
from slixmpp.xmlstream import StanzaBase

from xmpp_queue.admin.base import AdminCommand, AdminContext, PayloadReader, RedriveObserver
from xmpp_queue.admin.errors import (
    COMMANDS_NS,
    bad_action,
    bad_sessionid,
    forbidden,
    malformed_action,
    session_expired,
    unavailable,
)
from xmpp_queue.admin.flow import RawSession, as_first_handler, collecting_effects
from xmpp_queue.admin.item_levers import (
    DeleteItem,
    MoveItem,
    PeekItems,
    PublishItem,
    QueueConsumers,
)
from xmpp_queue.admin.member_levers import NodeAffiliations
from xmpp_queue.admin.node_levers import CreateNode, DeleteNode, PurgeQueue
from xmpp_queue.admin.push_levers import PushAdd, PushList, PushRemove
from xmpp_queue.admin.queue_levers import (
    ConfigureQueue,
    KickSubscriber,
    RedriveDeadLetters,
    UnlockItems,
)
from xmpp_queue.admin.replay_levers import (
    DeleteSnapshot,
    ListSnapshots,
    SeekQueue,
    TakeSnapshot,
)
from xmpp_queue.admin.shard_levers import MoveNode
from xmpp_queue.admin.views import QueueDetailsCommand, QueueOverview, ServiceStatusCommand
from xmpp_queue.core.effects import Effect
from xmpp_queue.core.model import Actor
from xmpp_queue.core.service import PubSubService
from xmpp_queue.core.service_access import ServiceAccessDenied

__all__ = ["ADMIN_COMMANDS", "AdminCommandSet", "register_admin_commands"]

log = logging.getLogger("xmpp_queue.admin")

ADMIN_COMMANDS: tuple[type[AdminCommand], ...] = (
    QueueOverview,
    QueueDetailsCommand,
    QueueConsumers,
    PeekItems,
    PublishItem,
    MoveItem,
    DeleteItem,
    NodeAffiliations,
    PurgeQueue,
    UnlockItems,
    RedriveDeadLetters,
    KickSubscriber,
    ConfigureQueue,
    SeekQueue,
    TakeSnapshot,
    ListSnapshots,
    DeleteSnapshot,
    PushList,
    PushAdd,
    PushRemove,
    CreateNode,
    DeleteNode,
    MoveNode,
    ServiceStatusCommand,
)
"""Every admin command, in the order the command list shows them."""

EffectSender = Callable[[Sequence[Effect]], Any]


class RefusalNote(Protocol):
    """Notes one refused request: ``note(sender, line, *args, condition=...)``."""

    def __call__(self, sender: str, line: str, *args: object, condition: str) -> None: ...


def log_each_refusal(sender: str, line: str, *args: object, condition: str) -> None:
    """Without the component's refusal log (tests of this module alone): a line each."""
    log.info(line, *args)


_SEEN = "xq_seen"
_ACTIONS = frozenset(Command.actions)


def register_admin_commands(
    component: ComponentXMPP,
    service: PubSubService,
    admins: frozenset[str],
    database_url: str | None = None,
    *,
    send_effects: EffectSender | None = None,
    session_ttl: float = 900.0,
    on_redrive: RedriveObserver | None = None,
    read_payload: PayloadReader | None = None,
    push: Any = None,
    shards: Any = None,
    refusals: RefusalNote = log_each_refusal,
) -> None:
    """Offer the admin commands on *component* to the bare JIDs in *admins*.

    The component must have the ``xep_0030``, ``xep_0004`` and ``xep_0050`` plugins
    registered. Notifications go through *send_effects* if given (the outbox's
    ``send``), else the component's outbox.
    *database_url* is shown by "Service status" with its password masked.
    *on_redrive* is told (queue node, items moved) after each redrive (metrics).
    *read_payload* checks and canonicalises the payload "Publish an item" is given.
    *push* is the push subscriptions' registry (None: the push commands say so).
    *shards* is a shard's mover (``sharding_moves.py``; None: not sharded, "Move
    node" says so). *refusals* notes what the guard refuses (see the module docstring).
    """
    AdminCommandSet(
        component,
        service,
        admins,
        database_url,
        send_effects=send_effects,
        session_ttl=session_ttl,
        on_redrive=on_redrive,
        read_payload=read_payload,
        push=push,
        shards=shards,
        refusals=refusals,
    ).install()


class AdminCommandSet:
    """The admin commands of one component (see the module docstring)."""

    def __init__(
        self,
        component: ComponentXMPP,
        service: PubSubService,
        admins: Iterable[str],
        database_url: str | None = None,
        *,
        send_effects: EffectSender | None = None,
        session_ttl: float = 900.0,
        monotonic: Callable[[], float] = time.monotonic,
        on_redrive: RedriveObserver | None = None,
        read_payload: PayloadReader | None = None,
        push: Any = None,
        shards: Any = None,
        refusals: RefusalNote = log_each_refusal,
    ) -> None:
        self.component = component
        self._refusals = refusals
        self.service = service
        self.jid = JID(component.boundjid.full)
        self.admins = frozenset(_bare(a) for a in admins)
        self._send_effects: EffectSender = send_effects or _component_sender(component)
        self.session_ttl = session_ttl
        self._monotonic = monotonic
        context = AdminContext(
            service, database_url, on_redrive, read_payload, push, self.admins, shards
        )
        self.commands = {c.node: c(context) for c in ADMIN_COMMANDS}

    @property
    def _adhoc(self) -> Any:
        return self.component.plugin["xep_0050"]

    @property
    def _sessions(self) -> Any:
        return self._adhoc.sessions

    def is_admin(self, jid: JID | str | None) -> bool:
        return jid is not None and JID(jid).bare in self.admins

    def may_run(self, jid: JID | str | None, node: str) -> bool:
        """Admins run every command; anyone admitted runs the owners' ones (their steps
        act as the requester, and the core checks ownership of the node)."""
        return self.is_admin(jid) or (jid is not None and self.commands[node].owners_may)

    # --- wiring ---------------------------------------------------------------------------
    def install(self) -> None:
        adhoc, disco = self._adhoc, self.component.plugin["xep_0030"]
        for cmd in self.commands.values():
            handler = as_first_handler(cmd.start)
            adhoc.add_command(jid=self.jid, node=cmd.node, name=cmd.name, handler=handler)
            disco.set_node_handler("get_info", self.jid, cmd.node, self._command_info)
        disco.set_node_handler("get_items", self.jid, COMMANDS_NS, self._command_items)
        disco.set_node_handler("get_info", self.jid, COMMANDS_NS, self._command_list_info)
        # One guard in front of the plugin's dispatcher (see the module docstring).
        self.component.del_event_handler("command", adhoc._handle_command_all)
        self.component.add_event_handler("command", self._on_command)
        self.component.add_filter("out", _mark_default_action)
        log.info(
            "event=admin_commands_ready commands=%d admins=%d", len(self.commands), len(self.admins)
        )

    # --- disco ----------------------------------------------------------------------------
    def _admit(self, ifrom: JID | None) -> None:
        """These node handlers come before the glue's disco handler, which refuses
        strangers (outside ``[access] users``): refuse them here the same way,
        service-unavailable, so the command list does not answer them either."""
        if ifrom is None or not JID(ifrom).full:
            return  # slixmpp asking itself
        try:
            self.service.admit(Actor(JID(ifrom).full))
        except ServiceAccessDenied:
            refusal = unavailable(f"{JID(ifrom).bare} may not use this service")
            self._refused(JID(ifrom), COMMANDS_NS, refusal)
            raise refusal from None

    def _refused(self, requester: JID, node: str, exc: XMPPError) -> None:
        self._refusals(
            str(requester),
            "event=request_refused verb=command node=%s from=%s condition=%s text=%r",
            node,
            requester,
            exc.extension or exc.condition,
            exc.text,
            condition=exc.condition,
        )

    def _command_items(self, jid: JID, node: str, ifrom: JID, data: Any) -> DiscoItems:
        self._admit(ifrom)
        items = DiscoItems()
        items["node"] = COMMANDS_NS
        for cmd in self.commands.values():
            if self.may_run(ifrom, cmd.node):
                items.add_item(self.jid, node=cmd.node, name=cmd.name)
        return items

    def _command_list_info(self, jid: JID, node: str, ifrom: JID, data: Any) -> DiscoInfo:
        self._admit(ifrom)
        info = DiscoInfo()
        info.add_identity("automation", "command-list", name="Ad-Hoc Commands")
        info.add_feature(COMMANDS_NS)
        return info

    def _command_info(self, jid: JID, node: str, ifrom: JID, data: Any) -> DiscoInfo:
        self._admit(ifrom)
        if not self.may_run(ifrom, node):
            raise forbidden("this command is for the service's admins")
        info = DiscoInfo()
        info.add_identity("automation", "command-node", name=self.commands[node].name)
        info.add_feature(COMMANDS_NS)
        info.add_feature("jabber:x:data")
        return info

    # --- the guard ------------------------------------------------------------------------
    async def _on_command(self, iq: Iq) -> None:
        node = iq["command"]["node"]
        if iq["to"] != self.jid or node not in self.commands:
            await self._adhoc._handle_command_all(iq)
            return
        requester = iq["from"]
        try:
            if not self.may_run(requester, node):
                raise forbidden("this command is for the service's admins")
            self._forget_stale()
            self._check_session(iq, node, requester)
        except XMPPError as exc:
            self._refused(requester, node, exc)
            raise
        with collecting_effects() as effects:
            try:
                await self._adhoc._handle_command_all(iq)
            finally:
                self._stamp_and_forget_finished()
                # Also when a later step failed: what committed is announced.
                if effects:
                    await self._send(tuple(effects))

    async def _send(self, effects: tuple[Effect, ...]) -> None:
        sent = self._send_effects(effects)
        if inspect.isawaitable(sent):
            await sent

    def _check_session(self, iq: Iq, node: str, requester: JID) -> None:
        action = iq["command"]["action"]
        if action not in _ACTIONS:
            raise malformed_action(f"unknown action '{action}'")
        sessionid = iq["command"]["sessionid"]
        if not sessionid:
            if action != "execute":
                raise bad_action(f"a session starts with 'execute', not '{action}'")
            return
        raw: RawSession | None = self._sessions.get(sessionid)
        if raw is None:
            raise session_expired(f"session {sessionid} has ended or expired; start again")
        if raw.get("node") != node or raw.get("from") != requester:
            raise bad_sessionid(f"session {sessionid} belongs to another command or requester")
        if action == "complete" and raw.get("has_next") and not raw.get("allow_complete"):
            raise bad_action("this stage cannot complete; use 'next'")
        if action == "prev" and not raw.get("allow_prev"):
            raise bad_action("this stage has no previous stage")
        raw[_SEEN] = self._monotonic()

    def _ours(self) -> list[tuple[str, RawSession]]:
        return [
            (sid, raw)
            for sid, raw in list(self._sessions.items())
            if raw.get("node") in self.commands
        ]

    def _forget_stale(self) -> None:
        horizon = self._monotonic() - self.session_ttl
        for sid, raw in self._ours():
            if raw.get(_SEEN, horizon) < horizon:
                log.info("event=admin_session_expired command=%s session=%s", raw.get("node"), sid)
                del self._sessions[sid]

    def _stamp_and_forget_finished(self) -> None:
        now = self._monotonic()
        for sid, raw in self._ours():
            if raw.get("next") is None:
                del self._sessions[sid]
            else:
                raw.setdefault(_SEEN, now)


def _component_sender(component: ComponentXMPP) -> EffectSender:
    """The component's outbox, else its own ordered sender: ``send_effects(effects)``,
    or the glue's ``send_outcome(reply, effects)`` with no reply (ours went out)."""
    outbox = getattr(component, "outbox", None)
    if outbox is not None:
        sender: EffectSender = outbox.send
        return sender
    send_effects = getattr(component, "send_effects", None)
    if callable(send_effects):
        sender = send_effects
        return sender
    send_outcome = getattr(component, "send_outcome", None)
    if callable(send_outcome):
        return lambda effects: send_outcome(None, effects)
    raise TypeError("the component can send no notifications; pass send_effects=")


def _bare(jid: str) -> str:
    try:
        return JID(jid).bare
    except Exception as exc:  # slixmpp raises InvalidJID, a ValueError subclass
        raise ValueError(f"admins: '{jid}' is not a valid JID") from exc


def _mark_default_action(stanza: StanzaBase) -> StanzaBase:
    """Name the default action of a stage (XEP-0050 §3.4): next if offered, else complete."""
    # runs on every stanza sent: read the raw attribute, not the stanza interface
    if isinstance(stanza, Iq) and stanza.xml.get("type") == "result":
        actions = stanza.xml.find(f"{{{COMMANDS_NS}}}command/{{{COMMANDS_NS}}}actions")
        if actions is not None and "execute" not in actions.attrib:
            offered = {child.tag.split("}", 1)[1] for child in actions}
            actions.set("execute", "next" if "next" in offered else "complete")
    return stanza
