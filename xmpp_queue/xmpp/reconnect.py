"""How the queue component stays connected to its XMPP server, and when it gives up.

Why apart from the component's traffic: the reconnect policy is a state machine
of its own (how each session ended, how long to wait, what to tell the
operator), and the component's requests and notices need none of it.

- ``run()`` connects and keeps the component connected: a dropped connection
  (server restart) is retried at once, then with jittered back-off from 0.25 s
  doubling to 1 s (back within about a second of the server's return), keeping
  every piece of state; a stream taken over by another process (``REPLACED``)
  backs off from 0.5 s doubling to 30 s; a handshake the server refuses (wrong secret,
  unknown component name) is logged once and raised as :class:`HandshakeRejected`,
  without retrying, because retrying cannot fix configuration.
- ``stop()`` closes the stream and makes ``run()`` return.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
from typing import Any

from xmpp_queue.slixmpp_seam import SeamComponent

log = logging.getLogger("xmpp_queue.xmpp.component")

INITIAL_BACKOFF = 0.5  # after another process took our name (REPLACED): doubling ...
MAX_REPLACED_BACKOFF = 30.0  # ... to this
RETRY_FIRST = 0.25  # after a lost or failed connection: at once, then this doubling ...
RETRY_MAX = 1.0  # ... to this, each drawn between half and all of it


def retry_delay(attempt: int) -> float:
    """Seconds before reconnect attempt *attempt* (0: the first, at once). The cap is
    small so the component is back within about a second of the server's return; an
    attempt against a server that is down is one refused TCP connect."""
    if attempt <= 0:
        return 0.0
    return min(RETRY_MAX, RETRY_FIRST * 2.0 ** (attempt - 1)) * random.uniform(0.5, 1.0)


# Stream errors after which reconnecting cannot help (XEP-0114 §3, RFC 6120 §4.9.3).
REJECTING_CONDITIONS = frozenset(
    {"not-authorized", "host-unknown", "invalid-namespace", "improper-addressing"}
)
# What each refusal means for the operator (a wrong port is not a wrong secret).
C2S_PORT = "server_port may be the server's client (c2s) port: use its component port"
REJECTION_HINTS = {
    "not-authorized": "check the component secret in the server config and in [component]",
    "host-unknown": f"the server has no component by this name on this port; {C2S_PORT}",
    "invalid-namespace": C2S_PORT,
    "improper-addressing": "check the component name in the server config",
}
DEFAULT_REJECTION_HINT = "check the component secret and name in the server config"
UNREACHABLE_HINT_AFTER = 5  # failed connects in a row before the hint line (then every 60th)
UNREACHABLE_HINT = (
    "is the XMPP server running, and is [component] server_host:server_port one of its "
    "component ports (Prosody: component_ports, default 5347; ejabberd: a listener with "
    "module ejabberd_service)?"
)


class HandshakeRejected(Exception):
    """The server refused the component (wrong secret or unknown component name)."""


class SessionEnd(enum.Enum):
    STOPPED = "stopped"
    LOST = "lost"  # was connected, connection dropped
    FAILED = "failed"  # could not connect (refused, reset before handshake, conflict)
    REJECTED = "rejected"  # handshake refused
    REPLACED = "replaced"  # was connected; the server took another connection for our name


class ReconnectingComponent(SeamComponent):
    """A component stream that reconnects on its own schedule (see the module docstring).

    The subclass calls :meth:`_watch_session` in its ``__init__`` where the session
    events are to be registered (after its plugins' handlers).
    """

    def __init__(self, jid: str, secret: str, server_host: str, server_port: int) -> None:
        super().__init__(jid, secret, server_host, server_port)
        self._session_end: asyncio.Future[SessionEnd] | None = None
        self._stop_requested: asyncio.Event | None = None
        self._connected = False
        self._stream_error: str | None = None

    def _watch_session(self) -> None:
        """Follow the session's events: started, stream error, failed, disconnected."""
        self.add_event_handler("session_start", self._on_session_start)
        self.add_event_handler("stream_error", self._on_stream_error)
        self.add_event_handler("connection_failed", self._on_connection_failed)
        self.add_event_handler("disconnected", self._on_disconnected)

    async def run(self) -> None:
        """Connect and stay connected until :meth:`stop`; see the module docstring."""
        self._stop_requested = asyncio.Event()
        attempt = 0  # failed connects since the last good session
        replaced_delay = INITIAL_BACKOFF
        while not self._stop_requested.is_set():
            end = await self._connect_once()
            if self._stop_requested.is_set() or end is SessionEnd.STOPPED:
                break
            if end is SessionEnd.REJECTED:
                condition = self._stream_error or "stream closed"
                hint = REJECTION_HINTS.get(condition, DEFAULT_REJECTION_HINT)
                log.error(
                    "event=handshake_rejected jid=%s server=%s:%s condition=%s hint='%s'",
                    self.boundjid.bare,
                    self.server_host,
                    self.server_port,
                    condition,
                    hint,
                )
                raise HandshakeRejected(
                    f"{self.server_host}:{self.server_port} rejected component "
                    f"{self.boundjid.bare} ({condition}); {hint}"
                )
            if end is SessionEnd.REPLACED:
                delay = replaced_delay
                replaced_delay = min(replaced_delay * 2, MAX_REPLACED_BACKOFF)
            else:  # the server went away: be back within about a second of its return
                if end is SessionEnd.LOST:
                    attempt, replaced_delay = 0, INITIAL_BACKOFF
                delay = retry_delay(attempt)
                attempt += 1
                if end is SessionEnd.FAILED and attempt % 60 == UNREACHABLE_HINT_AFTER % 60:
                    log.warning(
                        "event=component_port_unreachable server=%s:%s attempts=%d hint='%s'",
                        self.server_host,
                        self.server_port,
                        attempt,
                        UNREACHABLE_HINT,
                    )
            log.warning(
                "event=reconnect_scheduled jid=%s reason=%s in=%.1fs",
                self.boundjid.bare,
                end.value,
                delay,
            )
            try:
                await asyncio.wait_for(self._stop_requested.wait(), delay)
            except TimeoutError:
                pass
        log.info("event=component_stopped jid=%s", self.boundjid.bare)

    async def _connect_once(self) -> SessionEnd:
        self._session_end = asyncio.get_running_loop().create_future()
        self.handshake_sent = self._connected = False
        self._stream_error = None
        self.connect(self.server_host, self.server_port)
        return await self._session_end

    async def stop(self) -> None:
        """Close the stream, and let :meth:`run` return.

        The service and the timer are not stopped here: whoever built them (``app``)
        stops them."""
        if self._stop_requested is not None:
            self._stop_requested.set()
        self.cancel_connection_attempt()
        if self.transport is not None:
            await self.disconnect(wait=2.0, reason="stopping")
        self._end_session(SessionEnd.STOPPED)

    def _end_session(self, end: SessionEnd) -> None:
        if self._session_end is not None and not self._session_end.done():
            self._session_end.set_result(end)

    async def _on_session_start(self, _: Any) -> None:
        self._connected = True
        log.info(
            "event=connected jid=%s server=%s:%s",
            self.boundjid.bare,
            self.server_host,
            self.server_port,
        )

    def _on_stream_error(self, error: Any) -> None:
        self._stream_error = error["condition"] or "undefined-condition"
        log.warning("event=stream_error condition=%s text=%r", self._stream_error, error["text"])

    def _on_connection_failed(self, reason: Any) -> None:
        # slixmpp would retry on its own schedule; run() owns the back-off.
        self.cancel_connection_attempt()
        log.warning(
            "event=connect_failed server=%s:%s reason=%s",
            self.server_host,
            self.server_port,
            reason,
        )
        self._end_session(SessionEnd.FAILED)

    def _on_disconnected(self, reason: Any) -> None:
        if self._stop_requested is not None and self._stop_requested.is_set():
            end = SessionEnd.STOPPED
        elif self._connected and self._stream_error == "conflict":
            # Another process connected with our name and the server kept it (Prosody's
            # component_conflict_resolve = "kick_old"): with a leader lease that is the
            # new active process. Back off instead of kicking it back at once.
            end = SessionEnd.REPLACED
            log.warning("event=replaced jid=%s reason=conflict", self.boundjid.bare)
        elif self._connected:
            end = SessionEnd.LOST
            log.warning("event=connection_lost jid=%s reason=%s", self.boundjid.bare, reason)
        elif self._stream_error in REJECTING_CONDITIONS or (
            self.handshake_sent and self._stream_error is None
        ):
            end = SessionEnd.REJECTED
        else:
            end = SessionEnd.FAILED
        self._end_session(end)
