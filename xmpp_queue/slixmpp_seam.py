"""Every place xmpp-queue reaches into slixmpp beyond its documented API, in one module.

Why one module: the component and the client library each replace a few of
slixmpp's methods for speed or for a clear error, and a minor slixmpp release may
rename or reshape any of them. Here they are listed once (:data:`OVERRIDES`,
:data:`RELIED_ON`), ``setup.cfg`` pins the slixmpp range they were written
against, and ``tests/unit/test_slixmpp_seam.py`` compares the installed slixmpp
with the record, naming the method or attribute that changed. The rest of the
package subclasses :class:`SeamComponent` / :class:`SeamClient` and fills in
hooks with our own names (``take_raw``, ``may_write``...); it overrides no
slixmpp method itself (the same test checks that too). The core never imports
this module (import-linter).

What remains overridden, and why no public API serves (slixmpp 1.17):

- ``_spawn_event`` (both sides): the one place a parsed top-level element passes
  before slixmpp builds a stanza object and matches it against every handler. The
  per-item traffic (pubsub IQs to the component; IQ results and pubsub events to
  the client) is taken here as a raw element (:meth:`take_raw`), which was the
  largest CPU cost per item. ``incoming_filter`` is public but cannot drop an
  element.
- ``_handle_stream_features`` (client): a server that requires STARTTLS on a
  connection told to stay plain would otherwise leave slixmpp waiting forever; a
  second features handler cannot stop slixmpp's own from running first.
- ``connection_made`` (component): swaps the transport for one that coalesces the
  writes of a loop tick (``xmpp/transport.py``); slixmpp has no transport factory.
- ``start_stream_handler`` (component): notes that the handshake went out, to
  tell a refused handshake from a refused connection.
- ``send_raw`` (both): the component's last size guard (:meth:`may_write`); the
  client writes its own buffered traffic first, so slixmpp's writes never
  overtake it (:meth:`before_raw_write`).
- Called, not replaced: ``_build_stanza`` (:meth:`stanza_of`), the stanza object
  slixmpp would build, for the raw IQs the component answers.
- Read, not replaced: ``_session_started`` and ``waiting_queue``, to write a
  stanza at once when slixmpp's send queue is empty (:meth:`send_queue_idle`),
  which keeps order without the queue's task hand-over per stanza.
- Log lines: slixmpp's stanza logger and two of its messages, by name
  (:func:`install_log_filters`).
- A module function replaced: ``escape`` of ``slixmpp.xmlstream.tostring``
  (:func:`install_fast_escape`), which every serialisation of an element calls for
  each text and attribute value. slixmpp's builds the result one character at a time
  (about 300 µs for a 10 KB payload, which the component serialises once per
  publish to canonicalise it); ours gives the same text with ``str.replace``, six
  times faster. No hook serves: ``tostring`` looks the name up in its module.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re
from collections.abc import Callable
from typing import Any
from xml.etree import ElementTree as ET

from slixmpp import ClientXMPP, ComponentXMPP
from slixmpp.xmlstream import StanzaBase, XMLStream

# The range the overrides below were checked against (setup.cfg pins the same).
SLIXMPP_TESTED = ">=1.17,<1.18"

# Method → its parameters in the slixmpp release this module was written against
# (names, kinds and defaults; annotations left out). tests/unit/test_slixmpp_seam.py
# compares them with the installed slixmpp.
OVERRIDES: dict[tuple[type[Any], str], str] = {
    (ComponentXMPP, "_spawn_event"): "(self, xml)",
    (ComponentXMPP, "connection_made"): "(self, transport, send_event=True)",
    (ComponentXMPP, "start_stream_handler"): "(self, xml)",
    (ComponentXMPP, "send_raw"): "(self, data)",
    (ClientXMPP, "_spawn_event"): "(self, xml)",
    (ClientXMPP, "_handle_stream_features"): "(self, features)",
    (ClientXMPP, "send_raw"): "(self, data)",
}

# Private slixmpp methods called (not overridden), with their parameters likewise.
CALLED: dict[tuple[type[Any], str], str] = {
    (ComponentXMPP, "_build_stanza"): "(self, xml, default_ns=None)",
}

# What the overrides rely on besides their own signature: (class, method, text its
# source must contain). An override that slixmpp stopped calling would fail silently.
RELIED_ON: tuple[tuple[type[Any], str, str], ...] = (
    (XMLStream, "__init__", "self.waiting_queue = asyncio.Queue()"),
    (XMLStream, "send", "self._session_started"),  # send() holds stanzas until the session
    (XMLStream, "send", "self.waiting_queue.put_nowait"),  # ... then puts them on this queue
    (XMLStream, "run_filters", "self.waiting_queue.get()"),  # which this task drains
    (XMLStream, "_set_session_start", "self._session_started = True"),
    (XMLStream, "data_received", "self._spawn_event(xml)"),  # each top-level element
    (XMLStream, "_spawn_event", "self.incoming_filter(xml)"),
    (XMLStream, "connection_made", "self.transport ="),
    (ClientXMPP, "__init__", "self._handle_stream_features"),  # the features handler
)

# Module functions replaced: (module, name) → parameters, as OVERRIDES above.
TOSTRING_MODULE = "slixmpp.xmlstream.tostring"
REPLACED: dict[tuple[str, str], str] = {(TOSTRING_MODULE, "escape"): "(text, use_cdata=False)"}

STANZA_LOGGER = "slixmpp.xmlstream.xmlstream"  # "SEND: ..." / "RECV: ..." at DEBUG
MECHANISMS_LOGGER = "slixmpp.features.feature_mechanisms.mechanisms"


def parameters(function: Callable[..., Any]) -> str:
    """*function*'s parameters as ``(a, b=1, *, c)``: what a caller and an override
    must agree on (annotations change without breaking either)."""
    found = inspect.signature(function).parameters.values()
    return str(inspect.Signature([p.replace(annotation=inspect.Parameter.empty) for p in found]))


class SeamComponent(ComponentXMPP):
    """``ComponentXMPP`` with the hooks the queue component fills in."""

    # A class wrapping the transport slixmpp got from asyncio, called with
    # (transport, loop); None keeps the transport as it is.
    transport_wrapper: type[Any] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        self.handshake_sent = False  # since the current connection was made

    def take_raw(self, xml: ET.Element) -> bool:
        """Handle *xml* (already through ``incoming_filter``) without slixmpp's
        stanza objects and handler walk; False leaves it to slixmpp."""
        return False

    def may_write(self, data: str | bytes) -> bool:
        """The last check before *data* reaches the socket in a running session."""
        return True

    def send_queue_idle(self) -> bool:
        """True when a write now keeps the order of everything sent before: the
        session runs, a transport is there, and slixmpp's send queue is empty."""
        return self._session_started and self.transport is not None and self.waiting_queue.empty()

    def stanza_of(self, xml: ET.Element) -> StanzaBase:
        """The stanza object slixmpp itself would build for *xml* (the registered
        root class, e.g. the component's own ``Iq``, with the stream's language)."""
        return self._build_stanza(xml)

    # --- the overrides -------------------------------------------------------------

    def _spawn_event(self, xml: ET.Element) -> None:
        xml = self.incoming_filter(xml)  # type: ignore[no-untyped-call]
        if not self.take_raw(xml):
            super()._spawn_event(xml)

    def connection_made(self, transport: Any, send_event: bool = True) -> None:
        self.handshake_sent = False
        super().connection_made(transport, send_event)
        wrap = type(self).transport_wrapper
        if wrap is not None and self.transport is not None:
            if not isinstance(self.transport, wrap):
                self.transport = wrap(self.transport, self.loop)

    def start_stream_handler(self, xml: Any) -> None:
        super().start_stream_handler(xml)  # type: ignore[no-untyped-call]
        self.handshake_sent = True

    def send_raw(self, data: str | bytes) -> None:
        if self._session_started and not self.may_write(data):
            return
        super().send_raw(data)


