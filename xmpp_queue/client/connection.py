"""One c2s connection: slixmpp for login, a fast lane for queue traffic.

slixmpp does what is hard to get right (stream negotiation, SASL, resource
binding, reconnect bookkeeping). Once the session runs, a queue client only
exchanges a handful of stanza kinds at a high rate, so :class:`QueueStream`

- answers its own IQs from a dict of futures keyed by id, looked up on the raw
  ``ElementTree`` element before slixmpp builds a stanza object and walks its
  handler list (that walk costs 100+ microseconds per stanza);
- hands pubsub event messages to one callback the same way;
- coalesces everything written in one event-loop tick into one socket write,
  so a burst of publishes or acks leaves in one TCP segment instead of one
  segment each (which also avoids the delayed-ACK stalls issue 3 measured).

Everything else (stream features, presence, pings, unknown IQs) takes
slixmpp's normal path.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import ssl
from collections.abc import Callable
from typing import Any
from xml.etree import ElementTree as ET

from xmpp_queue.client import wire
from xmpp_queue.client.errors import (
    AuthenticationFailed,
    ClientError,
    ConnectionLost,
    LoginFailed,
)
from xmpp_queue.slixmpp_seam import SeamClient, install_fast_escape, quiet_client_login_noise

log = logging.getLogger("xmpp_queue.client")
# slixmpp logs login failures at ERROR before we explain them in one line of our own.
quiet_client_login_noise()
install_fast_escape()  # jobs and payloads serialised by slixmpp (slixmpp_seam)

# Why a server ends the stream during login, in words a user can act on.
NOT_C2S = "is this the XMPP client (c2s) port? A component port does not take logins"
STREAM_ERROR_HINTS = {
    "host-unknown": NOT_C2S,
    "invalid-namespace": NOT_C2S,
    "undefined-condition": "the server may require TLS: connect without --plain",
    "policy-violation": "the server may require TLS: connect without --plain",
    "see-other-host": "the server redirects elsewhere: use the host it names",
}

EventCallback = Callable[[ET.Element], None]


DIRECT_TLS_PORTS = frozenset({5223})
"""Ports spoken to with TLS from the first byte (XEP-0368); others get STARTTLS."""


def connect_failure(where: str, exc: object) -> ClientError:
    """Why a connect failed: a TLS error is named as one (a plain-text port reached
    with TLS, or the other way round), not taken for a server that is down."""
    if isinstance(exc, ssl.SSLCertVerificationError | ssl.CertificateError):
        return LoginFailed(
            f"{where}: TLS failed ({exc}): the server's certificate is not trusted here "
            "(install its CA certificate, or check the host name)"
        )
    if isinstance(exc, ssl.SSLError):
        return LoginFailed(
            f"{where}: TLS failed ({exc}); is this a plain-text port (allow_plain / --plain "
            "for a private server) or the wrong port for TLS?"
        )
    return ConnectionLost(f"{where}: cannot connect ({exc}); is the XMPP server running?")


class QueueStream(SeamClient):
    """A ClientXMPP with request/response futures and coalesced writes.

    *allow_plain* permits a plain-text connection and PLAIN authentication: for
    a server on the loopback interface (the demo, the tests), never across a
    network.
    """

    def __init__(self, jid: str, password: str, *, allow_plain: bool = False) -> None:
        plugin_config: dict[str, dict[str, Any]] = {}
        if allow_plain:
            plugin_config["feature_mechanisms"] = {"unencrypted_plain": True}
        super().__init__(jid, password, plugin_config=plugin_config)
        if allow_plain:
            self.enable_direct_tls = False
            self.enable_starttls = False
            self.enable_plaintext = True
        self._pending: dict[str, asyncio.Future[ET.Element]] = {}
        self._ids = itertools.count(1)
        self._id_prefix = "q" + secrets.token_hex(3) + "-"
        self._out: list[str] = []
        self._flush_scheduled = False
        self._login_outcome: Callable[[BaseException | None], None] | None = None
        self._auth_condition: str | None = None
        self._stream_error_text = ""
        self.on_pubsub_event: EventCallback | None = None
        self.on_closed: Callable[[], None] | None = None
        self.stream_error: str | None = None  # the condition of the last stream error
        self.add_event_handler("disconnected", self._on_disconnected)
        self.add_event_handler("stream_error", self._on_stream_error)

    # --- login ---------------------------------------------------------------------

    async def open(self, host: str, port: int, login_timeout: float = 30.0) -> None:
        """Connect, authenticate, bind; raise instead of slixmpp's endless retrying.

        Every way a login fails ends in one exception whose message says what to
        change: :class:`AuthenticationFailed` (the account), :class:`LoginFailed`
        (TLS, the port, no answer) or :class:`ConnectionLost` (nothing listens).

        TLS: STARTTLS on the port given, direct TLS (XEP-0368) only on 5223. slixmpp
        would try direct TLS first on any port and report its failure as a failed
        connect, which ended the login before STARTTLS was tried."""
        if not self.enable_plaintext:
            self.enable_direct_tls = port in DIRECT_TLS_PORTS
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[None] = loop.create_future()
        where = f"{host}:{port}"

        def settle(exc: BaseException | None) -> None:
            if not outcome.done():
                if exc is None:
                    outcome.set_result(None)
                else:
                    outcome.set_exception(exc)

        def closed(reason: object) -> None:
            if self.stream_error is not None:
                hint = STREAM_ERROR_HINTS.get(self.stream_error, "")
                text = f": {self._stream_error_text}" if self._stream_error_text else ""
                settle(
                    LoginFailed(
                        f"{where} ended the stream during login "
                        f"({self.stream_error}{text}){'; ' + hint if hint else ''}"
                    )
                )
            elif isinstance(reason, ssl.SSLError | ssl.CertificateError):
                settle(connect_failure(where, reason))
            else:
                settle(ConnectionLost(f"{where}: closed during login ({reason})"))

        handlers: dict[str, Callable[[Any], None]] = {
            "session_start": lambda _: settle(None),
            "failed_auth": self._on_failed_auth,
            "failed_all_auth": lambda _: settle(self._auth_failure()),
            "connection_failed": lambda e: settle(connect_failure(where, e)),
            "ssl_invalid_chain": lambda e: settle(connect_failure(where, e)),
            "disconnected": closed,
        }
        for name, handler in handlers.items():
            self.add_event_handler(name, handler)
        self._login_outcome = settle
        try:
            self.connect(host, port)
            try:
                await asyncio.wait_for(outcome, login_timeout)
            except TimeoutError:
                raise LoginFailed(
                    f"{where}: no login within {login_timeout:.0f} s; is this the XMPP "
                    "client (c2s) port of a server that answers?"
                ) from None
        except BaseException:
            self.cancel_connection_attempt()
            self.abort()
            raise
        finally:
            self._login_outcome = None
            for name, handler in handlers.items():
                self.del_event_handler(name, handler)

    def _on_failed_auth(self, stanza: Any) -> None:
        self._auth_condition = stanza["condition"] or "not-authorized"

    def _auth_failure(self) -> ClientError:
        jid = self.boundjid.bare
        if self._auth_condition is not None:
            return AuthenticationFailed(
                f"{jid}: the server refused the login ({self._auth_condition}): "
                "wrong password, or no such account"
            )
        if self.enable_plaintext and not self.enable_starttls:
            return LoginFailed(
                f"{jid}: no login method the server offers is usable over a plain "
                "connection; the server may require TLS: connect without --plain"
            )
        if not self.enable_plaintext and "starttls" not in self.features:
            return LoginFailed(
                f"{jid}: the server offered no TLS (STARTTLS) on this port and this client "
                "logs in over TLS only: a private server without TLS needs allow_plain (--plain)"
            )
        return LoginFailed(f"{jid}: the server offers no login method this client supports")

    def refuse_features(self, features: Any) -> bool:
        """A server that requires STARTTLS on a connection told to stay plain: the
        login fails now, naming the cause (``slixmpp_seam``)."""
        settle = self._login_outcome
        if (
            settle is not None
            and not self.enable_starttls
            and "starttls" in features["features"]
            and features.xml.find(
                "{urn:ietf:params:xml:ns:xmpp-tls}starttls/{urn:ietf:params:xml:ns:xmpp-tls}required"
            )
            is not None
        ):
            # slixmpp would skip TLS, find no usable mechanism and wait forever.
            settle(
                LoginFailed(
                    f"{self.boundjid.bare}: the server requires TLS (STARTTLS) and this "
                    "connection is plain: connect without --plain / allow_plain"
                )
            )
            return True
        return False

    # --- requests ------------------------------------------------------------------

    def request(
        self, to: str, body: str, iq_type: str = "set"
    ) -> tuple[str, asyncio.Future[ET.Element]]:
        """Send an IQ; the future gets the result element or a :class:`StanzaError`.

        Raises :class:`ConnectionLost` at once when the stream is already closed
        (nothing would ever answer)."""
        if self.transport is None:
            raise ConnectionLost("not connected")
        iq_id = self._id_prefix + str(next(self._ids))
        future: asyncio.Future[ET.Element] = self.loop.create_future()
        self._pending[iq_id] = future
        self.write(wire.iq(iq_type, iq_id, to, body))
        return iq_id, future

    async def call(
        self, to: str, body: str, iq_type: str = "set", reply_timeout: float | None = 30.0
    ) -> ET.Element:
        """:meth:`request` and wait; on timeout the id is forgotten and TimeoutError raised."""
        iq_id, future = self.request(to, body, iq_type)
        try:
            return await asyncio.wait_for(future, reply_timeout)
        except TimeoutError:
            self._pending.pop(iq_id, None)
            raise

    def forget(self, iq_id: str) -> None:
        """Stop waiting for an answer (the caller gave up on it)."""
        self._pending.pop(iq_id, None)

    @property
    def outstanding(self) -> int:
        return len(self._pending)

    # --- writing -------------------------------------------------------------------

    def write(self, data: str) -> None:
        """Queue *data* for the socket; everything queued in this tick goes in one write."""
        self._out.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._out:
            return
        data = "".join(self._out)
        self._out.clear()
        if self.transport is None:
            log.debug("event=write_dropped reason=not_connected bytes=%d", len(data))
            return
        self.transport.write(data.encode())

    def before_raw_write(self) -> None:
        # slixmpp's own writes (stream footer, replies) must not overtake ours.
        if self._out:
            self._flush()

    # --- reading -------------------------------------------------------------------

    def take_raw(self, xml: ET.Element) -> bool:
        """IQ answers to :meth:`request` and pubsub events, straight from the parsed
        element (``slixmpp_seam``: the hook behind ``_spawn_event``)."""
        tag = xml.tag
        if tag == wire.IQ_TAG:
            iq_type = xml.get("type")
            if iq_type == "result" or iq_type == "error":
                future = self._pending.pop(xml.get("id", ""), None)
                if future is not None:
                    if not future.done():
                        if iq_type == "result":
                            future.set_result(xml)
                        else:
                            future.set_exception(wire.parse_error(xml))
                    return True
        elif tag == wire.MESSAGE_TAG and self.on_pubsub_event is not None:
            if xml.find(wire.EVENT_TAG) is not None:
                self.on_pubsub_event(xml)
                return True
        return False

    def _on_stream_error(self, error: Any) -> None:
        self.stream_error = error["condition"] or "undefined-condition"
        self._stream_error_text = error["text"] or ""
        # During login the failure is explained once, by open(); later it is news.
        log.log(
            logging.DEBUG if self._login_outcome is not None else logging.WARNING,
            "event=stream_error jid=%s condition=%s",
            self.boundjid.full,
            self.stream_error,
        )

    def _on_disconnected(self, reason: object) -> None:
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(ConnectionLost(f"stream closed: {reason}"))
        if self.on_closed is not None:
            self.on_closed()

    # --- closing -------------------------------------------------------------------

    async def close(self, wait: float = 2.0) -> None:
        """End the stream politely (the server then sends our unavailable presence)."""
        self._flush()
        if self.transport is not None:
            await self.disconnect(wait)

    def kill(self) -> None:
        """Drop the TCP connection at once, as a crashed process would."""
        self._out.clear()
        self.abort()
