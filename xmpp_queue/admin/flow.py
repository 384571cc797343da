"""Commands as chains of steps over slixmpp's XEP-0050 session dictionary.

slixmpp drives the protocol: session ids, actions, the reply stanza. What it asks
of a provider is a handler that fills a session dict (``payload``, ``next``,
``has_next``, ``allow_complete``, ``notes`` ...). :class:`CommandSession` is the
small typed face of that dict a step sees: :meth:`~CommandSession.ask` shows a
form and names the next step, :meth:`~CommandSession.finish` completes with a
note, :meth:`~CommandSession.changed` hands a service outcome's notifications to
the outbox. The adapters here turn a step into the handler slixmpp calls and
translate whatever a step raises into a XEP-0050 error.

Notifications are collected per request (a context variable set by the guard in
``commands.py``) and sent after slixmpp has queued the reply: the answer first,
then the effects, as the protocol path does.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from slixmpp import JID
from slixmpp.plugins.xep_0004 import Form

from xmpp_queue.admin.errors import to_xmpp_error
from xmpp_queue.admin.forms import Submitted
from xmpp_queue.core.effects import Effect, Outcome

T = TypeVar("T")
RawSession = dict[str, Any]
SlixHandler = Callable[[Any, RawSession], Awaitable[RawSession]]

log = logging.getLogger("xmpp_queue.admin")

_MEMORY = "xq_memory"
_OUTBOX: ContextVar[list[Effect] | None] = ContextVar("xmpp_queue_admin_outbox", default=None)


@contextmanager
def collecting_effects() -> Iterator[list[Effect]]:
    """Collect the effects of the steps run inside the block, to send them afterwards."""
    box: list[Effect] = []
    token = _OUTBOX.set(box)
    try:
        yield box
    finally:
        _OUTBOX.reset(token)


class CommandSession:
    """One running command session, as a step sees it."""

    __slots__ = ("_raw",)

    def __init__(self, raw: RawSession) -> None:
        self._raw = raw

    @property
    def requester(self) -> JID:
        return JID(self._raw["from"])

    @property
    def command(self) -> str:
        return str(self._raw["node"])

    @property
    def memory(self) -> dict[str, Any]:
        """What earlier steps chose (the node, say), kept for the next ones."""
        memory: dict[str, Any] = self._raw.setdefault(_MEMORY, {})
        return memory

    def ask(
        self,
        form: Form,
        then: Step,
        *,
        final: bool,
        back: Step | None = None,
    ) -> None:
        """Show *form*; its submission goes to *then*.

        ``final`` makes this the last form (actions: complete); otherwise the
        admin can only go on (next). ``back`` allows ``prev`` to that step.
        """
        self._raw.update(
            payload=form,
            next=as_next_handler(then),
            has_next=not final,
            allow_complete=final,
            allow_prev=back is not None,
            prev=as_next_handler(back) if back is not None else None,
            cancel=_cancelled,
            notes=[],
        )

    def finish(self, note: str, *forms: Form, level: str = "info") -> None:
        """Complete the session with a note saying what was done (and result forms)."""
        self._raw.update(
            payload=list(forms) or None,
            next=None,
            has_next=False,
            allow_complete=False,
            allow_prev=False,
            prev=None,
            notes=[(level, note)],
        )
        log.info(
            "event=admin_command command=%s by=%s level=%s note=%r",
            self.command,
            self.requester.bare,
            level,
            note,
        )

    def changed(self, outcome: Outcome[T]) -> T:
        """Take a state-changing service call's value; its notifications go out after
        the reply, exactly as the protocol path sends them."""
        box = _OUTBOX.get()
        if box is None:
            raise RuntimeError("admin command step ran outside collecting_effects()")
        box.extend(outcome.effects)
        return outcome.value


Step = Callable[[CommandSession, Submitted], Awaitable[None]]


async def _cancelled(iq: Any, raw: RawSession) -> None:
    """XEP-0050 §2.4.3: the requester cancelled; say that nothing changed."""
    raw["notes"] = [("info", "Canceled; nothing was changed.")]


async def _run(step: Step, raw: RawSession, form: Submitted) -> RawSession:
    try:
        await step(CommandSession(raw), form)
    except Exception as exc:
        raise to_xmpp_error(exc, str(raw.get("node"))) from exc
    # slixmpp's "complete" path reads the dict it passed in, not the one returned:
    # steps therefore always change it in place.
    return raw


def as_first_handler(step: Step) -> SlixHandler:
    """The handler slixmpp calls with the request that starts a session."""

    async def first(iq: Any, raw: RawSession) -> RawSession:
        return await _run(step, raw, Submitted.from_payload(raw.get("payload")))

    return first


def as_next_handler(step: Step) -> SlixHandler:
    """The handler slixmpp calls with the payload of a later request of the session."""

    async def following(payload: Any, raw: RawSession) -> RawSession:
        return await _run(step, raw, Submitted.from_payload(payload))

    return following