class SeamClient(ClientXMPP):
    """``ClientXMPP`` with the hooks the queue client fills in."""

    def take_raw(self, xml: ET.Element) -> bool:
        """Handle *xml* without slixmpp's stanza objects; False leaves it to slixmpp."""
        return False

    def refuse_features(self, features: Any) -> bool:
        """Stop stream negotiation at *features* (True: slixmpp does not see them)."""
        return False

    def before_raw_write(self) -> None:
        """Called before slixmpp writes anything of its own."""

    # --- the overrides -------------------------------------------------------------

    def _spawn_event(self, xml: ET.Element) -> None:
        # ClientXMPP's incoming_filter is the identity: the raw lane skips it.
        if not self.take_raw(xml):
            super()._spawn_event(xml)

    async def _handle_stream_features(self, features: Any) -> bool | None:
        if self.refuse_features(features):
            return True
        return await super()._handle_stream_features(features)

    def send_raw(self, data: str | bytes) -> None:
        self.before_raw_write()
        super().send_raw(data)


# --- log lines ------------------------------------------------------------------------
#
# XEP-0114's handshake is SHA-1(stream id + shared secret), and the stream id is in
# the server's stream header. slixmpp logs every stanza it sends and receives at
# DEBUG, so a DEBUG log held both halves: enough for an offline guess of a weak
# secret by anyone who reads the log. The redaction replaces the digest in
# ``<handshake>`` with ``[redacted]`` and keeps the rest of the line.

_DIGEST = re.compile(r"(<handshake\b[^>]*>)([^<]+)(</handshake>)")
REDACTED = "[redacted]"
# slixmpp's own lines that a queue client explains better in one line of its own
_CLIENT_NOISE = (
    (MECHANISMS_LOGGER, "No appropriate login method"),
    (STANZA_LOGGER, "Legacy XMPP 0.9"),
)


def redact(text: str) -> str:
    return _DIGEST.sub(rf"\g<1>{REDACTED}\g<3>", text)


class HandshakeRedaction(logging.Filter):
    """Rewrites a record whose message or arguments hold a handshake digest."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and "handshake" in record.msg:
            record.msg = redact(record.msg)
        args = record.args
        if isinstance(args, tuple) and any(_holds_handshake(a) for a in args):
            record.args = tuple(_redacted_arg(a) for a in args)
        return True


class _Drop(logging.Filter):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage()


def _holds_handshake(value: object) -> bool:
    """Whether *value*, as the record would print it, holds a handshake. Not only
    strings: slixmpp also logs stanza objects and tuples of them (``Discarded
    stanza: %s`` with a queued handshake when a connection drops)."""
    if isinstance(value, bytes):
        return b"handshake" in value
    if isinstance(value, int | float | type(None)):
        return False
    return "handshake" in (value if isinstance(value, str) else str(value))


def _redacted_arg(value: object) -> object:
    if isinstance(value, bytes):
        return redact(value.decode("utf-8", "replace"))
    if _holds_handshake(value):
        return redact(value if isinstance(value, str) else str(value))
    return value


def install_handshake_redaction() -> None:
    """No handshake digest in slixmpp's stanza log, whatever the level (idempotent)."""
    logger = logging.getLogger(STANZA_LOGGER)
    if not any(isinstance(f, HandshakeRedaction) for f in logger.filters):
        logger.addFilter(HandshakeRedaction())


def quiet_client_login_noise() -> None:
    """Drop slixmpp's lines that the client explains itself (idempotent)."""
    for name, text in _CLIENT_NOISE:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _Drop) and f.text == text for f in logger.filters):
            logger.addFilter(_Drop(text))


# --- escaping ---------------------------------------------------------------------------

_TOSTRING = importlib.import_module(TOSTRING_MODULE)  # the package's name is the function's
SLIXMPP_ESCAPE: Callable[[str, bool], str] = _TOSTRING.escape
# slixmpp's table, in an order that escapes each character once (``&`` first).
_ENTITIES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("'", "&apos;"), ('"', "&quot;"))


def escape(text: str, use_cdata: bool = False) -> str:
    """What slixmpp's ``escape`` returns, by whole-string replaces instead of a
    character at a time (CDATA sections, which nothing of ours asks for, are left to
    slixmpp's own)."""
    if use_cdata:
        return SLIXMPP_ESCAPE(text, use_cdata)
    for char, entity in _ENTITIES:
        if char in text:
            text = text.replace(char, entity)
    return text


def install_fast_escape() -> None:
    """slixmpp's serialiser escapes with :func:`escape` from now on (idempotent)."""
    setattr(_TOSTRING, "escape", escape)  # noqa: B010 (a module attribute, by name)
